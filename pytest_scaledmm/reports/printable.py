"""Report text as one printable line for a terminal or a CI log.

A report is data from elsewhere: a signature or a reason may hold a carriage return, an escape
sequence, a bidirectional override or a line break followed by `::notice` (a GitHub Actions
workflow command). `printable` shows every such character as an escape and keeps a line from
starting (after blanks) with what a CI log reads as a command (`::`, `##[`, `##vso[`).
"""

from __future__ import annotations

import re
import unicodedata

# C0, DEL, C1; then format characters (bidi overrides, zero-width ones) and line/paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_COMMAND = re.compile(r"^(\s*)(::|##\[|##vso\[)")


def _escape(ch: str) -> str:
    return ascii(ch)[1:-1]


def printable(text) -> str:
    """`text` on one line with control and format characters escaped (`\\r`, `\\x1b`, `\\u202e`)
    and a leading workflow-command marker broken by a backslash."""
    text = _CONTROL.sub(lambda m: _escape(m.group(0)), str(text))
    if any(unicodedata.category(ch) in ("Cf", "Cs", "Co", "Cn") for ch in text):
        text = "".join(_escape(ch) if unicodedata.category(ch) in ("Cf", "Cs", "Co", "Cn") else ch for ch in text)
    return _COMMAND.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def printable_lines(lines) -> list[str]:
    return [printable(line) for line in lines]
