"""torch.library.opcheck for kernels that are custom ops, once per case family.

The check itself is verdict/opcheck.py (a repro script embeds it); this module keeps one result
per family for the process.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from ..verdict.case_axes import CaseParams
from ..verdict.opcheck import OpcheckResult, run_opcheck

# Cases that differ only in shapes, compile mode or special scale values share one opcheck:
# opcheck itself varies the shapes (test_aot_dispatch_dynamic), and modes do not reach the op.
FAMILY_AXES = (
    "kernel",
    "scale_a",
    "scale_b",
    "dtype_a",
    "dtype_b",
    "out_dtype",
    "bias",
    "use_fast_accum",
    "scale_layout",
    "activation_rank",
)


def family_key(params: CaseParams) -> str:
    # An axis the case was not given reads None, as recorded families always have.
    return "/".join(f"{axis}={params.value_of(axis) if params.has(axis) else None}" for axis in FAMILY_AXES)


def check_custom_op(
    cache: MutableMapping[str, OpcheckResult], params: CaseParams, op, inputs
) -> tuple[OpcheckResult, bool]:
    """The family's opcheck result, run now if this is the family's first case; also whether it
    came from the cache."""
    key = family_key(params)
    if key in cache:
        return cache[key], True
    result = run_opcheck(op, inputs, key)
    cache[key] = result
    return result, False
