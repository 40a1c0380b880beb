"""What each side of a case did, read from its record: the eager side and the compiled side each
passed, were off the reference, gave non-finite values where the reference has none, or raised
(which error). The outcome class folds both sides into one name: a MISMATCH of eager says nothing
about whether compiling then worked. The gate compares the sides one by one, so that a compiled
side that starts raising behind an old eager bug is a regression (`worse_sides`) and one that
raises another error or is off another way is a changed failure (`changed_sides`).

Besides the first call of each side, a record holds other checks that a first failure does not
speak for: the serving loop's later calls (`later`, kept beside a failed first check) and a
dynamic-M case's other M sizes (`extra.dynamic_m.shapes`). Each is compared as a side of its own
(`named_checks`).

No torch import here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..verdict.classify import plain_names
from ..verdict.outcome import normalise_message
from ..verdict.signature_text import (
    IN_PLACE_CALL_RAISED,
    LATER_CALLS_RAISED,
    NONFINITE_PATTERN,
    NONFINITE_POSITIONS,
    OTHER_M_CALL_RAISED,
    SEQUENCE_CALL_RAISED,
    WRONG_SIGN_INFINITIES,
)

SIDES = ("eager", "compiled")

PASSED, OFF, NONFINITE, RAISED, UNCHECKED = "passed", "off", "non-finite", "raised", "not checked"
# Worse is higher. A side with no check and no error says nothing: it cannot be shown not worse.
RANK = {PASSED: 0, OFF: 1, NONFINITE: 2, RAISED: 3}
_NONFINITE_PROBLEMS = (NONFINITE_POSITIONS, WRONG_SIGN_INFINITIES)


@dataclass(frozen=True)
class SideOutcome:
    state: str  # PASSED, OFF, NONFINITE, RAISED or UNCHECKED
    error: str | None = None  # the raised error's root type, as recorded
    what: str = ""  # how: a raised error's normalised message, an off check's problem or pattern

    @property
    def text(self) -> str:
        return f"{self.state} {self.error}" if self.error else self.state


def _mapping(value) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def named_checks(record: Mapping) -> dict[str, Mapping | None]:
    """Every check of a record by the name of what it checked: "eager", "compiled" (the first
    calls), "<side> later calls" (the serving loop's, where the first call failed already) and
    "compiled at <label>" (a dynamic-M case's other M sizes)."""
    errors = _mapping(record.get("errors"))
    found: dict[str, Mapping | None] = {}
    for side in SIDES:
        check = errors.get(side)
        found[side] = check if isinstance(check, Mapping) else None
        if isinstance(check, Mapping) and check.get("ok") is False and "later" in check:
            later = check.get("later")
            found[f"{side} later calls"] = later if isinstance(later, Mapping) else None
    shapes = _mapping(_mapping(record.get("extra")).get("dynamic_m")).get("shapes")
    for shape in shapes if isinstance(shapes, list) else ():
        if isinstance(shape, Mapping) and isinstance(shape.get("label"), str):
            found[f"compiled at {shape['label']}"] = shape
    return found


def _raised(error: Mapping) -> SideOutcome:
    kind = error.get("root_type") or error.get("type")
    name = kind.rsplit(".", 1)[-1] if isinstance(kind, str) else "an error of no type"
    message = error.get("root_message") or error.get("message")
    return SideOutcome(RAISED, name, normalise_message(message, max_lines=1) if isinstance(message, str) else "")


def _of_check(check: Mapping | None) -> SideOutcome:
    if not isinstance(check, Mapping) or type(check.get("ok")) is not bool:
        return SideOutcome(UNCHECKED)
    if check["ok"]:
        return SideOutcome(PASSED)
    problem, pattern = (text if isinstance(text := check.get(key), str) else "" for key in ("problem", "pattern"))
    for prefix in (LATER_CALLS_RAISED, IN_PLACE_CALL_RAISED, OTHER_M_CALL_RAISED, SEQUENCE_CALL_RAISED):
        if problem.startswith(prefix):
            raised = problem[len(prefix) :].strip()
            return SideOutcome(RAISED, raised.rsplit(".", 1)[-1] or "an error of no type", raised)
    if "values" in check:  # a wrong dtype or shape: its values' own measures do not make it non-finite
        return SideOutcome(OFF, what=problem)
    nonfinite = check.get("nonfinite")
    if (type(nonfinite) is int and nonfinite > 0) or pattern == NONFINITE_PATTERN or problem in _NONFINITE_PROBLEMS:
        return SideOutcome(NONFINITE, what=problem or pattern)
    return SideOutcome(OFF, what=problem or pattern)


def side_outcomes(record: Mapping) -> dict[str, SideOutcome]:
    """Each named check's outcome; a first call that raised is RAISED whatever its check says."""
    found = {name: _of_check(check) for name, check in named_checks(record).items()}
    for side in SIDES:
        error = record.get(f"{side}_error")
        if isinstance(error, Mapping):
            found[side] = _raised(error)
    return found


def _same_error(was: SideOutcome, now: SideOutcome) -> bool:
    # Dynamo renames a traced user exception across releases (ObservedRuntimeError(Error)).
    return bool(plain_names(was.error or "") & plain_names(now.error or ""))


def _worse(was: SideOutcome, now: SideOutcome) -> bool:
    if now.state == UNCHECKED:
        return was.state != UNCHECKED  # checked before and not now: not shown to be no worse
    if was.state == UNCHECKED:
        return now.state != PASSED  # nothing before said this side failed
    if RANK[now.state] != RANK[was.state]:
        return RANK[now.state] > RANK[was.state]
    return now.state == RAISED and not _same_error(was, now)  # a new error type


def _pairs(before: Mapping, after: Mapping):
    was, now = side_outcomes(before), side_outcomes(after)
    for name in dict.fromkeys([*was, *now]):
        yield name, was.get(name, SideOutcome(UNCHECKED)), now.get(name, SideOutcome(UNCHECKED))


def worse_sides(before: Mapping, after: Mapping) -> list[str]:
    """Each side that got worse from `before` to `after`, as "compiled: passed -> raised
    InductorError": right now off, off now non-finite or raising, a new error type, a side not
    known to fail before failing now, or checked before and not now."""
    return [f"{name}: {was.text} -> {now.text}" for name, was, now in _pairs(before, after) if _worse(was, now)]


def _clipped(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def changed_sides(before: Mapping, after: Mapping) -> list[str]:
    """Each side that fails in both the same way by rank but differently: the same error type
    with another message, or off with another problem ("dtype ..." now "shape ...")."""
    return [
        f"{name}: {was.text} ({_clipped(was.what)}) -> {now.text} ({_clipped(now.what)})"
        for name, was, now in _pairs(before, after)
        if was.state == now.state and was.state in (RAISED, OFF, NONFINITE) and was.what != now.what
    ]
