"""The one cost model: a case's expected seconds, from its compile mode's figure
(matrix/compile_modes.py, CompileMode.expected_s) and what its parameters add. Sharding deals
cases out by it (shard.py) and the scheduler hands out the costliest first by it when no earlier
report measured the case (schedule.py)."""

from __future__ import annotations

from ..matrix.compile_modes import INDUCTOR_SECONDS, compile_mode
from ..verdict.case_axes import CaseParams

# A case expected to be refused is answered before any compilation finishes.
REFUSED_FACTOR = 0.5
# Scales or operands the host holds: Inductor's lowering takes another path, often slower.
HOST_FACTOR = 1.5


def case_cost(params: CaseParams) -> float:
    """Expected seconds of one case."""
    try:
        seconds = compile_mode(params.mode).expected_seconds
    except KeyError:  # a mode this process does not know (a plugin's, not registered here)
        seconds = INDUCTOR_SECONDS
    if params.purpose not in (None, "valid"):
        seconds *= REFUSED_FACTOR
    if params.operand_layout == "scale_on_host":
        seconds *= HOST_FACTOR
    return seconds
