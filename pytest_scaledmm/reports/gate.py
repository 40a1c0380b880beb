"""The upgrade gate: a candidate report against a baseline -> pass, or fail with the reasons.

It fails closed: what it cannot back is a failure. One reason line each when
- a case newly fails: it passed in the baseline and fails now (regression), or fails in both
  with another outcome class or signature (a new failure hiding behind an old one);
- a run is incomplete (`session.complete` false, or fewer records than generated cases), or
  cases of the baseline are missing from the candidate;
- either report records a case id more than once, the candidate has no cases, or the reports
  have no case in common;
- a case that ran in the baseline is UNSUPPORTED or SKIPPED in the candidate (capability lost);
- a record says XFAIL without saying what failed.

Expected failures are recomputed, never read from the records: every XFAIL / FIXED_UPSTREAM is
restored to its original outcome in both reports and the known-failure catalogue is applied
again, from the matrix given, or from the matrix the candidate names when that file's digest is
the hash the candidate recorded; otherwise from none (a note says why).

`allow_missing` is the opt-in for a partial comparison: incomplete runs and missing cases become
notes. `allow_capability_loss` does the same for capability lost. Fixes, capabilities gained and
cases only in the candidate are notes.
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
    OK,
    REGRESSION,
    SIGNATURE_CHANGED,
    Comparison,
    Transition,
    category,
    compare_reports,
)
from ..matrix.known_failures import restore_original_outcomes
from .report import duplicate_ids

FAILING_KINDS = (REGRESSION, SIGNATURE_CHANGED)
# How the opt-ins are spelled where the gate runs: the console script's flags by default.
CLI_FLAGS = {"allow_missing": "--allow-missing", "allow_capability_loss": "--allow-capability-loss"}


class GateFailure(Exception):
    """The gate failed; `reasons` holds one line per reason."""

    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        super().__init__("\n".join(reasons))


@dataclass
class GateResult:
    comparison: Comparison
    failures: list[Transition] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    waived: int = 0  # reasons an opt-in turned into notes
    failure_reasons: int = 0  # how many of `reasons` are about the cases in `failures`

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
            partial = " (a partial comparison: see the notes)" if self.waived else ""
            head = [f"gate passed: no new failure in {candidate} against {baseline}{partial}"]
        elif self.failures:
            others = len(self.reasons) - self.failure_reasons
            more = f", and {others} other reason(s)" if others > 0 else ""
            head = [f"gate FAILED: {len(self.failures)} case(s) newly fail in {candidate} against {baseline}{more}"]
        else:
            head = [f"gate FAILED: {candidate} against {baseline} is not proven ({len(self.reasons)} reason(s))"]
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


def incompleteness(report: Mapping) -> Optional[str]:
    """Why a report does not cover its run, or None. A report that does not say it completed did
    not; one with fewer records than generated cases did not either, whatever it says."""
    session = report.get("session") or {}
    cases = report.get("cases") or []
    if session.get("complete") is not True:
        reasons = session.get("incomplete_reasons")
        if isinstance(reasons, list) and reasons:
            return "; ".join(str(r) for r in reasons)
        return "it says it did not complete" if "complete" in session else "it does not say that it completed"
    generated = session.get("generated", (report.get("matrix") or {}).get("cases"))
    if isinstance(generated, int) and len(cases) < generated:
        return f"{len(cases)} of {generated} generated case(s) have a record"
    return None


def check(
    baseline: tuple[Path, dict],
    candidate: tuple[Path, dict],
    catalogue=None,
    limit: int = 20,
    *,
    allow_missing: bool = False,
    allow_capability_loss: bool = False,
    catalogue_note: Optional[str] = None,
    flags: Mapping[str, str] = CLI_FLAGS,
) -> GateResult:
    """Gate `candidate` against `baseline`, each a (path, loaded report) pair; `catalogue` is the
    known-failure catalogue to recompute expected failures with (None: every failure counts)."""
    reasons: list[str] = []
    notes: list[str] = []
    waived = 0

    def unless(allowed: bool, flag: str, text: str, verb: str) -> None:
        nonlocal waived
        if allowed:
            waived += 1
            notes.append(f"{verb} ({flags[flag]}): {text}")
        else:
            reasons.append(text)

    reports = {"baseline": baseline, "candidate": candidate}
    for role, (_, data) in reports.items():
        duplicates = duplicate_ids(data)
        if duplicates:
            cid, count = next(iter(duplicates.items()))
            reasons.append(
                f"{role}: {len(duplicates)} case id(s) appear more than once, e.g. {cid} ({count} records):"
                " which record counts is unknown"
            )
    if not candidate[1]["cases"]:
        reasons.append("the candidate has no cases: nothing ran, so nothing passed")
    for role, (_, data) in reports.items():
        why = incompleteness(data)
        if why:
            unless(allow_missing, "allow_missing", f"the {role} run is incomplete: {why}", "skipped")

    # Expected failures: restored in both reports, then recomputed from the catalogue.
    restored = []
    for role, (path, data) in reports.items():
        data, unexplained = restore_original_outcomes(data)
        if unexplained:
            reasons.append(f"{role}: {len(unexplained)} case(s) XFAIL without its original outcome, e.g. {unexplained[0]}")
        if catalogue:
            data = catalogue.apply_report(data)
        restored.append((path, data))
    if catalogue_note:
        notes.append(catalogue_note)

    comparison = compare_reports(restored)
    by_kind = comparison.by_kind()
    removed = by_kind[CASE_REMOVED]
    common = len(comparison.case_ids) - len(by_kind[CASE_ADDED]) - len(removed)
    if common == 0 and candidate[1]["cases"]:
        reasons.append(
            "no case in common between the reports: another matrix, profile, seed or hypothesis version? "
            "Nothing was compared, so nothing passed"
        )
    if removed:
        passed = sum(1 for t in removed if category(t.before_outcome) == OK)
        of_them = f" ({passed} of them passed there)" if passed else ""
        unless(
            allow_missing,
            "allow_missing",
            f"{len(removed)} case(s) of the baseline are missing from the candidate{of_them}, e.g. {removed[0].case_id}",
            "skipped",
        )
    failures = [t for kind in FAILING_KINDS for t in by_kind[kind]]
    failure_reasons = _group_reasons(failures, limit)
    reasons += failure_reasons
    lost = by_kind[CAPABILITY_LOST]
    if lost:
        passed = sum(1 for t in lost if category(t.before_outcome) == OK)
        unless(
            allow_capability_loss,
            "allow_capability_loss",
            f"capability lost: {len(lost)} case(s) ran in the baseline and are UNSUPPORTED or SKIPPED in the candidate"
            f" ({passed} passed there), e.g. {lost[0].case_id}",
            "accepted",
        )
    notes += [n for n in comparison.notes if n not in comparison.report_notes]
    for kind in (KNOWN_FAILURE, FIX, CAPABILITY_GAINED):
        if by_kind[kind]:
            extra = ""
            if kind == CAPABILITY_GAINED:
                failing = sum(1 for t in by_kind[kind] if category(t.after_outcome) == FAILING)
                extra = f" ({failing} of them fail now that they run)" if failing else ""
            notes.append(f"{len(by_kind[kind])} case(s) {kind}{extra}")
    added_failing = [t for t in by_kind[CASE_ADDED] if category(t.after_outcome) == FAILING]
    if added_failing:
        notes.append(f"{len(added_failing)} case(s) only in the candidate fail (not gated: no baseline)")
    return GateResult(comparison, failures, reasons, notes, waived, len(failure_reasons))


def resolve_catalogue(matrix_path: Optional[str], candidate: Mapping, spec=None):
    """(catalogue, note): the catalogue of the matrix given (`spec`, or the file `matrix_path`),
    else of the matrix the candidate names when that file's digest equals the hash the candidate
    recorded; else none, and the note says why. A matrix given that cannot be read raises
    MatrixError."""
    from ..matrix.known_failures import Catalogue
    from ..matrix.spec import MatrixError, load_spec

    if spec is not None:
        return Catalogue.from_spec(spec), None
    if matrix_path:
        return Catalogue.from_spec(load_spec(matrix_path)), None
    matrix = candidate.get("matrix") or {}
    path = matrix.get("path")
    if not path:
        why = "the candidate names no matrix"
    elif not Path(path).is_file():
        why = f"{path} (the candidate's matrix) is not here"
    else:
        try:
            named = load_spec(path)
        except MatrixError as exc:
            why = f"the candidate's matrix cannot be used ({exc})"
        else:
            if named.digest == matrix.get("hash"):
                return Catalogue.from_spec(named), None
            why = f"{path} has changed since the candidate ran (hash {named.digest}, the report has {matrix.get('hash')})"
    return None, f"no known-failure catalogue: {why}; expected failures count as the failures they are (--matrix gives one)"


def run_gate(
    baseline: tuple[Path, dict],
    candidate: tuple[Path, dict],
    *,
    matrix_path: Optional[str] = None,
    spec=None,
    allow_missing: bool = False,
    allow_capability_loss: bool = False,
    flags: Mapping[str, str] = CLI_FLAGS,
) -> GateResult:
    """The gate as `scaledmm gate` and `pytest --scaledmm-baseline` run it."""
    catalogue, note = resolve_catalogue(matrix_path, candidate[1], spec)
    return check(
        baseline,
        candidate,
        catalogue,
        allow_missing=allow_missing,
        allow_capability_loss=allow_capability_loss,
        catalogue_note=note,
        flags=flags,
    )
