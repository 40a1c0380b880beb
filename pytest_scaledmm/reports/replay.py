"""The command that replays one case, and the parameters a group of cases shares, as the
summaries (terminal, Markdown, HTML) print them beside each root cause."""

from __future__ import annotations

import json
from typing import Mapping, Optional


def replay_command(matrix_path: Optional[str], case_id: str, **run) -> str:
    """Runs from any directory (matrix/replay_command.py); `run`: profile, seed."""
    from ..matrix.replay_command import replay_command as command

    return command(matrix_path, case_id, **run)


def shared_text(shared: Optional[Mapping]) -> str:
    """`out_dtype=fp16, bias=true`: a group's shared parameters (report.signature_groups) as
    matrix.yaml spells values; empty when there are none."""
    if not isinstance(shared, Mapping):
        return ""
    return ", ".join(f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in shared.items())
