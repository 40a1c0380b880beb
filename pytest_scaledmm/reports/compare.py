"""Align cases by id across any number of reports and classify how each case changed.

Columns are environments (one report each: a torch version, a runner, an arch). Between two
neighbouring columns a case can:

- regress: it passed, now it fails; or it fails in both and one side does worse (a compiled side
  that passed now raises, an eager side off now non-finite, a new error type: reports/sides.py);
- be fixed: it failed, now it passes;
- change signature: it fails in both, differently (another outcome class or signature, or a side
  raising another message or off another way);
- gain or lose a capability: unsupported or skipped on one side, run on the other. Never a
  regression: fp8 on a CPU build that lacks it is not a bug of the newer release;
- become a known failure: it passed, now fails as the known-failure catalogue predicts;
- be added or removed: only one report has it (another matrix, profile or seed).

A strict-only failure (error parity on invalid input, outcome.OutcomeClass.strict_only) counts
as ok unless the newer report of a pair was strict (its session.strict_errors; missing is
strict), and both records of the pair are judged by that one rule. A case where eager raised
that is UNSUPPORTED now (both refuse alike) lost no capability: eager never had it.

No torch import here.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from packaging.version import InvalidVersion, Version

from ..matrix.case_params import KERNEL_SHORT, SCALE_SHORT
from ..records import CaseRecord, Report
from ..verdict import outcome as oc
from ..verdict.kernel_choice import label_of
from .printable import printable
from .provenance import code_changes, repeated_note
from .report import ReportError, duplicate_ids, load_report, root_cause_of, shard_advice
from .sides import changed_sides, worse_sides

# Outcome categories.
OK, FAILING, KNOWN, ABSENT = "ok", "failing", "known", "absent"

REGRESSION = "regression"
SIGNATURE_CHANGED = "signature changed"
KNOWN_FAILURE = "known failure"
CAPABILITY_LOST = "capability lost"
FIX = "fix"
CAPABILITY_GAINED = "capability gained"
CASE_ADDED = "case added"
CASE_REMOVED = "case removed"
# Display order: what needs a person first.
TRANSITION_KINDS = (
    REGRESSION,
    SIGNATURE_CHANGED,
    KNOWN_FAILURE,
    CAPABILITY_LOST,
    FIX,
    CAPABILITY_GAINED,
    CASE_ADDED,
    CASE_REMOVED,
)


def severity(outcome: str) -> int:
    """The class's severity rank, 0 the worst (outcome.CLASSES); a class this version does not
    know ranks worse still."""
    known = oc.outcome_class(outcome)
    return known.severity if known else -1


DEFAULT_GROUP_BY = ("kernel", "dtype_a", "dtype_b", "scale_a", "scale_b")


@overload
def category(outcome: str, strict: bool = True) -> str: ...
@overload
def category(outcome: None, strict: bool = True) -> None: ...
def category(outcome: str | None, strict: bool = True) -> str | None:
    """OK, KNOWN, ABSENT or FAILING (outcome.OutcomeClass.category_when); None for no record.
    `strict`: whether strict-only failures fail (the newer report's session.strict_errors)."""
    if outcome is None:
        return None
    known = oc.outcome_class(outcome)
    return known.category_when(strict) if known else FAILING  # a class a newer plugin adds counts as failing


def _failure_key(record: CaseRecord) -> tuple:
    """(outcome class, signature): an expected failure by the class it had before the catalogue
    (each side's own outcome is compared apart: sides.py)."""
    outcome: str | None = record["outcome"]
    if outcome == oc.XFAIL:
        outcome = (record.get("known_failure") or {}).get("original_outcome", outcome)
    known = oc.outcome_class(outcome)
    if known is not None and known.same_failure_as:
        outcome = known.same_failure_as
    return outcome, record.get("signature")


def classify(before: CaseRecord | None, after: CaseRecord | None, strict: bool = True) -> str | None:
    """The transition from one record of a case to the next; None when nothing changed.
    `strict`: the newer report's rule for strict-only failures, applied to both records."""
    if before is None and after is None:
        return None
    if before is None:
        return CASE_ADDED
    if after is None:
        return CASE_REMOVED
    was, now = category(before["outcome"], strict), category(after["outcome"], strict)
    if was == ABSENT and now == ABSENT:
        return None
    if was == ABSENT:
        return CAPABILITY_GAINED
    if now == ABSENT:
        earlier = oc.outcome_class(before["outcome"])
        if after["outcome"] == oc.UNSUPPORTED and earlier is not None and earlier.eager_raises:
            # Eager refused before too; both refuse alike now: parity, not a capability lost.
            return FIX if was in (FAILING, KNOWN) else None
        return CAPABILITY_LOST
    if was == OK:
        return {OK: None, FAILING: REGRESSION, KNOWN: KNOWN_FAILURE}[now]
    if now == OK:
        return FIX
    # Failing in both (known or not): a side doing worse is a regression whatever the combined
    # class says (a compiled side raising behind an old eager mismatch); else the same failure
    # is no news.
    if worse_sides(before, after):
        return REGRESSION
    if _failure_key(before) != _failure_key(after) or changed_sides(before, after):
        return SIGNATURE_CHANGED
    return None


@dataclass(frozen=True)
class Column:
    label: str
    path: str
    environment: Mapping
    matrix: Mapping
    session: Mapping
    summary: Mapping

    @property
    def torch(self) -> str:
        return str(self.environment.get("torch") or "?")

    @property
    def strict(self) -> bool:
        """Whether its run failed on strict-only failures (session.strict_errors; missing: yes)."""
        return oc.strict_errors_of(self.session)


@dataclass(frozen=True)
class Transition:
    kind: str
    case_id: str
    before_label: str
    after_label: str
    before: CaseRecord | None
    after: CaseRecord | None

    @property
    def before_outcome(self) -> str:
        return self.before["outcome"] if self.before else "-"

    @property
    def after_outcome(self) -> str:
        return self.after["outcome"] if self.after else "-"

    @property
    def signature(self) -> str:
        for record in (self.after, self.before):
            signature = record.get("signature") if record else None
            if record and signature and category(record["outcome"]) != OK:
                return signature
        return ""

    @property
    def root_cause(self) -> str:
        """The root cause of the failing side of the change (report.root_cause_of), else ""."""
        for record in (self.after, self.before):
            if record and record.get("signature") and category(record["outcome"]) != OK:
                return root_cause_of(record)
        return ""


@dataclass(frozen=True)
class KernelChange:
    """A case whose Inductor GEMM kernel (the record's extra.kernel_choice) differs between two
    neighbouring reports: news for performance, not a verdict (the outcomes say that)."""

    case_id: str
    before_label: str
    after_label: str
    before: str  # kernel_choice label, e.g. "aten"
    after: str
    before_kernels: tuple = ()
    after_kernels: tuple = ()


def kernel_change(
    case_id: str, before_label: str, after_label: str, before: CaseRecord | None, after: CaseRecord | None
) -> KernelChange | None:
    """The change of chosen kernel between two records of a case; None unless both name one."""
    extras = [r.get("extra") if isinstance(r, Mapping) else None for r in (before, after)]
    choices = [extra.get("kernel_choice") if isinstance(extra, Mapping) else None for extra in extras]
    was, now = (label_of(c) for c in choices)
    if was is None or now is None or was == now:
        return None
    raw = [
        tuple(k for k in c["kernels"] if isinstance(k, str))
        if isinstance(c, Mapping) and isinstance(c.get("kernels"), list)
        else ()
        for c in choices
    ]
    return KernelChange(case_id, before_label, after_label, was, now, raw[0], raw[1])


@dataclass
class Comparison:
    columns: list[Column]
    case_ids: list[str]
    grid: dict[str, list[CaseRecord | None]]
    transitions: list[Transition]
    notes: list[str] = field(default_factory=list)
    # The notes about single reports (an incomplete run, duplicate ids): the gate has reasons of
    # its own for these.
    report_notes: list[str] = field(default_factory=list)
    kernel_changes: list[KernelChange] = field(default_factory=list)

    def by_kind(self) -> dict[str, list[Transition]]:
        out: dict[str, list[Transition]] = {kind: [] for kind in TRANSITION_KINDS}
        for t in self.transitions:
            out[t.kind].append(t)
        return out

    def kind_counts(self, before_label: str | None = None, after_label: str | None = None) -> Counter:
        return Counter(
            t.kind
            for t in self.transitions
            if (before_label is None or t.before_label == before_label)
            and (after_label is None or t.after_label == after_label)
        )

    def params(self, case_id: str) -> Mapping:
        return next((r["params"] for r in self.grid[case_id] if r and r.get("params")), {})

    def pairs(self) -> list[tuple[Column, Column]]:
        return list(zip(self.columns, self.columns[1:]))


def torch_sort_key(report: Report):
    env = report.get("environment") or {}
    try:
        version = Version(str(env.get("torch")))
    except InvalidVersion:
        version = Version("0")
    return (version, str(env.get("arch") or ""), str(env.get("tox_env") or ""))


def load_reports(paths: Iterable[str | os.PathLike]) -> list[tuple[Path, Report]]:
    """Load every report; a directory stands for its *.json files ordered by torch version
    (2.3 before 2.13: versions, never strings), files keep the order they were given in."""
    loaded: list[tuple[Path, Report]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = [(p, load_report(p)) for p in sorted(path.glob("*.json"))]
            if not found:
                raise ReportError(path, "directory holds no *.json report")
            loaded.extend(sorted(found, key=lambda item: torch_sort_key(item[1])))
        else:
            loaded.append((path, load_report(path)))
    return loaded


def column_label(environment: Mapping) -> str:
    if environment.get("tox_env"):
        return str(environment["tox_env"])
    return f"torch{environment.get('torch', '?')}/{environment.get('arch', '?')}"


def _unique_labels(reports: Sequence[tuple[Path, Report]]) -> list[str]:
    """Environment labels; where two reports share one, the arch tells them apart (same tox env on
    two runners), else the file name."""
    labels = [column_label(r.get("environment") or {}) for _, r in reports]
    archs = [str((r.get("environment") or {}).get("arch") or "") for _, r in reports]
    out = list(labels)
    for label in {name for name in labels if labels.count(name) > 1}:
        members = [i for i, name in enumerate(labels) if name == label]
        by_arch = len({archs[i] for i in members}) == len(members) and "/" not in label
        for i in members:
            stem = Path(reports[i][0]).stem
            out[i] = f"{label}/{archs[i]}" if by_arch else (stem if label in stem else f"{label} ({stem})")
    if len(set(out)) < len(out):
        out = [str(path) for path, _ in reports]
    return out


def compare_reports(reports: Sequence[tuple[Path, Report]]) -> Comparison:
    labels = _unique_labels(reports)
    # Labels and paths as they are shown: a file name that is not UTF-8 (or holds a control
    # character) escaped, so that every page and line can be written.
    columns = [
        Column(
            printable(label),
            printable(str(path)),
            report.get("environment") or {},
            report.get("matrix") or {},
            report.get("session") or {},
            report.get("summary") or Counter(c["outcome"] for c in report["cases"]),
        )
        for label, (path, report) in zip(labels, reports)
    ]
    # A duplicate id keeps its last record here; _report_notes names it, and the gate fails on it.
    by_id = [{c["id"]: c for c in report["cases"]} for _, report in reports]
    case_ids = sorted(set().union(*by_id)) if by_id else []
    grid = {cid: [cases.get(cid) for cases in by_id] for cid in case_ids}
    transitions, kernel_changes = [], []
    for i in range(1, len(columns)):
        for cid in case_ids:
            kind = classify(grid[cid][i - 1], grid[cid][i], columns[i].strict)
            if kind:
                transitions.append(
                    Transition(kind, cid, columns[i - 1].label, columns[i].label, grid[cid][i - 1], grid[cid][i])
                )
            moved = kernel_change(cid, columns[i - 1].label, columns[i].label, grid[cid][i - 1], grid[cid][i])
            if moved:
                kernel_changes.append(moved)
    report_notes = _report_notes(columns, reports)
    return Comparison(
        columns, case_ids, grid, transitions, _notes(columns) + report_notes, report_notes, kernel_changes
    )


def _report_notes(columns: Sequence[Column], reports: Sequence[tuple[Path, Report]]) -> list[str]:
    notes = []
    for column, (_, report) in zip(columns, reports):
        if column.session.get("complete") is False:
            why = "; ".join(str(r) for r in column.session.get("incomplete_reasons") or [])
            notes.append(
                f"{column.label}: the run did not finish; its report is partial" + (f" ({why})" if why else "")
            )
        advice = shard_advice(report)
        if advice:
            notes.append(f"{column.label}: {advice}; this column holds only that shard's cases")
        duplicates = duplicate_ids(report)
        if duplicates:
            cid, count = next(iter(duplicates.items()))
            notes.append(
                f"{column.label}: {len(duplicates)} case id(s) recorded more than once"
                f" (e.g. {cid}, {count} times); the last record is shown"
            )
        repeated = repeated_note(report["cases"])
        if repeated:
            notes.append(f"{column.label}: {repeated}")
    return notes


def _notes(columns: Sequence[Column]) -> list[str]:
    notes = []
    hashes = {c.matrix.get("hash") for c in columns if c.matrix.get("hash")}
    if len(hashes) > 1:
        notes.append(
            "the reports come from different matrix files or profiles: only cases present in both sides compare"
        )
    hypotheses = {h for h in (c.environment.get("hypothesis") for c in columns) if h}
    if len(hypotheses) > 1:
        notes.append(
            f"hypothesis versions differ ({', '.join(sorted(hypotheses))}):"
            " drawn cases may not line up; pin one version"
        )
    for old, new in zip(columns, columns[1:]):
        # A kernel's code that changed is what the gate judges, not a reason to fail: said here.
        notes += code_changes(
            (old.label, {"matrix": old.matrix, "environment": old.environment}),
            (new.label, {"matrix": new.matrix, "environment": new.environment}),
        )
    return notes


# -- grouping for the heatmap ---------------------------------------------------------------------
_DTYPE_SHORT = {"e4m3fn": "e4m3", "e5m2": "e5m2", "e4m3fnuz": "e4m3fnuz", "e5m2fnuz": "e5m2fnuz", "int8": "int8"}


def _short(names: Mapping[str, str], value: Any) -> Any:
    """A parameter value's short name, else the value itself."""
    return names.get(value, value) if isinstance(value, str) else value


def group_label(params: Mapping, group_by: Sequence[str]) -> str:
    parts = []
    keys = list(group_by)
    if "kernel" in keys:
        parts.append(str(_short(KERNEL_SHORT, params.get("kernel"))))
    if "dtype_a" in keys or "dtype_b" in keys:
        a, b = _short(_DTYPE_SHORT, params.get("dtype_a")), _short(_DTYPE_SHORT, params.get("dtype_b"))
        if a != "int8":
            parts.append(str(a) if a == b or "dtype_b" not in keys else f"{a}×{b}")
    if "scale_a" in keys or "scale_b" in keys:
        a, b = _short(SCALE_SHORT, params.get("scale_a")), _short(SCALE_SHORT, params.get("scale_b"))
        parts.append(f"{a}×{b}" if "scale_b" in keys and "scale_a" in keys else str(a if "scale_a" in keys else b))
    for key in keys:
        if key not in ("kernel", "dtype_a", "dtype_b", "scale_a", "scale_b"):
            value = params.get(key)
            parts.append(str(value) if isinstance(value, str) else f"{key}={value}")
    return " · ".join(parts)


def worst(outcomes: Iterable[str]) -> str | None:
    return min(outcomes, key=lambda o: (severity(o), o), default=None)


def groups(comparison: Comparison, group_by: Sequence[str] = DEFAULT_GROUP_BY) -> list[tuple[str, list[str]]]:
    """(label, case ids) per group, sorted by label."""
    out: dict[str, list[str]] = {}
    for cid in comparison.case_ids:
        out.setdefault(group_label(comparison.params(cid), group_by), []).append(cid)
    return sorted(out.items())
