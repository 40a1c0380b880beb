"""Terminal summary of a matrix run: outcome distribution and failures grouped by signature."""

from __future__ import annotations

from ..verdict import outcome as oc


def summary_lines(state, groups: list[dict], max_groups: int = 30) -> list[str]:
    counts = state.counts()
    total = sum(counts.values())
    dist = ", ".join(f"{c.name} {counts[c.name]}" for c in oc.CLASSES if counts.get(c.name))
    env = state.environment or {}
    lines = [
        f"{total} cases ({state.profile.name} profile, seed {state.seed}) on {env.get('device_name', '?')} "
        f"[{env.get('arch', '?')}], torch {env.get('torch', '?')}: {dist}",
    ]
    failing = [g for g in groups if g["outcome"] in oc.FAILURES]
    if failing:
        lines.append(f"{len(failing)} failure signature(s):")
        for group in failing[:max_groups]:
            layer = f" [{group['layer']}]" if group.get("layer") else ""
            lines.append(f"  {group['count']:4d} x {group['outcome']}{layer} {group['signature']}")
            lines.append(f"         e.g. {group['example']}")
        if len(failing) > max_groups:
            lines.append(f"  ... {len(failing) - max_groups} more in the report")
    unsupported = [g for g in groups if g["outcome"] == oc.UNSUPPORTED]
    if unsupported:
        lines.append(f"{len(unsupported)} unsupported signature(s) (eager and compiled refuse alike):")
        for group in unsupported[:10]:
            lines.append(f"  {group['count']:4d} x {group['signature']}")
    reasons = state.incomplete_reasons()
    if reasons:
        recorded, generated = len(state.records), len(state.cases())
        lines.append(f"INCOMPLETE: {recorded} of {generated} generated case(s) recorded; the report says why:")
        lines += [f"  {reason}" for reason in reasons]
    lines.append(f"report: {state.report_path}")
    return lines
