"""The upgrade gate: a candidate report against a baseline -> pass, or fail with the reasons.

It fails closed: what it cannot back is a failure. One reason line each when
- a case newly fails: it passed in the baseline and fails now (regression), also when a
  catalogue entry expects the failure (the baseline's pass contradicts it); it fails in both and
  a side does worse (reports/sides.py: a compiled side that passed now raises behind an old eager
  mismatch, a new error type), or with another outcome class or signature (a new failure hiding
  behind an old one); it fails and the baseline has no record of it, or did not run it
  (UNSUPPORTED, SKIPPED);
- a case fails the same way in both, by more: a measure its checks record (error/bound, max
  abs and rel error, off elements, rows, columns, non-finite elements: MEASURES) grew past its
  factor on a side (waived by `allow_worse`);
- a run is incomplete (`session.complete` false, or its counts of generated and recorded cases
  disagree with its records), or cases of the baseline are missing from the candidate;
- a report contradicts itself: its summary is not the count of its records' outcomes, a passing
  record carries a failure's signature or error, an XFAIL or FIXED_UPSTREAM does not say what
  it was before the catalogue;
- either report records a case id more than once, the candidate has no cases, the reports have
  no case in common, or no case in common was run and checked in the candidate;
- the two runs were held to different bounds (tolerance slack);
- baseline and candidate are the same report;
- a case that ran in the baseline is UNSUPPORTED or SKIPPED in the candidate (capability lost);
- the candidate checked less than the baseline, per kernel and side (reports/evidence.py): a
  kernel absent or checked in no case, fewer cases of a side checked, a value of a dimension no
  longer checked on a side; and a kernel checked in neither run (waived item by item by
  `allow_unchecked`).

Expected failures are recomputed, never read from the records: every XFAIL / FIXED_UPSTREAM is
restored to its original outcome in both reports and the known-failure catalogue is applied
again, from the matrix given, or from the matrix both reports name when that file's digest is the
hash they recorded; otherwise from none (a note says why).

Error parity on invalid input (a strict-only class, outcome.BOUNDARY_PARITY) is judged by the
candidate's own rule, recorded in its report as session.strict_errors (missing: strict): without
strict errors such a case counts as ok, so it is neither a regression nor an unbacked failure.
Reasons group failing cases by root cause (report.root_cause_of), one line per bug.

`allow_missing` is the opt-in for a partial comparison: incomplete runs and missing cases become
notes. `allow_capability_loss` does the same for capability lost. Fixes, capabilities gained and
passing cases only in the candidate are notes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ScaledmmError
from ..matrix.known_failures import Catalogue, restore_original_outcomes, torch_release
from ..matrix.spec import MatrixError, load_spec
from ..records import Report
from ..verdict import outcome as oc
from .changes import Change, change_of, count_text, example_of, grouped
from .compare import (
    ABSENT,
    CAPABILITY_GAINED,
    CAPABILITY_LOST,
    CASE_ADDED,
    CASE_REMOVED,
    FAILING,
    FIX,
    KNOWN,
    KNOWN_FAILURE,
    OK,
    REGRESSION,
    SIGNATURE_CHANGED,
    Comparison,
    Transition,
    category,
    classify,
    compare_reports,
)
from .evidence import grouped_lines, partial_unproven, unproven
from .numbers import number
from .printable import printable_lines
from .proof import unproven_passes
from .provenance import code_of, repeated_notes
from .report import dumps_strict, duplicate_ids, shard_advice, shard_of
from .sides import named_checks

if TYPE_CHECKING:
    from typing import TypeGuard  # Python 3.10

FAILING_KINDS = (REGRESSION, SIGNATURE_CHANGED)
# A case that fails in both reports with one signature, but by more: its error/bound grew past
# WORSE_RATIO times, or its off elements, rows or columns past WORSE_COUNT times.
WORSE = "worse"
WORSE_RATIO = 10.0
WORSE_COUNT = 2.0
# How the opt-ins are spelled where the gate runs: the console script's flags by default.
CLI_FLAGS = {
    "allow_missing": "--allow-missing",
    "allow_capability_loss": "--allow-capability-loss",
    "allow_worse": "--allow-worse",
    "allow_looser_slack": "--allow-looser-slack",
    "allow_unchecked": "--allow-unchecked",
}


class GateFailure(ScaledmmError):
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

    def unexplained_failures(self, records: Iterable[Mapping]) -> list[str]:
        """Ids of the candidate's failing records (a class that fails pytest) without a baseline
        record that failed the same way: a session with any of them keeps exit status 1 whatever
        the gate says."""
        unexplained = []
        strict = self.comparison.columns[-1].strict
        for record in records:
            if category(record["outcome"], strict) != FAILING:
                continue
            row = self.comparison.grid.get(record["id"]) or [None, None]
            before, after = row[0], row[-1]
            old = before is not None and category(before["outcome"], strict) in (FAILING, KNOWN)
            if not (old and after is not None and classify(before, after, strict) is None):
                unexplained.append(record["id"])
        return unexplained

    def lines(self) -> list[str]:
        """The verdict, reasons and notes: one printable line each (report text escaped)."""

        return printable_lines(self._lines())

    def _lines(self) -> list[str]:
        baseline, candidate = (c.label for c in self.comparison.columns)
        if self.passed:
            partial = " (a partial comparison: see the notes)" if self.waived else ""
            head = [f"gate passed: no new failure in {candidate} against {baseline}{partial}"]
        elif self.failures:
            others = len(self.reasons) - self.failure_reasons
            more = f", and {others} other reason(s)" if others > 0 else ""
            how = "newly fail or fail worse" if any(t.kind == WORSE for t in self.failures) else "newly fail"
            head = [f"gate FAILED: {len(self.failures)} case(s) {how} in {candidate} against {baseline}{more}"]
        else:
            head = [f"gate FAILED: {candidate} against {baseline} is not proven ({len(self.reasons)} reason(s))"]
        return head + [f"  {r}" for r in self.reasons] + [f"  note: {n}" for n in self.notes]


def _group_reasons(transitions: list[Transition], limit: int) -> list[str]:
    """One reason per change (changes.change_of: kind, outcome change, root cause): forty cases
    of one bug are one line, whatever eager refusals its compiled-side cause met, worded as
    `compare` words it, with one real example."""
    ordered = sorted(grouped(transitions), key=lambda item: item[0].kind != REGRESSION)
    reasons = []
    for change, members in ordered[:limit]:
        cause = "" if change.cause else ": (no signature)"
        reasons.append(f"{change.kind}: {count_text(members)} {change.text}{cause} (e.g. {example_of(members[0])})")
    if len(ordered) > limit:
        reasons.append(f"... and {len(ordered) - limit} more root cause(s)")
    return reasons


# What a failed check records of how far it is off, and the factor past which the same failure
# counts as worse: error measures by WORSE_RATIO, counts of elements, rows and columns by
# WORSE_COUNT. A band's width from `where` stands in for the row and column counts of a report
# written before they were recorded.
MEASURES = {
    "error/bound": ("ratio", WORSE_RATIO),
    "max abs error": ("max_abs", WORSE_RATIO),
    "max rel error": ("max_rel", WORSE_RATIO),
    "off elements": ("off_elements", WORSE_COUNT),
    "off rows": ("off_rows", WORSE_COUNT),
    "off columns": ("off_columns", WORSE_COUNT),
    "non-finite elements": ("nonfinite", WORSE_COUNT),
}
_BAND = re.compile(r"\b(rows|columns) (\d+)-(\d+) of \d+")


_ERROR_KEYS = ("ratio", "max_abs", "max_rel")
_UNREADABLE = object()


def _measure(check: Mapping, key: str):
    """A measure's value as a float; None when the check does not record it; _UNREADABLE when
    it records something that is not a measure (a negative or oversized count, a word, a
    number too large for a float)."""
    if key not in check:
        return None
    value = check[key]
    try:
        if key in _ERROR_KEYS:
            found = number(value)
            return _UNREADABLE if found is None or found < 0 else found
        elements = check.get("elements")
        if type(value) is not int or value < 0 or (type(elements) is int and value > elements):
            return _UNREADABLE
        return float(value)
    except (OverflowError, TypeError, ValueError):
        return _UNREADABLE


def _how_bad(check: Mapping) -> tuple[dict[str, float], list[str]]:
    """How far one failed check is off, per measure (MEASURES) it records, and the measures it
    records that cannot be read."""
    found: dict[str, float] = {}
    unreadable: list[str] = []
    for measure, (key, _) in MEASURES.items():
        value = _measure(check, key)
        if value is _UNREADABLE:
            unreadable.append(measure)
        elif isinstance(value, float) and not math.isnan(value):
            found[measure] = value
    where = check.get("where")
    band = _BAND.search(where) if isinstance(where, str) else None
    if band and f"off {band.group(1)}" not in found:
        found[f"off {band.group(1)}"] = float(int(band.group(3)) - int(band.group(2)) + 1)
    return found, unreadable


def _failed(check: Mapping | None) -> Mapping | None:
    """The check when it failed, else None."""
    return check if isinstance(check, Mapping) and check.get("ok") is False else None


def _growth(before: Mapping | None, after: Mapping | None) -> list[str]:
    """Each measure of a check failing in both records (sides.named_checks: each side's first
    call, its later calls, each other M) that grew past its factor, as "compiled off elements
    1 -> 512 (x512)"; a measure the baseline's check has and the candidate's lost, made NaN or
    made unreadable cannot be shown not to have grown. A check that passes now did not grow;
    a side that raises now is worse by reports/sides.py."""
    grown: list[str] = []
    old_checks, new_checks = named_checks(before or {}), named_checks(after or {})
    for name, checked in old_checks.items():
        old_check, new_check = _failed(checked), _failed(new_checks.get(name))
        if old_check is None or new_check is None:
            continue
        (was, _), (now, unreadable) = _how_bad(old_check), _how_bad(new_check)
        grown += [f"{name} {measure} cannot be read in the candidate" for measure in unreadable]
        grown += [
            f"{name} {measure} {was[measure]:.3g} in the baseline, not recorded in the candidate"
            for measure in MEASURES
            if measure in was and measure not in now and measure not in unreadable
        ]
        for measure in MEASURES:
            if measure not in was or measure not in now:
                continue
            old, new = was[measure], now[measure]
            if new > old * MEASURES[measure][1] and new > old:
                times = "inf" if math.isinf(new) or old == 0 else f"{new / old:.3g}"
                shown = (lambda v: f"{v:g}") if measure.startswith(("off", "non-finite")) else (lambda v: f"{v:.3g}")
                grown.append(f"{name} {measure} {shown(old)} -> {shown(new)} (x{times})")
    return grown


def _release(report: Mapping) -> str | None:

    release = torch_release(str((report.get("environment") or {}).get("torch") or ""))
    return release.base_version if release is not None else None


def _tolerated(outcome: str) -> bool:
    known = oc.outcome_class(outcome)
    return known is not None and known.strict_only


def _whole(value) -> TypeGuard[int]:
    return type(value) is int


def incompleteness(report: Mapping) -> str | None:
    """Why a report does not cover its run, or None. A report that does not say it completed did
    not; one that does not count its generated and recorded cases as whole numbers equal to its
    number of records did not either, whatever it says."""
    session = report.get("session") or {}
    cases = report.get("cases") or []
    if session.get("complete") is not True:
        reasons = session.get("incomplete_reasons")
        if isinstance(reasons, list) and reasons:
            return "; ".join(str(r) for r in reasons)
        return "it says it did not complete" if "complete" in session else "it does not say that it completed"
    generated, recorded = session.get("generated"), session.get("recorded")
    if not (_whole(generated) and _whole(recorded)):
        return "it does not say how many cases it generated and recorded (session.generated, session.recorded)"
    if len(cases) < generated and recorded == len(cases):
        return f"{len(cases)} of {generated} generated case(s) have a record"
    if not generated == recorded == len(cases):
        return f"the counts disagree: {generated} generated, {recorded} recorded, {len(cases)} record(s)"
    return None


def contradictions(report: Mapping) -> list[str]:
    """Where a report contradicts itself (an edited or corrupt report), one line each."""
    lines = []
    cases = report["cases"]
    counts = Counter(c["outcome"] for c in cases)
    summary = report.get("summary")
    if not isinstance(summary, Mapping):
        lines.append("it has no summary of its outcomes")
    else:
        differ = sorted(o for o in set(summary) | set(counts) if summary.get(o, 0) != counts.get(o, 0))
        if differ:
            o = differ[0]
            lines.append(
                f"its summary does not match its records ({len(differ)} outcome count(s) differ, e.g. {o}:"
                f" {summary.get(o, 0)} in the summary, {counts.get(o, 0)} record(s))"
            )
    passing = [c for c in cases if c["outcome"] in (oc.PASS, oc.FIXED_UPSTREAM) and _carries_a_failure(c)]
    if passing:
        lines.append(
            f"{len(passing)} passing record(s) carry a failure's signature or error, e.g. {passing[0]['id']}:"
            " the record was edited or is corrupt"
        )

    not_worst = [c for c in cases if _not_its_worst_run(c)]
    if not_worst:
        lines.append(
            f"{len(not_worst)} record(s) of a case that ran more than once do not hold its worst run, e.g."
            f" {not_worst[0]['id']}: the record was edited or is corrupt"
        )
    return lines + unproven_passes(report)


def _severity(outcome: object) -> int:
    known = oc.outcome_class(outcome) if isinstance(outcome, str) else None
    return known.severity if known is not None else -1  # unknown: worse than any known class


def _not_its_worst_run(record: Mapping) -> bool:
    """Whether a record with `runs` holds an outcome less severe than its worst run's (the plugin
    keeps the worst: plugin/session.py repeated_record)."""
    runs = record.get("runs")
    if not isinstance(runs, list) or not runs:
        return False
    known = record.get("known_failure")
    original = known.get("original_outcome") if isinstance(known, Mapping) else None
    outcome = original if isinstance(original, str) else record["outcome"]
    worst = min(_severity(run.get("outcome") if isinstance(run, Mapping) else None) for run in runs)
    return _severity(outcome) > worst


def _carries_a_failure(record: Mapping) -> bool:
    if record.get("signature") or record.get("eager_error") or record.get("compiled_error"):
        return True
    checks = record.get("errors") or {}
    return any(
        isinstance(checks.get(side), Mapping) and checks[side].get("ok") is False for side in ("eager", "compiled")
    )


def _slacks(report: Mapping) -> tuple[float | None, dict[str, frozenset]]:
    """The tolerance slack the matrix block names (or None) and, per case id, the slacks its
    records say they were held to."""
    matrix = report.get("matrix") or {}
    tolerance = matrix.get("tolerance") or {}
    block = tolerance.get("slack")
    block = number(block) if number(block) is not None else block  # "inf" as written is inf
    per_case = {}
    for record in report["cases"]:
        checks = record.get("errors") or {}
        found = set()
        for side in ("eager", "compiled"):
            bound = (checks.get(side) or {}).get("bound") or {}
            slack = number(bound.get("slack"))
            if slack is not None:
                # A kernel's own slack is judged by kernel_slack_changes: the matrix's is left.
                slack = slack / _record_kernel_slack(record)
                found.add("nan" if math.isnan(slack) else slack)
        if found:
            per_case[record["id"]] = frozenset(found)
    return block, per_case


def kernel_slacks(report: Mapping) -> dict[str, tuple[float, str | None]]:
    """Kernel -> (its own tolerance slack, the reason given), from the records (a kernel without
    one: 1); the matrix block's declarations where no record says."""
    found: dict[str, tuple[float, str | None]] = {}
    declared = ((report.get("matrix") or {}).get("tolerance") or {}).get("kernels") or {}
    for name, entry in declared.items() if isinstance(declared, Mapping) else ():
        slack = number(entry.get("slack")) if isinstance(entry, Mapping) else None
        if slack is not None:
            found[str(name)] = (
                slack,
                entry.get("reason") if isinstance(entry.get("reason"), str) else None,
            )
    for record in report["cases"]:
        kernel = (record.get("params") or {}).get("kernel")
        own = _own_slack_block(record)
        if own is None:
            found[str(kernel)] = (math.nan, "a kernel_slack that is not an object")
        elif kernel and "slack" in own:
            value = number(own.get("slack"))
            found[kernel] = (
                math.nan if value is None else value,
                own.get("reason") if isinstance(own.get("reason"), str) else None,
            )
        elif kernel:
            found.setdefault(kernel, (1.0, None))
    return found


def kernel_slack_changes(baseline: Mapping, candidate: Mapping) -> tuple[list[str], list[str]]:
    """(one line per kernel of both reports whose own slack is larger in the candidate, one line
    per report and kernel whose own slack cannot be read: never waived)."""
    before, after = kernel_slacks(baseline), kernel_slacks(candidate)
    looser, unreadable = [], []
    for role, slacks in (("baseline", before), ("candidate", after)):
        for name, (value, why) in sorted(slacks.items()):
            if math.isnan(value) or value <= 0:
                unreadable.append(
                    f"not proven: the {role}'s tolerance slack of kernel {name} cannot be read ({why or value})"
                )
    for name in sorted(set(before) & set(after)):
        (was, _), (now, reason) = before[name], after[name]
        if now > was:
            why = f" (reason given: {reason})" if reason else ""
            looser.append(
                f"kernel {name}'s tolerance slack loosened from {was:g} to {now:g}{why}: a looser bound passes more"
            )
    return looser, unreadable


def _own_slack_block(record: Mapping) -> Mapping | None:
    """A record's extra.kernel_slack ({} when absent); None when it is not an object."""
    extra = record.get("extra")
    block = extra.get("kernel_slack") if isinstance(extra, Mapping) else None
    if block is None:
        return {}
    return block if isinstance(block, Mapping) else None


def _record_kernel_slack(record: Mapping) -> float:
    block = _own_slack_block(record)
    own = number(block.get("slack")) if block is not None else math.nan
    return own if own is not None and (own > 0 or math.isnan(own)) else 1.0


def _bound_difference(baseline: Mapping, candidate: Mapping) -> str | None:
    """A reason when the two runs were held to different bounds: the comparison would then
    say nothing about the kernels."""
    (b_block, b_cases), (c_block, c_cases) = _slacks(baseline), _slacks(candidate)
    differ = sorted(cid for cid in set(b_cases) & set(c_cases) if b_cases[cid] != c_cases[cid])
    head = "not proven: the two runs were held to different bounds"
    if differ:
        cid = differ[0]
        shown = [", ".join(str(s) for s in sorted(slacks, key=str)) for slacks in (b_cases[cid], c_cases[cid])]
        return (
            f"{head} ({len(differ)} case(s) in common, e.g. {cid}:"
            f" slack {shown[0]} in the baseline, {shown[1]} in the candidate)"
        )
    if b_block is not None and c_block is not None and not (b_block == c_block):
        return f"{head} (tolerance slack {b_block} in the baseline's matrix, {c_block} in the candidate's)"
    return None


def _canonical(report: Mapping) -> str:
    return dumps_strict(report, sort_keys=True)  # a report in memory and its file compare equal


def _same_report(baseline: Mapping, candidate: Mapping) -> bool:
    """The same file twice, or two copies of one report: a gate of a report against itself passes
    whatever the report holds. By content, not path: the plugin gates its run against a baseline
    that it read, before the run, from the path its own report now has."""
    return _canonical(baseline) == _canonical(candidate)


@dataclass(frozen=True)
class Finding:
    """One line of the gate's verdict. A reason fails the gate, unless `opt_in` names an opt-in
    that was given: it is then a note that says so (`verb`). `failure`: a reason about failing
    cases (`cases`), counted in GateResult.failure_reasons."""

    text: str
    note: bool = False
    opt_in: str | None = None
    verb: str = "skipped"
    failure: bool = False
    cases: tuple[Transition, ...] = ()


def _note(text: str) -> Finding:
    return Finding(text, note=True)


@dataclass
class GateContext:
    """What the report checks read: the two reports and how they are to be judged."""

    baseline: tuple[Path, Report]
    candidate: tuple[Path, Report]
    catalogue: Any
    limit: int
    catalogue_note: str | None
    allow_unchecked: Sequence[str] = ()  # evidence.py items the candidate may leave unproven
    allow_missing: bool = False
    flags: Mapping[str, str] = field(default_factory=lambda: CLI_FLAGS)

    @property
    def reports(self) -> dict[str, tuple[Path, Report]]:
        return {"baseline": self.baseline, "candidate": self.candidate}

    @property
    def judged_strictly(self) -> bool:
        # A strict baseline's error parity on invalid input is judged strictly in the candidate
        # too: a candidate run without strict errors cannot excuse what the baseline held to them.
        return oc.strict_errors_of(self.baseline[1].get("session") or {}) and not oc.strict_errors_of(
            self.candidate[1].get("session") or {}
        )


@dataclass
class Judgement:
    """What the change checks read: the comparison of the restored reports."""

    context: GateContext
    comparison: Comparison
    by_kind: dict[str, list[Transition]]
    strict: bool
    newly_known: list[Transition]  # passed in the baseline, fail now as an entry predicts
    same_release: bool


def _same_report_check(ctx: GateContext) -> list[Finding]:
    if _same_report(ctx.baseline[1], ctx.candidate[1]):
        return [Finding("baseline and candidate are the same report: a report gated against itself proves nothing")]
    return []


def _shard_check(ctx: GateContext) -> list[Finding]:
    # A shard's report is a complete run of its slice: without this it would fail only as
    # "cases missing", which does not say to merge the shards first.
    reports = ctx.reports
    slices = [
        (shard_of(data), data["shard"].get("total_ids_sha256") if "shard" in data else None)
        for _, data in reports.values()
    ]
    position = slices[0][0]
    if position is not None and slices[0] == slices[1]:
        return [
            _note(f"both reports are shard {'/'.join(map(str, position))} of the same cases: only that slice is gated")
        ]
    found = []
    for role, (_, data) in reports.items():
        advice = shard_advice(data)
        if advice:
            found.append(Finding(f"the {role}: {advice}, then gate the merged report", opt_in="allow_missing"))
    return found


def _consistency_check(ctx: GateContext) -> list[Finding]:
    found = []
    for role, (_, data) in ctx.reports.items():
        duplicates = duplicate_ids(data)
        if duplicates:
            cid, count = next(iter(duplicates.items()))
            found.append(
                Finding(
                    f"{role}: {len(duplicates)} case id(s) appear more than once, e.g. {cid} ({count} records):"
                    " which record counts is unknown"
                )
            )
        found += [Finding(f"{role}: {line}") for line in contradictions(data)]
    return found


def _empty_check(ctx: GateContext) -> list[Finding]:
    if not ctx.candidate[1]["cases"]:
        return [Finding("the candidate has no cases: nothing ran, so nothing passed")]
    return []


def _completeness_check(ctx: GateContext) -> list[Finding]:
    found = []
    for role, (_, data) in ctx.reports.items():
        why = incompleteness(data)
        if why:
            found.append(Finding(f"the {role} run is incomplete: {why}", opt_in="allow_missing"))
    return found


def _bounds_check(ctx: GateContext) -> list[Finding]:
    bounds = _bound_difference(ctx.baseline[1], ctx.candidate[1])
    return [Finding(bounds)] if bounds else []


def _kernel_slack_check(ctx: GateContext) -> list[Finding]:
    looser, unreadable = kernel_slack_changes(ctx.baseline[1], ctx.candidate[1])
    return [Finding(text) for text in unreadable] + [
        Finding(text, opt_in="allow_looser_slack", verb="accepted") for text in looser
    ]


def _evidence_check(ctx: GateContext) -> list[Finding]:
    """Per kernel and side, what the baseline checked and the candidate did not (evidence.py),
    and each kernel neither checked: a reason each, unless --allow-unchecked names it. A kernel
    neither run could run on its platform is a note; under --allow-missing, so is what only the
    cases missing from the candidate held."""
    baseline, candidate = ctx.baseline[1]["cases"], ctx.candidate[1]["cases"]
    code = code_of(ctx.candidate[1]) or {}
    kernels = code.get("kernels")
    listed = [str(name) for name in kernels] if isinstance(kernels, Mapping) else []
    if ctx.allow_missing:
        items, partial = partial_unproven(baseline, candidate, listed)
    else:
        items, partial = unproven(baseline, candidate, listed), []
    flag = ctx.flags.get("allow_unchecked", CLI_FLAGS["allow_unchecked"])
    refused = [i for i in items if not i.platform and not i.allowed_by(ctx.allow_unchecked)]
    accepted = [i for i in items if not i.platform and i.allowed_by(ctx.allow_unchecked)]
    found = [Finding(line) for line in grouped_lines(refused, flag)]
    found += [_note(f"accepted: {line}") for line in grouped_lines(accepted, flag)]
    found += [
        _note(f"kernel {i.item}: not run on this platform in either run (its declaration, this torch or device)")
        for i in items
        if i.platform
    ]
    missing_flag = ctx.flags.get("allow_missing", CLI_FLAGS["allow_missing"])
    found += [_note(f"skipped ({missing_flag}): {line}") for line in grouped_lines(partial, flag)]
    return found


# What is checked of the reports themselves, in the order of the verdict's lines.
REPORT_CHECKS: tuple[Callable[[GateContext], list[Finding]], ...] = (
    _same_report_check,
    _shard_check,
    _consistency_check,
    _empty_check,
    _completeness_check,
    _bounds_check,
    _kernel_slack_check,
    lambda ctx: [_note(text) for text in repeated_notes((role, data) for role, (_, data) in ctx.reports.items())],
    _evidence_check,
)


def _restore(ctx: GateContext) -> tuple[list[tuple[Path, Report]], list[Finding]]:
    """Expected failures: restored in both reports, then recomputed from the catalogue."""
    restored = []
    found = []
    for role, (path, data) in ctx.reports.items():
        outcomes = {c["id"]: c["outcome"] for c in data["cases"]}
        plain, unexplained = restore_original_outcomes(data)
        by_outcome: dict[str, list[str]] = {}
        for cid in unexplained:
            by_outcome.setdefault(outcomes[cid], []).append(cid)
        for outcome, ids in sorted(by_outcome.items()):
            found.append(Finding(f"{role}: {len(ids)} case(s) {outcome} without its original outcome, e.g. {ids[0]}"))
        if ctx.catalogue:
            plain = ctx.catalogue.apply_report(plain)
        if role == "candidate" and ctx.judged_strictly:
            plain = plain.copy()
            plain["session"] = {**(plain.get("session") or {}), "strict_errors": True}
        restored.append((path, plain))
    if ctx.catalogue_note:
        found.append(_note(ctx.catalogue_note))
    return restored, found


def _judge(ctx: GateContext, comparison: Comparison) -> Judgement:
    by_kind = comparison.by_kind()
    # A pass that now fails as a catalogue entry predicts is a regression all the same: the
    # baseline's pass contradicts the entry, so it cannot be the failure the entry was written for.
    release = _release(ctx.baseline[1])
    same_release = release is not None and release == _release(ctx.candidate[1])
    strict = comparison.columns[-1].strict
    return Judgement(ctx, comparison, by_kind, strict, list(by_kind[KNOWN_FAILURE]), same_release)


def _common_check(j: Judgement) -> list[Finding]:
    # The candidate's record of each case both reports have.
    common = [after for row in j.comparison.grid.values() if row[0] is not None and (after := row[1]) is not None]
    if not common and j.context.candidate[1]["cases"]:
        return [
            Finding(
                "no case in common between the reports: another matrix, profile, seed or hypothesis version? "
                "Nothing was compared, so nothing passed"
            )
        ]
    if common and all(category(after["outcome"]) == ABSENT for after in common):
        return [
            Finding(
                "not proven: no case in common was run and checked"
                " (every one is UNSUPPORTED or SKIPPED in the candidate)"
            )
        ]
    return []


def _removed_check(j: Judgement) -> list[Finding]:
    removed = j.by_kind[CASE_REMOVED]
    if not removed:
        return []
    passed = sum(1 for t in removed if category(t.before_outcome) == OK)
    of_them = f" ({passed} of them passed there)" if passed else ""
    return [
        Finding(
            f"{len(removed)} case(s) of the baseline are missing from the candidate{of_them},"
            f" e.g. {removed[0].case_id}" + _defaults_changed(j.context),
            opt_in="allow_missing",
        )
    ]


def _defaults_changed(ctx: GateContext) -> str:
    """Why the case sets differ when the matrix is the same file but the plugin's defaults for
    the axes it leaves out are not (matrix.generation.defaults), and the command that makes a
    new baseline; else nothing."""
    blocks: list[dict[str, Any]] = [dict(report.get("matrix") or {}) for _, report in (ctx.baseline, ctx.candidate)]
    before, after = (dict(block.get("generation") or {}).get("defaults") for block in blocks)
    if after is None or before == after or blocks[0].get("hash") != blocks[1].get("hash"):
        return ""
    matrix = blocks[1]
    command = (
        f"pytest --scaledmm-matrix {matrix.get('path') or 'matrix.yaml'} --scaledmm-profile"
        f" {matrix.get('profile') or 'default'} --scaledmm-report {ctx.baseline[0]}"
    )
    return (
        f"; the case sets differ because the matrix's defaults changed (the values an axis it leaves"
        f" out takes: defaults {before or 'none recorded'} -> {after}), not the matrix: make a new"
        f" baseline under the baseline's torch and kernels ({command}, or `tox -e baseline` in a"
        f" `scaledmm init` project) and gate against it"
    )


def _failure_check(j: Judgement) -> list[Finding]:
    failures = [t for kind in FAILING_KINDS for t in j.by_kind[kind]] + [
        replace(t, kind=REGRESSION) for t in j.newly_known
    ]
    lines = _group_reasons(failures, j.context.limit)
    # Every line is a failure reason; the first carries the cases.
    return [Finding(text, failure=True, cases=tuple(failures) if i == 0 else ()) for i, text in enumerate(lines)]


def _worse_check(j: Judgement) -> list[Finding]:
    """The same failure, by much more: news the gate does not pass without the opt-in."""
    comparison = j.comparison
    worse: dict[Change, list[tuple[Transition, list[str]]]] = {}
    for cid in comparison.case_ids:
        before, after = comparison.grid[cid]
        if before is None or after is None or classify(before, after, j.strict) is not None:
            continue
        if category(after["outcome"], j.strict) not in (FAILING, KNOWN):
            continue
        grown = _growth(before, after)
        if grown:
            t = Transition(WORSE, cid, comparison.columns[0].label, comparison.columns[1].label, before, after)
            worse.setdefault(change_of(t), []).append((t, grown))
    found = []
    for change, members in sorted(worse.items(), key=lambda item: (-len(item[1]), item[0].key)):
        t, grown = members[0]
        cause = "" if change.cause else ": (no signature)"
        text = (
            f"{WORSE}: {count_text(members)} {change.text}{cause}, off by more: {', '.join(grown)}"
            f" (e.g. {example_of(t)})"
        )
        cases = tuple(m for m, _ in members)
        found.append(Finding(text, opt_in="allow_worse", verb="accepted", failure=True, cases=cases))
    return found


def _unbacked_check(j: Judgement) -> list[Finding]:
    """Failures the baseline cannot show to be old: no record there, or it did not run the case."""
    unbacked = [
        (t, "fail in the candidate and have no record in the baseline")
        for t in j.by_kind[CASE_ADDED]
        if category(t.after_outcome, j.strict) in (FAILING, KNOWN)
    ] + [
        (t, "ran for the first time and fail (UNSUPPORTED or SKIPPED in the baseline)")
        for t in j.by_kind[CAPABILITY_GAINED]
        if category(t.after_outcome, j.strict) in (FAILING, KNOWN)
    ]
    found = []
    for what in dict.fromkeys(w for _, w in unbacked):
        members = [t for t, w in unbacked if w == what]
        text = f"{len(members)} case(s) {what}, e.g. {members[0].case_id} ({members[0].after_outcome})"
        found.append(Finding(text, failure=True, cases=tuple(members)))
    return found


def _capability_check(j: Judgement) -> list[Finding]:
    lost = j.by_kind[CAPABILITY_LOST]
    if not lost:
        return []
    passed = sum(1 for t in lost if category(t.before_outcome) == OK)
    return [
        Finding(
            f"capability lost: {len(lost)} case(s) ran in the baseline and are UNSUPPORTED or SKIPPED in the candidate"
            f" ({passed} passed there), e.g. {lost[0].case_id}",
            opt_in="allow_capability_loss",
            verb="accepted",
        )
    ]


def _change_notes(j: Judgement) -> list[Finding]:
    comparison, candidate = j.comparison, j.context.candidate[1]
    notes = [n for n in comparison.notes if n not in comparison.report_notes]
    if j.context.judged_strictly:
        notes.append(
            "the baseline ran with strict errors and the candidate without: the candidate's error parity on"
            " invalid input is judged strictly, as the baseline's was"
        )
    if not j.strict:
        tolerated = [c for c in candidate["cases"] if _tolerated(c["outcome"])]
        if tolerated:
            notes.append(
                f"{len(tolerated)} case(s) of error parity on invalid input, tolerated: the candidate ran without"
                f" strict errors (session.strict_errors false), e.g. {tolerated[0]['id']}"
            )
    if j.newly_known and j.same_release:
        notes.append(
            f"{len(j.newly_known)} case(s) passed in the baseline and fail now as a known-failure entry predicts,"
            f" under the same torch release ({_release(candidate)}): torch did not change, so they count as"
            " regressions"
        )
    elif j.newly_known:
        notes.append(
            f"{len(j.newly_known)} case(s) passed in the baseline and fail now as a known-failure entry predicts:"
            " the baseline's pass contradicts the entry, so they count as regressions"
        )
    # Failing in both with no transition: the same failure, which the catalogue expects now.
    changed = {t.case_id for t in j.comparison.transitions}
    expected = [
        cid
        for cid, (before, after) in j.comparison.grid.items()
        if cid not in changed
        and before is not None
        and after is not None
        and after["outcome"] == oc.XFAIL
        and category(before["outcome"], j.strict) in (FAILING, KNOWN)
    ]
    if expected:
        notes.append(
            f"{len(expected)} case(s) fail as in the baseline, as known-failure entries expect, e.g. {expected[0]}"
        )
    kinds = ((FIX, j.by_kind[FIX]), (CAPABILITY_GAINED, j.by_kind[CAPABILITY_GAINED]))
    notes += [f"{len(members)} case(s) {kind}" for kind, members in kinds if members]
    return [_note(n) for n in notes]


# What is checked of the changes between the restored reports, in the order of the verdict's lines.
CHANGE_CHECKS: tuple[Callable[[Judgement], list[Finding]], ...] = (
    _common_check,
    _removed_check,
    _failure_check,
    _worse_check,
    _unbacked_check,
    _capability_check,
    _change_notes,
)


@dataclass
class _Verdict:
    """The findings folded in order: reasons, notes, and the opt-ins that waived a reason."""

    allowed: Mapping[str, bool]
    flags: Mapping[str, str]
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[Transition] = field(default_factory=list)
    waived: int = 0
    failure_reasons: int = 0

    def add(self, findings: Iterable[Finding]) -> None:
        for finding in findings:
            if finding.note:
                self.notes.append(finding.text)
            elif finding.opt_in is not None and self.allowed[finding.opt_in]:
                self.waived += 1
                self.notes.append(f"{finding.verb} ({self.flags[finding.opt_in]}): {finding.text}")
            else:
                # What would accept it, as the 'not proven' lines say: the reader's next step.
                accepts = f" ({self.flags[finding.opt_in]} accepts it)" if finding.opt_in is not None else ""
                self.reasons.append(finding.text + accepts)
                if finding.failure:
                    self.failure_reasons += 1
                    self.failures += finding.cases


def check(
    baseline: tuple[Path, Report],
    candidate: tuple[Path, Report],
    catalogue=None,
    limit: int = 20,
    *,
    allow_missing: bool = False,
    allow_capability_loss: bool = False,
    allow_worse: bool = False,
    allow_looser_slack: bool = False,
    allow_unchecked: Sequence[str] = (),
    catalogue_note: str | None = None,
    flags: Mapping[str, str] = CLI_FLAGS,
) -> GateResult:
    """Gate `candidate` against `baseline`, each a (path, loaded report) pair; `catalogue` is the
    known-failure catalogue to recompute expected failures with (None: every failure counts)."""
    allowed = {
        "allow_missing": allow_missing,
        "allow_capability_loss": allow_capability_loss,
        "allow_worse": allow_worse,
        "allow_looser_slack": allow_looser_slack,
    }
    verdict = _Verdict(allowed, flags)
    context = GateContext(
        baseline, candidate, catalogue, limit, catalogue_note, tuple(allow_unchecked), allow_missing, flags
    )
    for report_check in REPORT_CHECKS:
        verdict.add(report_check(context))
    restored, found = _restore(context)
    verdict.add(found)
    judgement = _judge(context, compare_reports(restored))
    for change_check in CHANGE_CHECKS:
        verdict.add(change_check(judgement))
    return GateResult(
        judgement.comparison, verdict.failures, verdict.reasons, verdict.notes, verdict.waived, verdict.failure_reasons
    )


def _same_path(a: str, b) -> bool:
    if not isinstance(b, str) or not b:
        return False
    try:
        return a == b or Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError):
        return False


def resolve_catalogue(matrix_path: str | None, candidate: Mapping, spec=None, baseline: Mapping | None = None):
    """(catalogue, note): the catalogue of the matrix given (`spec`, or the file `matrix_path`),
    else of the matrix the candidate names when the baseline names the same file and recorded
    the same hash, and that file's digest is still that hash (a candidate cannot pick its own
    catalogue); else none, and the note says why. A matrix given that cannot be read, or whose
    catalogue holds a catch-all signature, raises MatrixError."""

    if spec is not None:
        return Catalogue.from_spec(spec), None
    if matrix_path:
        return Catalogue.from_spec(load_spec(matrix_path)), None
    matrix = candidate.get("matrix") or {}
    path = matrix.get("path")
    base = (baseline.get("matrix") or {}) if baseline is not None else matrix
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
            if named.digest != matrix.get("hash"):
                why = (
                    f"{path} has changed since the candidate ran"
                    f" (hash {named.digest}, the report has {matrix.get('hash')})"
                )
            elif not _same_path(path, base.get("path")):
                why = f"the baseline ran another matrix ({base.get('path')!r}; the candidate names {path!r})"
            elif base.get("hash") != matrix.get("hash"):
                why = (
                    f"the baseline ran {path} with other contents"
                    f" (hash {base.get('hash')}, the candidate's {matrix.get('hash')})"
                )
            else:
                try:
                    return Catalogue.from_spec(named), None
                except MatrixError as exc:
                    why = f"the candidate's matrix cannot be used ({exc})"
    return (
        None,
        f"no known-failure catalogue: {why}; expected failures count as the failures they are (--matrix gives one)",
    )


def run_gate(
    baseline: tuple[Path, Report],
    candidate: tuple[Path, Report],
    *,
    matrix_path: str | None = None,
    spec=None,
    allow_missing: bool = False,
    allow_capability_loss: bool = False,
    allow_worse: bool = False,
    allow_looser_slack: bool = False,
    allow_unchecked: Sequence[str] = (),
    flags: Mapping[str, str] = CLI_FLAGS,
) -> GateResult:
    """The gate as `scaledmm gate` and `pytest --scaledmm-baseline` run it."""
    catalogue, note = resolve_catalogue(matrix_path, candidate[1], spec, baseline[1])
    return check(
        baseline,
        candidate,
        catalogue,
        allow_missing=allow_missing,
        allow_capability_loss=allow_capability_loss,
        allow_worse=allow_worse,
        allow_looser_slack=allow_looser_slack,
        allow_unchecked=allow_unchecked,
        catalogue_note=note,
        flags=flags,
    )
