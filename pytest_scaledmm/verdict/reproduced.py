"""Whether a rerun of a case reproduces the failure a report recorded (what a repro script says).

`expected` is what reports/repro.py writes as EXPECTED: the recorded outcome class, the short
class names of each side's error, and the side off the reference for a MISMATCH.
"""

from __future__ import annotations

from collections.abc import Mapping

from .classify import error_names, plain_names
from .outcome import INTERNAL_ERROR, LENIENT, MISMATCH, PASS, REFUSED, UNSUPPORTED, Outcome

REPRODUCED, NOT_REPRODUCED, FAILS_DIFFERENTLY = "REPRODUCED", "NOT REPRODUCED", "FAILS DIFFERENTLY"
# Both sides raise alike in each: the kernel's declared support (UNSUPPORTED, REFUSED) or the
# error itself (INTERNAL_ERROR) tells them apart; raising alike again reproduces any of them.
RAISES_ALIKE = (UNSUPPORTED, REFUSED, INTERNAL_ERROR)


def reproduces(expected: Mapping, observed: Outcome) -> bool:
    """The same outcome class (alike refusals count as one), the same error classes on each
    side that raised, the same side off the reference."""

    want = expected["outcome"]
    if observed.outcome != want and not (observed.outcome in RAISES_ALIKE and want in RAISES_ALIKE):
        return False
    for side, error in (("eager_error", observed.eager_error), ("compiled_error", observed.compiled_error)):
        recorded = {name for short in expected.get(side) or () if short for name in plain_names(short)}
        if recorded and error is not None and not recorded & error_names(error):
            return False
    return want != MISMATCH or observed.layer == expected.get("mismatch_side")


def replay_verdict(expected: Mapping, observed: Outcome) -> str:
    """REPRODUCED, NOT_REPRODUCED (the case no longer fails) or FAILS_DIFFERENTLY."""
    if reproduces(expected, observed):
        return REPRODUCED
    if observed.outcome in (PASS, UNSUPPORTED, LENIENT):
        return NOT_REPRODUCED
    return FAILS_DIFFERENTLY
