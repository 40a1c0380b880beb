"""Terminal summary of a matrix run: outcome distribution, what was tested and the report, then
one line per root cause (report.signature_groups), failures by severity tier, each with the other
side's behaviour it met (the eager refusals a compiled-side error met) as detail."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..records import SignatureGroup
from ..verdict import outcome as oc
from .cause_text import shown_cause
from .causes import all_text
from .declaration_hints import hint_lines

MET_SHOWN = 5  # the other side's behaviours listed under one root cause; the rest are counted


def tier_heading(tier: int) -> str:
    if tier == 0:
        return "tier ?, an outcome class this version does not know"
    title = next((t.title for t in oc.TIERS if t.number == tier), "?")
    return f"tier {tier}, {title}"


def group_lines(group: SignatureGroup, replay) -> list[str]:
    """One root cause: the line with its count, worst class, layer and cause (normalised: the
    grouping key); its classes when it has several; the user-code line it came from; what it met;
    what all its cases share; one real message of it with its case, and the command that replays
    that case (`replay`: case id -> command)."""
    layer = f" [{group['layer']}]" if group.get("layer") else ""
    outcomes = group.get("outcomes") or {group["outcome"]: group["count"]}
    mixed = f" ({', '.join(f'{n} {name}' for name, n in outcomes.items())})" if len(outcomes) > 1 else ""
    cause = shown_cause(str(group.get("root_cause") or group["signature"]), outcomes)
    lines = [f"  {group['count']:4d} x {group['outcome']}{mixed}{layer} {cause}"]
    if group.get("source"):
        lines.append(f"         in user code: {group['source']}")
    met = list((group.get("met") or {}).items())
    if met:
        shown = "; ".join(f"{n} x {what}" for what, n in met[:MET_SHOWN])
        more = f"; and {len(met) - MET_SHOWN} more" if len(met) > MET_SHOWN else ""
        lines.append(f"         met: {shown}{more}")
    shared = all_text(group)
    if shared:
        lines.append(f"         all: {shared}")
    lines.append(f"         e.g. {example_of(group)}")
    lines.append(f"         replay: {replay(group['example'])}")
    return lines


def example_of(group: SignatureGroup) -> str:
    """`<the example's message, numbers kept> (case <id>)`; the id alone for a group a report of
    an earlier version wrote."""
    message = group.get("example_message")
    return f"{message} (case {group['example']})" if isinstance(message, str) and message else str(group["example"])


# What the root causes of an informational class have in common, as their heading says it; a
# class without an entry here is named instead.
INFORMATIONAL_HEADINGS = {oc.LENIENT: "compiled accepts invalid input with the reference's result"}


def informational_heading(outcome: str) -> str:
    return INFORMATIONAL_HEADINGS.get(outcome, f"outcome {outcome}")


def sorted_out(
    groups: Sequence[SignatureGroup], strict_errors: bool
) -> tuple[list[SignatureGroup], list[SignatureGroup], list[SignatureGroup]]:
    """(failing, tolerated, informational) root-cause groups, each in the groups' order (failures
    by tier): tolerated are strict-only failures of a run without strict errors, informational
    those of the classes the outcome table marks informational (LENIENT)."""
    failing: list[SignatureGroup] = []
    tolerated: list[SignatureGroup] = []
    informational: list[SignatureGroup] = []
    for group in groups:
        known = oc.outcome_class(group["outcome"])
        if known is None or known.fails_when(strict_errors):
            failing.append(group)
        elif known.fails:
            tolerated.append(group)
        elif known.informational:
            informational.append(group)
    return failing, tolerated, informational


def by_class(groups: Sequence[SignatureGroup]) -> list[tuple[str, list[SignatureGroup]]]:
    """(class name, its groups in their order) in the outcome table's order."""
    order = {c.name: i for i, c in enumerate(oc.CLASSES)}
    out: dict[str, list[SignatureGroup]] = {}
    for group in groups:
        out.setdefault(group["outcome"], []).append(group)
    return sorted(out.items(), key=lambda item: order.get(item[0], len(order)))


def root_cause_lines(groups: Sequence[SignatureGroup], strict_errors: bool, replay, max_groups: int = 30) -> list[str]:
    """The root-cause part of the summary: failing causes by tier, then tolerated ones, then
    informational ones (sorted_out); `replay`: case id -> its replay command."""
    failing, tolerated, informational = sorted_out(groups, strict_errors)
    lines = []
    if failing:
        lines.append(f"{len(failing)} failing root cause(s), by tier:")
        heading = None
        for group in failing[:max_groups]:
            if group["tier"] != heading:
                heading = group["tier"]
                lines.append(f" {tier_heading(heading)}:")
            lines += group_lines(group, replay)
        if len(failing) > max_groups:
            lines.append(f"  ... {len(failing) - max_groups} more in the report")
    if tolerated:
        lines.append(
            f"{len(tolerated)} tolerated root cause(s), {tier_heading(tolerated[0]['tier'])}"
            " (--scaledmm-strict-errors fails on them):"
        )
        for group in tolerated[:max_groups]:
            lines += group_lines(group, replay)
    for outcome, members in by_class(informational):
        lines.append(f"{len(members)} informational root cause(s), {informational_heading(outcome)}:")
        for group in members[:max_groups]:
            lines += group_lines(group, replay)
    return lines


def control_skip_lines(records) -> list[str]:
    """The cases SKIPPED because a control failed the same way (execution/aoti_control.py), by
    reason: failures the run cannot pin on the kernel, so not proven."""
    reasons = Counter(
        r.get("detail")
        for r in records
        if r.get("outcome") == oc.SKIPPED and isinstance((r.get("extra") or {}).get("aoti_control"), dict)
    )
    if not reasons:
        return []
    lines = [f"{sum(reasons.values())} case(s) SKIPPED, not proven: a control failed the same way"]
    return lines + [f"  {n:4d} x {reason}" for reason, n in reasons.most_common()]


def summary_lines(state, groups: Sequence[SignatureGroup], max_groups: int = 30) -> list[str]:
    counts = state.counts()
    total = sum(counts.values())
    dist = ", ".join(f"{c.name} {counts[c.name]}" for c in oc.CLASSES if counts.get(c.name))
    env = state.environment or {}
    lines = [
        f"{total} cases ({state.profile.name} profile, seed {state.seed}) on {env.get('device_name', '?')} "
        f"[{env.get('arch', '?')}], torch {env.get('torch', '?')}: {dist}",
    ]
    unsupported = [g for g in groups if g["outcome"] == oc.UNSUPPORTED]
    if unsupported:
        lines.append(f"{len(unsupported)} unsupported signature(s) (eager and compiled refuse alike):")
        for group in unsupported[:10]:
            lines.append(f"  {group['count']:4d} x {group['signature']}")
    lines += control_skip_lines(state.records.values())
    reasons = state.incomplete_reasons()
    if reasons:
        recorded, generated = len(state.records), len(state.cases())
        lines.append(f"INCOMPLETE: {recorded} of {generated} generated case(s) recorded; the report says why:")
        lines += [f"  {reason}" for reason in reasons]
    lines.append(f"report: {state.report_path}")
    lines += hint_lines(state.records.values())
    # The answer a run is for, last: the terminal prints it right above pytest's final line.
    return lines + root_cause_lines(groups, state.settings.strict_errors, state.replay_command, max_groups)
