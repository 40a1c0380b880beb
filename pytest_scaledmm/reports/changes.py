"""One change of a case between two reports, as every reader groups and words it: `compare`'s
terminal table, its Markdown and HTML, and the gate's reasons. The key is (kind, outcome before,
outcome after, root cause of the failing side); the wording is `PASS -> MISMATCH: <cause>` and
one real example of it, numbers kept (causes.example_line).

No torch import here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .cause_text import shown_cause
from .causes import example_line
from .compare import OK, Transition, category
from .sides import changed_sides, worse_sides


@dataclass(frozen=True)
class Change:
    kind: str
    before: str  # outcome class before, "-" for no record
    after: str
    cause: str  # the failing side's root cause as shown ("" when neither side fails)
    sides: str = ""  # the sides that did worse or changed, for a case failing in both ("" otherwise)

    @property
    def key(self) -> tuple:
        return (self.kind, self.before, self.after, self.sides, self.cause)

    @property
    def text(self) -> str:
        """`PASS -> MISMATCH: kernel k: values off the reference by one constant factor`;
        `MISMATCH -> MISMATCH (compiled: passed -> raised InductorError): ...` for a side."""
        sides = f" ({self.sides})" if self.sides else ""
        return f"{self.before} -> {self.after}{sides}" + (f": {self.cause}" if self.cause else "")


def failing_record(t: Transition) -> Mapping | None:
    """The record whose cause names the change: the newer one when it fails, else the older."""
    for record in (t.after, t.before):
        if record and record.get("signature") and category(record["outcome"]) != OK:
            return record
    return None


def change_of(t: Transition, kind: str | None = None) -> Change:
    """The change a transition is (`kind`: instead of the transition's own, as the gate's
    "worse" is)."""
    cause = shown_cause(t.root_cause, (t.before_outcome, t.after_outcome)) if t.root_cause else ""
    # Which side did worse says what changed only when the case failed before too.
    failed_before = t.before is not None and category(t.before["outcome"]) != OK
    sides = ""
    if failed_before and t.before and t.after:
        sides = "; ".join(worse_sides(t.before, t.after) or changed_sides(t.before, t.after))
    return Change(kind or t.kind, t.before_outcome, t.after_outcome, cause, sides)


def example_of(t: Transition) -> str:
    """One real message of the change, with its case: `<message> (case <id>)`."""
    record = failing_record(t)
    return example_line(record) if record is not None else f"case {t.case_id}"


def grouped(transitions: Iterable[Transition], kind: str | None = None) -> list[tuple[Change, list[Transition]]]:
    """Transitions by change, the largest first (then by key): one group per bug and change."""
    groups: dict[Change, list[Transition]] = {}
    for t in transitions:
        groups.setdefault(change_of(t, kind), []).append(t)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0].key))


def count_text(members) -> str:
    return f"{len(members)} cases" if len(members) > 1 else "1 case"
