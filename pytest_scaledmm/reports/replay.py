"""The command that replays one case, and the parameters a group of cases shares, as the
summaries (terminal, Markdown, HTML) print them beside each root cause."""

from __future__ import annotations

import json
import os
import shlex
from typing import Mapping, Optional


def replay_command(matrix_path: Optional[str], case_id: str) -> str:
    matrix = str(matrix_path or "matrix.yaml")
    try:
        relative = os.path.relpath(matrix)
        if not relative.startswith(".."):
            matrix = relative
    except ValueError:  # another drive on Windows
        pass
    return f"pytest --scaledmm-matrix {shlex.quote(matrix)} --scaledmm-case {shlex.quote(case_id)}"


def shared_text(shared: Optional[Mapping]) -> str:
    """`out_dtype=fp16, bias=true`: a group's shared parameters (report.signature_groups) as
    matrix.yaml spells values; empty when there are none."""
    if not isinstance(shared, Mapping):
        return ""
    return ", ".join(f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in shared.items())
