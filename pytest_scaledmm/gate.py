"""The upgrade gate: a candidate report against a baseline -> pass, or fail with the reasons.

A case fails the gate when it passed in the baseline and fails in the candidate (regression), or
fails in both with another outcome class or signature (a new failure hiding behind an old one).
The known-failure catalogue is honoured: a failure it predicts is expected. Capability changes
(unsupported <-> supported), fixes and cases present in one report only never fail the gate;
they are listed as notes. Two reports with no case in common fail it: a gate that compared
nothing must not pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from .compare import (
    CAPABILITY_GAINED,
    CAPABILITY_LOST,
    CASE_ADDED,
    CASE_REMOVED,
    FAILING,
    FIX,
    KNOWN_FAILURE,
    REGRESSION,
    SIGNATURE_CHANGED,
    Comparison,
    Transition,
    category,
    compare_reports,
)

FAILING_KINDS = (REGRESSION, SIGNATURE_CHANGED)


class GateFailure(Exception):
    """The candidate has new failures; `reasons` holds one line per failure signature."""

    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        super().__init__("\n".join(reasons))


@dataclass
class GateResult:
    comparison: Comparison
    failures: list[Transition] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.reasons

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def raise_for_failure(self) -> None:
        if not self.passed:
            raise GateFailure(self.reasons)

    def lines(self) -> list[str]:
        baseline, candidate = (c.label for c in self.comparison.columns)
        if self.passed:
            head = [f"gate passed: no new failure in {candidate} against {baseline}"]
        else:
            head = [f"gate FAILED: {len(self.failures)} case(s) newly fail in {candidate} against {baseline}"]
        return head + [f"  {r}" for r in self.reasons] + [f"  note: {n}" for n in self.notes]


def _group_reasons(transitions: list[Transition], limit: int) -> list[str]:
    """One reason per (kind, outcome change, signature): forty cases of one bug are one line."""
    grouped: dict[tuple, list[Transition]] = {}
    for t in transitions:
        grouped.setdefault((t.kind, t.before_outcome, t.after_outcome, t.signature), []).append(t)
    ordered = sorted(grouped.items(), key=lambda item: (item[0][0] != REGRESSION, -len(item[1]), item[0]))
    reasons = []
    for (kind, before, after, signature), members in ordered[:limit]:
        example = members[0].case_id
        count = f"{len(members)} cases" if len(members) > 1 else "1 case"
        reasons.append(f"{kind}: {count} {before} -> {after}: {signature or '(no signature)'} (e.g. {example})")
    if len(ordered) > limit:
        reasons.append(f"... and {len(ordered) - limit} more signature(s)")
    return reasons


def check(baseline: tuple[Path, dict], candidate: tuple[Path, dict], catalogue=None, limit: int = 20) -> GateResult:
    """Gate `candidate` against `baseline`, each a (path, loaded report) pair."""
    if catalogue:
        candidate = (candidate[0], catalogue.apply_report(candidate[1]))
    comparison = compare_reports([baseline, candidate])
    by_kind = comparison.by_kind()
    failures = [t for kind in FAILING_KINDS for t in by_kind[kind]]
    result = GateResult(comparison, failures, _group_reasons(failures, limit), list(comparison.notes))
    common = len(comparison.case_ids) - len(by_kind[CASE_ADDED]) - len(by_kind[CASE_REMOVED])
    if common == 0:
        result.reasons.append(
            "no case in common between the reports: another matrix, profile, seed or hypothesis version? "
            "Nothing was compared, so nothing passed"
        )
    for kind in (CAPABILITY_LOST, KNOWN_FAILURE, FIX, CAPABILITY_GAINED):
        if by_kind[kind]:
            extra = ""
            if kind == CAPABILITY_GAINED:
                failing = sum(1 for t in by_kind[kind] if category(t.after_outcome) == FAILING)
                extra = f" ({failing} of them fail now that they run)" if failing else ""
            result.notes.append(f"{len(by_kind[kind])} case(s) {kind}{extra}")
    added_failing = [t for t in by_kind[CASE_ADDED] if category(t.after_outcome) == FAILING]
    if added_failing:
        result.notes.append(f"{len(added_failing)} case(s) only in the candidate fail (not gated: no baseline)")
    if by_kind[CASE_REMOVED]:
        result.notes.append(f"{len(by_kind[CASE_REMOVED])} case(s) of the baseline are not in the candidate")
    return result


def catalogue_for(matrix_path: Optional[str], candidate: Mapping):
    """The catalogue of the given matrix, else of the matrix the candidate recorded (when that file
    is here); None when there is none."""
    from .known_failures import Catalogue
    from .spec import load_spec

    path = matrix_path or (candidate.get("matrix") or {}).get("path")
    if not path or (matrix_path is None and not Path(path).is_file()):
        return None
    return Catalogue.from_spec(load_spec(path))
