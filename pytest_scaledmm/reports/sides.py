"""What each side of a case did, read from its record: the eager side and the compiled side each
passed, were off the reference, gave non-finite values where the reference has none, or raised
(which error). The outcome class folds both sides into one name: a MISMATCH of eager says nothing
about whether compiling then worked. The gate compares the sides one by one (`worse_sides`), so
that a compiled side that starts raising behind an old eager bug is a regression.

No torch import here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..verdict.signature_text import NONFINITE_PATTERN, NONFINITE_POSITIONS, WRONG_SIGN_INFINITIES

SIDES = ("eager", "compiled")

PASSED, OFF, NONFINITE, RAISED, UNCHECKED = "passed", "off", "non-finite", "raised", "not checked"
# Worse is higher. A side with no check and no error says nothing: it cannot be shown not worse.
RANK = {PASSED: 0, OFF: 1, NONFINITE: 2, RAISED: 3}
_NONFINITE_PROBLEMS = (NONFINITE_POSITIONS, WRONG_SIGN_INFINITIES)


@dataclass(frozen=True)
class SideOutcome:
    state: str  # PASSED, OFF, NONFINITE, RAISED or UNCHECKED
    error: str | None = None  # the raised error's root type, as recorded

    @property
    def text(self) -> str:
        return f"{self.state} {self.error}" if self.error else self.state


def _short_type(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def side_outcome(record: Mapping, side: str) -> SideOutcome:
    error = record.get(f"{side}_error")
    if isinstance(error, Mapping):
        kind = error.get("root_type") or error.get("type")
        return SideOutcome(RAISED, _short_type(kind) if isinstance(kind, str) else "an error of no type")
    checks = record.get("errors")
    check = checks.get(side) if isinstance(checks, Mapping) else None
    if not isinstance(check, Mapping) or type(check.get("ok")) is not bool:
        return SideOutcome(UNCHECKED)
    if check["ok"]:
        return SideOutcome(PASSED)
    nonfinite = check.get("nonfinite")
    if (
        (type(nonfinite) is int and nonfinite > 0)
        or check.get("pattern") == NONFINITE_PATTERN
        or check.get("problem") in _NONFINITE_PROBLEMS
    ):
        return SideOutcome(NONFINITE)
    return SideOutcome(OFF)


def sides_of(record: Mapping) -> tuple[SideOutcome, ...]:
    return tuple(side_outcome(record, side) for side in SIDES)


def _worse(was: SideOutcome, now: SideOutcome) -> bool:
    if was.state == UNCHECKED:
        return False  # the baseline shows nothing this side could have lost
    if now.state == UNCHECKED:
        return True
    if RANK[now.state] != RANK[was.state]:
        return RANK[now.state] > RANK[was.state]
    return now.state == RAISED and now.error != was.error  # a new error type


def worse_sides(before: Mapping, after: Mapping) -> list[str]:
    """Each side that got worse from `before` to `after`, as "compiled: passed -> raised
    InductorError": right now off, off now non-finite or raising, a new error type, or checked
    before and not now."""
    return [
        f"{side}: {was.text} -> {now.text}"
        for side, was, now in zip(SIDES, sides_of(before), sides_of(after))
        if _worse(was, now)
    ]
