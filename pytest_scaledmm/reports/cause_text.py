"""The command that replays one case, the parameters a group of cases shares and its cause, as
the summaries (terminal, Markdown, HTML) print them beside each root cause."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..matrix.replay_command import after_of, replay_command, sequence_of


def report_replay(
    matrix: Mapping | None,
    case_id: str,
    matrix_path: str | None = None,
    environment: Mapping | None = None,
    record: Mapping | None = None,
) -> str:
    """The replay command of a report's case (matrix/replay_command.py), from the report's matrix
    block: its path (or `matrix_path`), its profile, and the seed and device its run was given;
    and from its environment block, the torch, device and tox env that recorded it."""

    matrix = matrix if isinstance(matrix, Mapping) else {}
    raw_forced = matrix.get("forced")
    forced = raw_forced if isinstance(raw_forced, Mapping) else {}
    seed = forced.get("seed") if type(forced.get("seed")) is int else None
    device = forced.get("device") if isinstance(forced.get("device"), str) else None
    profile = matrix.get("profile") if isinstance(matrix.get("profile"), str) else None
    path = matrix_path or matrix.get("path")
    return replay_command(path, case_id, profile, seed, device, environment, after_of(record), sequence_of(record))


def shown_cause(cause: str, outcomes) -> str:
    """A cause as shown beside its outcome class: without a leading `MISMATCH: ` that repeats
    the class (the report keeps the full text)."""
    head, colon, rest = str(cause).partition(": ")
    return rest if colon and rest and head in set(outcomes) else cause


def shared_text(shared: Mapping | None) -> str:
    """`out_dtype=fp16, bias=true`: a group's shared parameters (report.signature_groups) as
    matrix.yaml spells values; empty when there are none."""
    if not isinstance(shared, Mapping):
        return ""
    return ", ".join(f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in shared.items())
