"""The declarations that would make a kernel's refusals UNSUPPORTED, as YAML lines to paste under
the kernel in matrix.yaml.

Only a case whose eager call raised one of torch's own documented refusals (verdict/refusals.py
REFUSALS) and whose compiled call raised too (REFUSED, or ERROR_PARITY where the two errors are
worded apart) earns a hint: a kernel that gives wrong values, or refuses in words
of its own, gets none, so that a hint never hides a bug. Which declaration a refusal calls for is
read off the cases, not the message (CPU torch says "Invalid scaling configuration" for a bf16
scale and for a tensorwise x rowwise pair alike): a value of a declarable axis (DECLARED_RULES'
value and pair lists: scale_dtypes, scale_pairs, scale_layouts ...) that the refused cases have
and the cases eager took never have. Where no such value is left, the one that costs the fewest
accepted cases per refused case is taken, and the line says what it also leaves out. A refusal
whose documented declaration is a shape limit (`k_multiple: 16`) is that line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..verdict import outcome as oc
from ..verdict.case_axes import axis_value
from ..verdict.outcome import ErrorInfo
from ..verdict.refusals import DECLARED_RULES, LISTED, PAIRED, DeclaredRule, matching_refusal
from ..verdict.support_fields import SUPPORT_FIELDS

_LIMITS = {row.name for row in SUPPORT_FIELDS if row.group == "shape limit"}
_RULES = [rule for rule in DECLARED_RULES if rule.shape in (LISTED, PAIRED)]


@dataclass
class KernelHint:
    kernel: str
    refused: int  # failing cases refused as torch documents
    lines: list[str] = field(default_factory=list)  # `key: [values]`, in DECLARED_RULES' order
    unexplained: int = 0  # refused cases no declaration separates from the accepted ones


def _error(value: Any) -> ErrorInfo | None:
    if not isinstance(value, Mapping):
        return None
    known = {f.name for f in fields(ErrorInfo)}
    data = {k: v for k, v in value.items() if k in known}
    data.setdefault("message", "")
    data.setdefault("root_type", data.get("type", ""))
    try:
        return ErrorInfo(**data)
    except TypeError:
        return None


def torch_refusal(record: Mapping) -> Any:
    """The documented refusal of torch that a user kernel's case met eagerly, when its compiled
    side raised too (REFUSED alike, or ERROR_PARITY in other words), or None."""
    if record.get("outcome") not in (oc.REFUSED, oc.ERROR_PARITY):
        return None
    eager = _error(record.get("eager_error"))
    if eager is None or _error(record.get("compiled_error")) is None:
        return None
    kernel = (record.get("params") or {}).get("kernel")
    if matching_refusal(eager, kernel) is not None:
        return None  # a built-in's own documented refusal is judged UNSUPPORTED already
    return matching_refusal(eager)


def _axis(params: Mapping, axis: str) -> Any:
    """The case's value of an axis, a left-out one's neutral value (fp32 scales ...)."""
    try:
        return axis_value(params, axis)
    except (KeyError, AttributeError):
        return None


def _values(rule: DeclaredRule, params: Mapping) -> set:
    """What a case is, for a rule: the values of its axes, or its one pair."""
    if rule.shape == PAIRED:
        return {tuple(_axis(params, axis) for axis in rule.axes)}
    return {_axis(params, axis) for axis in rule.axes}


def _limit_lines(refusal: Any) -> list[str]:
    """`k_multiple: 16`: a refusal's documented declaration when it is shape limits, else []."""
    parts = [part.strip().split(":", 1) for part in (refusal.declare or "").split(",")]
    if not parts or any(len(p) != 2 or p[0].strip() not in _LIMITS or not p[1].strip().isdigit() for p in parts):
        return []
    return [f"{key.strip()}: {int(value)}" for key, value in parts]


def _flow(values: Iterable) -> str:
    def one(value: Any) -> str:
        if isinstance(value, tuple):
            return "[" + ", ".join(one(v) for v in value) + "]"
        return value if isinstance(value, str) else json.dumps(value)

    return "[" + ", ".join(one(v) for v in values) + "]"


def _kernel_hint(kernel: str, refused: list[tuple[Mapping, Any]], accepted: list[Mapping], drawn: list[Mapping]):
    hint = KernelHint(kernel, len(refused))
    limits: list[str] = []
    remaining = []
    for params, refusal in refused:
        found = _limit_lines(refusal)
        limits += [line for line in found if line not in limits]
        if not found:
            remaining.append(params)
    excluded: dict[str, set] = {}
    lost: dict[str, int] = {}
    while remaining:
        best = None
        for rule in _RULES:
            for value in set().union(*(_values(rule, p) for p in remaining)):
                if None in (value if isinstance(value, tuple) else (value,)):
                    continue  # a case without the axis
                covered = [p for p in remaining if value in _values(rule, p)]
                cost = sum(value in _values(rule, p) for p in accepted)
                key = (cost / len(covered), -len(covered))
                if best is None or key < best[0]:
                    best = (key, rule, value, covered, cost)
        if best is None:
            break
        _, rule, value, covered, cost = best
        excluded.setdefault(rule.field, set()).add(value)
        lost[rule.field] = lost.get(rule.field, 0) + cost
        remaining = [p for p in remaining if p not in covered]
    hint.unexplained = len(remaining)
    for rule in _RULES:
        if rule.field not in excluded:
            continue
        kept = _kept(rule, drawn, excluded[rule.field])
        note = f"  # also leaves out {lost[rule.field]} case(s) eager took" if lost[rule.field] else ""
        hint.lines.append(f"{rule.field}: {_flow(kept)}{note}")
    hint.lines += limits
    return hint


def _kept(rule: DeclaredRule, drawn: list[Mapping], excluded: set) -> list:
    """The values the kernel's cases were drawn with, less the excluded ones: for pairs every
    pair of the values drawn on each side (a pair never drawn is not shown refused)."""
    if rule.shape == PAIRED:
        sides = [sorted({_axis(p, axis) for p in drawn if _axis(p, axis) is not None}) for axis in rule.axes]
        return [(a, b) for a in sides[0] for b in sides[1] if (a, b) not in excluded]
    seen: list = []
    for params in drawn:
        for axis in rule.axes:
            value = _axis(params, axis)
            if value is not None and value not in seen and value not in excluded:
                seen.append(value)
    return sorted(seen, key=str)


def declaration_hints(records: Iterable[Mapping]) -> list[KernelHint]:
    """Per kernel with refusals of torch's own, the declarations that make them UNSUPPORTED."""
    refused: dict[str, list] = {}
    accepted: dict[str, list] = {}
    drawn: dict[str, list] = {}
    for record in records:
        params = record.get("params") or {}
        kernel = params.get("kernel")
        if not isinstance(kernel, str) or record.get("outcome") in (oc.SKIPPED, oc.UNSUPPORTED):
            continue
        drawn.setdefault(kernel, []).append(params)
        refusal = torch_refusal(record)
        if refusal is not None:
            refused.setdefault(kernel, []).append((params, refusal))
        elif record.get("eager_error") is None:
            accepted.setdefault(kernel, []).append(params)
    return [_kernel_hint(k, refused[k], accepted.get(k, []), drawn[k]) for k in sorted(refused)]


HEADING = "declarations that make torch._scaled_mm's own refusals UNSUPPORTED (paste under the kernel in matrix.yaml):"


def hint_lines(records: Iterable[Mapping]) -> list[str]:
    """The summary's lines: a heading, then per kernel its refused count and its YAML lines."""
    hints = declaration_hints(records)
    if not hints:
        return []
    lines = [HEADING]
    for hint in hints:
        lines.append(f"  {hint.kernel} ({hint.refused} failing case(s) refused as torch._scaled_mm refuses them):")
        lines += [f"    {line}" for line in hint.lines]
        if hint.unexplained:
            lines.append(f"    # {hint.unexplained} refused case(s) no declaration tells from the accepted ones")
    return lines


def hint_markdown(records: Iterable[Mapping]) -> str:
    """The same hints for a CI step summary: per kernel a YAML block; "" when there are none."""
    hints = declaration_hints(records)
    if not hints:
        return ""
    parts = [f"**{HEADING}**"]
    for hint in hints:
        body = hint.lines + (
            [f"# {hint.unexplained} refused case(s) no declaration tells from the accepted ones"]
            if hint.unexplained
            else []
        )
        parts.append(f"`{hint.kernel}` ({hint.refused} failing case(s)):\n\n```yaml\n" + "\n".join(body) + "\n```")
    return "\n\n".join(parts)
