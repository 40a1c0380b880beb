"""Claiming a report path: what may stand there, where an earlier report goes, and how a path
that cannot be cleared is still kept from passing for the run that asked for it.

Only a pytest-scaledmm report (or the unfinished stub a claim leaves) is ever moved or replaced:
any other file at the report path, or at `<name>.previous.json`, is the user's and refuses the
run. When the earlier report cannot move to `<name>.previous.json`, it moves to a fresh name
beside it instead, or a link is removed (its target is left alone), so that the path never
still shows an earlier complete report; the refusal names the path that failed.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ScaledmmError

NOT_REGULAR = "it is there and is not a regular file (a FIFO, a device, a link to one): a report never replaces it"


class ClaimRefused(ScaledmmError, OSError):
    """The report path cannot be claimed; the message names the path that failed."""

    def __str__(self) -> str:
        return self.args[0]


def is_report_file(path: Path) -> bool:
    """A regular file holding a pytest-scaledmm report or unfinished stub: a JSON object with
    `schema_version` and `cases`."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError, MemoryError):
        return False
    return isinstance(data, dict) and "schema_version" in data and "cases" in data


def _displace(path: Path, stem: str) -> Path:
    """Move the report at `path` to a fresh name beside it (never over another file)."""
    fd, fresh = tempfile.mkstemp(prefix=f"{stem}.previous-", suffix=".json", dir=path.parent)
    os.close(fd)
    try:
        os.replace(path, fresh)
    except OSError:
        os.unlink(fresh)
        raise
    return Path(fresh)


def claim(path: Path, stub: Mapping[str, Any], write, previous: Path, is_stub) -> Path | None:
    """Move an earlier report at `path` to `previous` and write `stub` there (reports/report.py,
    start_report). Raises ClaimRefused, after neutralising `path`, when that cannot be done."""
    moved = None
    if os.path.lexists(path):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise ClaimRefused(
                f"{path}: it is a link to nothing, not a regular file: a report never replaces it"
            ) from None
        if not stat.S_ISREG(mode):
            raise ClaimRefused(f"{path}: {NOT_REGULAR}")
        if not is_stub(path):
            if not is_report_file(path):
                raise ClaimRefused(f"{path} is there and is not a pytest-scaledmm report: a report never replaces it")
            problem = _previous_problem(previous)
            if problem is None:
                try:
                    os.replace(path, previous)
                    moved = previous
                except OSError as exc:
                    problem = f"cannot move the earlier report to {previous}: {exc.strerror or exc}"
            if problem is not None:
                where = _neutralise(path, previous, stub, write)
                raise ClaimRefused(f"{problem}; {where}")
    write(path, stub)
    return moved


def _previous_problem(previous: Path) -> str | None:
    if not os.path.lexists(previous):
        return None
    if is_report_file(previous):
        return None
    return f"{previous} is there and is not a pytest-scaledmm report: it is never overwritten"


def _neutralise(path: Path, previous: Path, stub: Mapping[str, Any], write) -> str:
    """Keep an earlier complete report at `path` from passing for this run; say where it went."""
    try:
        if path.is_symlink():
            os.unlink(path)  # the link only: its target is left alone
            where = f"the link {path} was removed"
        else:
            kept = _displace(path, previous.name[: -len(".previous.json")])
            where = f"the earlier report moved to {kept}"
        write(path, stub)
        return where
    except OSError as exc:
        return f"and {path} could not be cleared either: {exc.strerror or exc}"
