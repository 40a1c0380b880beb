"""Render a Comparison: a terminal table, Markdown for a CI step summary, one self-contained HTML
file with a heatmap (case groups x environments).

Every string from a report is data, never markup: the HTML environment autoescapes and links
only http(s) URLs (`safe_url`), and the page's Content-Security-Policy runs its own script alone
(by hash) and loads nothing (`CSP`); the Markdown one escapes each printed value through
`finalize` (`md_escape`: no link, image, HTML, emphasis, table break or autolink can come out of
report text), and a command shown as code goes in a code span its content cannot close
(`md_code`); the terminal table shows control characters as escapes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2

from ..records import CaseRecord
from ..verdict import outcome as oc
from .cause_text import report_replay, shown_cause
from .causes import all_text
from .changes import change_of
from .changes import example_of as change_example
from .changes import grouped as group_changes
from .compare import (
    DEFAULT_GROUP_BY,
    TRANSITION_KINDS,
    Column,
    Comparison,
    category,
    classify,
    groups,
    severity,
    worst,
)
from .printable import printable
from .report import root_cause_of, signature_groups
from .summary import MET_SHOWN, sorted_out, tier_heading

TEMPLATES = Path(__file__).parent / "templates"
# The page's one script, inline (the page is one file) and allowed by its hash alone: were report
# text ever to come out as markup, no script of it runs, and nothing loads (no image, font,
# frame or fetch), so that opening the page makes no request. Inline styles only set colours.
SCRIPT = (TEMPLATES / "matrix.js").read_text(encoding="utf-8")
CSP = (
    "default-src 'none'; "
    f"script-src 'sha256-{base64.b64encode(hashlib.sha256(SCRIPT.encode('utf-8')).digest()).decode('ascii')}'; "
    "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
)

OTHER_COLOUR = "#343a40"  # an outcome class this version does not know
COUNT_ORDER = [c.name for c in oc.CLASSES]


def colour(outcome: str) -> str:
    known = oc.outcome_class(outcome)
    return known.colour if known else OTHER_COLOUR


def light(outcome: str) -> bool:
    """Whether the class's colour is light enough to need dark text on it."""
    red, green, blue = (int(colour(outcome)[i : i + 2], 16) for i in (1, 3, 5))
    return 0.299 * red + 0.587 * green + 0.114 * blue > 0.6 * 255


# GitHub turns these into links with no brackets at all: http(s)://, ftp://, www., mailto:,
# xmpp:, and name@domain (which also pings @name). A zero-width joiner after the scheme, the
# "www" or the "@" leaves the text readable and stops the match; a reader who copies such text
# (a signature into known_failures) gets the joiner too, so only these spots get one.
ZWJ = "\u200d"
_AUTOLINK = re.compile(r"(?i)(https?|ftps?|mailto|xmpp|www)(?=[:.])|@")
# Backslash-escaped (CommonMark escapes any ASCII punctuation): what can start markup inline.
_MD_PUNCTUATION = set("\\`*_[]()!|~#$")  # `$`: GitHub renders $...$ as math
_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


class MdSafe(str):
    """Markdown this module built (a code span): `md_escape` passes it through."""


def md_escape(value) -> str:
    """Report text as inert Markdown on one line: HTML characters as entities, every ASCII
    punctuation that can start markup backslash-escaped (links, images, emphasis, code, table
    cells, headings), control characters replaced, autolinks broken by a zero-width joiner."""
    if value is None:
        return ""
    if isinstance(value, MdSafe):
        return str(value)
    text = _one_line(value)
    text = _AUTOLINK.sub(lambda m: m.group(0) + ZWJ, text)
    return "".join(_MD_ENTITIES.get(ch) or ("\\" + ch if ch in _MD_PUNCTUATION else ch) for ch in text)


def _one_line(value) -> str:
    """Whitespace runs (line breaks included) as one space; other control characters as U+FFFD."""
    text = " ".join(str(value).split())
    return "".join("\ufffd" if ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 else ch for ch in text)


def md_code(value) -> MdSafe:
    """`value` as one inline code span (literal in Markdown: no link, no emphasis, no HTML),
    fenced by more backticks than any run inside it, on one line. Not for table cells."""
    text = _one_line(value)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return MdSafe(f"{fence} {text} {fence}")


def safe_url(value) -> str | None:
    """`value` when it is an absolute http or https URL with a host and no whitespace or
    control character (what a link may point to), else None: a `javascript:` or `data:` link
    from a catalogue or a report is shown as text."""

    if not isinstance(value, str) or not value or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 0x7F for ch in value):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return value


@functools.cache
def _environment(kind: str) -> jinja2.Environment:
    # One per kind and process: it keeps its templates compiled.
    if kind == "html":
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATES)),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
    else:
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATES)),
            autoescape=False,
            finalize=md_escape,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
    env.filters["colour"] = colour
    env.tests["light"] = light
    env.filters["code"] = md_code
    return env


def _replayer(comparison: Comparison, matrix_path: str | None):
    """case id (and the label of the report it is read from; default the newest) -> its replay
    command, with that report's profile, seed and device (reports/cause_text.py)."""
    index_of = {c.label: i for i, c in enumerate(comparison.columns)}
    newest = len(comparison.columns) - 1

    def replay(case_id: str, label: str | None = None) -> str:
        index = index_of.get(label or "", newest)  # no label, or one of no column: the newest
        if index < 0:
            return report_replay({}, case_id, matrix_path)
        column = comparison.columns[index]
        return report_replay(
            column.matrix, case_id, matrix_path, column.environment, _record_in(comparison, case_id, index)
        )

    return replay


def _record_in(comparison: Comparison, case_id: str, index: int) -> CaseRecord | None:
    """The case's record in column `index`: its replay names the cases it fails after and the
    calls of its shrunk sequence, without which it would not fail alone."""
    records = comparison.grid.get(case_id) or []
    return records[index] if -len(records) <= index < len(records) else None


def _context(comparison: Comparison, matrix_path: str | None, max_rows: int) -> dict:
    matrix = matrix_path or next((c.matrix.get("path") for c in comparison.columns if c.matrix.get("path")), None)
    replay = _replayer(comparison, matrix_path)
    by_kind = comparison.by_kind()
    outcome_names = [o for o in COUNT_ORDER if any(Counter(c.summary).get(o) for c in comparison.columns)]
    pairs = []
    for before, after in comparison.pairs():
        counts = comparison.kind_counts(before.label, after.label)
        pairs.append(
            {"before": before.label, "after": after.label, "counts": [counts.get(k, 0) for k in TRANSITION_KINDS]}
        )
    grouped = {}
    for kind, moved in by_kind.items():
        rows: list[dict[str, Any]] = []
        for pair, members in _by_pair(moved):
            for change, ts in group_changes(members):
                rows.append(
                    {
                        "pair": pair,
                        "before": change.before,
                        "after": change.after + (f" ({change.sides})" if change.sides else ""),
                        "root_cause": change.cause,
                        "count": len(ts),
                        "example": ts[0].case_id,
                        "example_message": change_example(ts[0]),
                    }
                )
        grouped[kind] = sorted(rows, key=lambda r: -r["count"])
    return {
        "grouped": grouped,
        "comparison": comparison,
        "columns": comparison.columns,
        "kinds": TRANSITION_KINDS,
        "by_kind": by_kind,
        "pairs": pairs,
        "outcome_names": outcome_names,
        "counts": {c.label: Counter(c.summary) for c in comparison.columns},
        "max_rows": max_rows,
        "matrix": matrix,
        "replay": replay,
        "shown_cause": shown_cause,
        "change_of": change_of,
        "root_causes": root_cause_rows(comparison, matrix_path),
        "kernel_changes": kernel_change_rows(comparison),
    }


def _by_pair(transitions) -> list[tuple[str, list]]:
    """Transitions by neighbouring pair, in the order the pairs first appear."""
    pairs: dict[str, list] = {}
    for t in transitions:
        pairs.setdefault(f"{t.before_label} → {t.after_label}", []).append(t)
    return list(pairs.items())


def kernel_change_rows(comparison: Comparison) -> list[dict]:
    """Cases whose chosen Inductor kernel changed, grouped by (pair, before, after), largest first."""
    grouped: dict = {}
    for change in comparison.kernel_changes:
        key = (f"{change.before_label} → {change.after_label}", change.before, change.after)
        grouped.setdefault(key, []).append(change)
    return [
        {
            "pair": key[0],
            "before": key[1],
            "after": key[2],
            "count": len(changes),
            "example": changes[0].case_id,
            "kernels": ", ".join(changes[0].before_kernels) + " → " + ", ".join(changes[0].after_kernels),
        }
        for key, changes in sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0]))
    ]


def root_cause_rows(comparison: Comparison, matrix_path: str | None = None) -> list[dict]:
    """The newest report's root causes, one row per bug (report.signature_groups): failing ones by
    tier, then tolerated, then informational, under that report's own strictness. `matrix_path`:
    the matrix replay commands name instead of the one the report recorded."""
    if not comparison.columns:
        return []
    column = comparison.columns[-1]
    records = [row[-1] for row in comparison.grid.values() if row[-1] is not None]
    replay = _replayer(comparison, matrix_path)
    rows = []
    failing, tolerated, informational = sorted_out(signature_groups(records), column.strict)
    for status, of_status in (("failing", failing), ("tolerated", tolerated), ("informational", informational)):
        for g in of_status:
            outcomes = g.get("outcomes") or {}
            met = list((g.get("met") or {}).items())
            rows.append(
                {
                    "status": status,
                    "tier": tier_heading(g["tier"]) if status != "informational" else "not a failure",
                    "count": g["count"],
                    "outcome": g["outcome"],
                    "classes": ", ".join(f"{n} {name}" for name, n in outcomes.items()) if len(outcomes) > 1 else "",
                    "layer": g.get("layer") or "",
                    # signature_groups always names a cause and an example: str() only types them.
                    "root_cause": shown_cause(str(g["root_cause"]), outcomes or (g["outcome"],)),
                    "met": "; ".join(f"{n} × {what}" for what, n in met[:MET_SHOWN])
                    + (f"; and {len(met) - MET_SHOWN} more" if len(met) > MET_SHOWN else ""),
                    "example": g["example"],
                    "example_message": g.get("example_message") or "",
                    "source": g.get("source") or "",
                    "shared": all_text(g),
                    "replay": replay(str(g["example"])),
                }
            )
    return rows


def render_markdown(comparison: Comparison, matrix_path: str | None = None, max_rows: int = 30) -> str:
    return _environment("md").get_template("summary.md.j2").render(**_context(comparison, matrix_path, max_rows))


def _heatmap(comparison: Comparison, group_by: Sequence[str], matrix_path: str | None) -> list[dict]:
    """One row per case group: its label, its size and one cell per environment (_heatmap_cell)."""
    rows = []
    for label, ids in groups(comparison, group_by):
        cells = [_heatmap_cell(comparison, ids, index, matrix_path) for index in range(len(comparison.columns))]
        rows.append({"label": label, "size": len(ids), "cells": cells})
    return rows


# The change a cell is marked with: the first of these it has.
_MARKED_CHANGES = ("regression", "signature changed", "fix", "capability gained", "capability lost")


def _heatmap_cell(comparison: Comparison, ids: list[str], index: int, matrix_path: str | None) -> dict:
    """A group's cell in the environment of column `index`: its outcome segments, its worst
    class, its failing count, its changes since the column before, its most common root causes
    and its cases."""
    column = comparison.columns[index]
    records = [comparison.grid[cid][index] for cid in ids]
    present = [r for r in records if r]
    counts = Counter(r["outcome"] for r in present)
    segments = [
        {"outcome": o, "count": counts[o], "pct": round(100.0 * counts[o] / len(present), 2)}
        for o in sorted(counts, key=lambda o: (severity(o), o))
    ]
    cases, changes = _cell_cases(comparison, ids, records, index, matrix_path)
    signatures = Counter(
        c["root_cause"] for c in cases if c["root_cause"] and category(c["outcome"], column.strict) != "ok"
    )
    failing = sum(n for o, n in counts.items() if category(o, column.strict) == "failing")
    return {
        "worst": worst(counts) if counts else None,
        "segments": segments,
        "total": len(present),
        "failing": failing,
        "changes": changes,
        "marker": next((k for k in _MARKED_CHANGES if changes.get(k)), ""),
        "signatures": signatures.most_common(3),
        "cases": cases,
    }


def _cell_cases(
    comparison: Comparison,
    ids: list[str],
    records: list[CaseRecord | None],
    index: int,
    matrix_path: str | None,
) -> tuple[list[dict], Counter[str]]:
    """A cell's cases for its panel (_case_entry), failing first, and how many of them changed
    how since the column before."""
    column = comparison.columns[index]
    changes: Counter[str] = Counter()
    cases = []
    for cid, record in zip(ids, records):
        if record is None:
            continue
        change = classify(comparison.grid[cid][index - 1], record, column.strict) if index else None
        if change:
            changes[change] += 1
        cases.append(_case_entry(cid, record, change, column, matrix_path))
    # Failing cases first, then by id: the panel opens on what needs looking at.
    cases.sort(key=lambda c: (severity(c["outcome"]), c["id"]))
    return cases, changes


def _case_entry(cid: str, record: CaseRecord, change: str | None, column: Column, matrix_path: str | None) -> dict:
    """One case's row in a cell's panel: its outcome, cause, change, replay command and link."""
    return {
        "id": cid,
        "outcome": record["outcome"],
        "signature": shown_cause(record.get("signature") or "", (record["outcome"],)),
        "root_cause": root_cause_of(record) if record.get("signature") else "",
        "layer": record.get("layer") or "",
        "detail": record.get("detail") or "",
        "change": change or "",
        "replay": report_replay(column.matrix, cid, matrix_path, column.environment, record),
        "link": _link_text((record.get("known_failure") or {}).get("link")),
        "href": safe_url((record.get("known_failure") or {}).get("link")) or "",
    }


def render_html(
    comparison: Comparison,
    matrix_path: str | None = None,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
    max_rows: int = 200,
    title: str = "scaled-mm compatibility matrix",
) -> str:
    context = _context(comparison, matrix_path, max_rows)
    legend = [(o, colour(o)) for o in COUNT_ORDER]
    return (
        _environment("html")
        .get_template("matrix.html.j2")
        .render(
            **context,
            rows=_heatmap(comparison, group_by, matrix_path),
            legend=legend,
            group_by=list(group_by),
            title=title,
            csp=CSP,
            script=SCRIPT,
        )
    )


def _link_text(value) -> str:
    return value if isinstance(value, str) else ""


def render_text(comparison: Comparison, max_rows: int = 20, width: int = 110, matrix_path: str | None = None) -> str:
    """The terminal table: outcome counts per environment, then transitions per neighbouring pair,
    each change with the command that replays one of its cases where it was recorded."""
    replay = _replayer(comparison, matrix_path)
    cols = comparison.columns
    names = [o for o in COUNT_ORDER if any(Counter(c.summary).get(o) for c in cols)]
    label_w = max([len("environment")] + [len(c.label) for c in cols])
    head = f"{'environment':<{label_w}}  {'torch':<14} {'device':<10} {'cases':>5} " + " ".join(
        f"{_abbrev(n):>6}" for n in names
    )
    lines = [head, "-" * len(head)]
    for c in cols:
        counts = Counter(c.summary)
        device = str(c.environment.get("arch") or c.environment.get("device") or "?")
        lines.append(
            f"{c.label:<{label_w}}  {c.torch:<14} {device:<10} {sum(counts.values()):>5} "
            + " ".join(f"{counts.get(n, 0):>6}" for n in names)
        )
    legend = ", ".join(f"{_abbrev(n)}={n}" for n in names if _abbrev(n) != n)
    if legend:  # every name shown in full (PASS alone): nothing to explain
        lines.append(f"  ({legend})")
    for before, after in comparison.pairs():
        counts = comparison.kind_counts(before.label, after.label)
        summary = ", ".join(f"{kind} {counts[kind]}" for kind in TRANSITION_KINDS if counts.get(kind)) or "no change"
        lines.append("")
        lines.append(f"{before.label} -> {after.label}: {summary}")
        for kind in TRANSITION_KINDS:
            moved = [
                t
                for t in comparison.transitions
                if t.kind == kind and t.before_label == before.label and t.after_label == after.label
            ]
            if not moved or kind in ("case added", "case removed"):
                continue
            by_change = group_changes(moved)
            lines.append(f"  {kind}:")
            # Whole lines: a cause cut to the width would make different causes read the same.
            for change, members in by_change[:max_rows]:
                lines.append(f"    {len(members):4d} x {change.text}")
                lines.append(f"           e.g. {change_example(members[0])}")
                # Never cut: a command cut short would replay something else.
                lines.append(f"           replay: {replay(members[0].case_id, after.label)}")
            if len(by_change) > max_rows:
                lines.append(f"    ... {len(by_change) - max_rows} more")
    rows = kernel_change_rows(comparison)
    if rows:
        lines.append("")
        lines.append(f"chosen kernel changed: {len(comparison.kernel_changes)} case(s)")
        for row in rows[:max_rows]:
            text = f"    {row['count']:4d} x {row['before']} -> {row['after']} ({row['pair']}), e.g. {row['example']}"
            lines.append(text if len(text) <= width else text[: width - 3] + "...")
        if len(rows) > max_rows:
            lines.append(f"    ... {len(rows) - max_rows} more")
    for note in comparison.notes:
        lines.append(f"note: {note}")
    return "\n".join(_printable(line) for line in lines)


def _printable(line: str) -> str:
    """A terminal line with control characters from report text (escape sequences, carriage
    returns, line breaks) shown as escapes instead of acted on (reports/printable.py)."""

    return printable(line)


def _abbrev(name: str) -> str:
    known = oc.outcome_class(name)
    return known.abbrev if known else name[:6]
