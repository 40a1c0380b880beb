"""The versioned JSON report: build, write atomically, read back with one clear error; the
report path checked writable and locked against a second run before any case runs."""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

SCHEMA = "pytest-scaledmm/report"
SCHEMA_VERSION = 1


class ReportError(Exception):
    """A report file that cannot be used; the message names the file."""

    def __init__(self, path, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


def build_report(environment: dict, matrix: dict, cases: Iterable[dict], session: dict) -> dict:
    cases = sorted(cases, key=lambda c: c["id"])
    counts = Counter(c["outcome"] for c in cases)
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "environment": environment,
        "matrix": matrix,
        "session": session,
        "summary": dict(sorted(counts.items())),
        "signatures": signature_groups(cases),
        "cases": cases,
    }


def signature_groups(cases: Iterable[dict]) -> list[dict]:
    """Failures grouped by signature, largest group first, with one example case id each."""
    groups: dict[tuple, dict] = {}
    for case in cases:
        if not case.get("signature") or case["outcome"] in ("PASS", "SKIPPED"):
            continue
        key = (case["outcome"], case["signature"])
        group = groups.setdefault(
            key, {"outcome": case["outcome"], "signature": case["signature"], "layer": case.get("layer"), "count": 0, "example": case["id"]}
        )
        group["count"] += 1
    return sorted(groups.values(), key=lambda g: (-g["count"], g["outcome"], g["signature"]))


def write_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file beside the target and rename over it: a reader sees the old
    report or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=False, default=str)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def duplicate_ids(report: dict) -> dict[str, int]:
    """Case ids recorded more than once, with their count. Loading keeps every record, so a
    duplicate is named here instead of the last record silently winning."""
    counts = Counter(case["id"] for case in report["cases"])
    return {cid: n for cid, n in sorted(counts.items()) if n > 1}


def check_writable(path: Path) -> None:
    """Create the report's directory and a temporary file beside the report, then remove it: an
    unusable path is found before any case runs. The report itself is never touched. Raises
    OSError."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)


class ReportLocked(Exception):
    """Another live run holds the report's lock."""


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    except OSError:
        return False
    return True


class ReportLock:
    """`<report>.lock` beside the report, created exclusively and holding the pid: a second run
    writing the same report at the same time is refused instead of clobbering the first. The lock
    of a process that no longer exists is taken over."""

    def __init__(self, report_path: Path):
        self.path = Path(f"{report_path}.lock")
        self.held = False

    def _create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{os.getpid()}\n")
        return True

    def _owner(self, path: Path) -> int:
        try:
            return int(path.read_text().strip() or "0")
        except (OSError, ValueError):
            return 0

    def acquire(self) -> None:
        """Raises ReportLocked (naming the owner) or OSError."""
        for _ in range(3):
            if self._create():
                self.held = True
                return
            owner = self._owner(self.path)
            if owner and _pid_alive(owner):
                raise ReportLocked(f"is being written by another run (pid {owner}); lock file {self.path}")
            # Stale: move it aside atomically (only one run can), then check what was moved.
            aside = self.path.with_name(f"{self.path.name}.stale-{os.getpid()}")
            try:
                os.replace(self.path, aside)
            except FileNotFoundError:
                continue  # another run took it over first; try again
            moved = self._owner(aside)
            if moved and moved != owner and _pid_alive(moved):
                # A live run locked it between our read and our move: give it back.
                try:
                    os.link(aside, self.path)
                finally:
                    os.unlink(aside)
                raise ReportLocked(f"is being written by another run (pid {moved}); lock file {self.path}")
            os.unlink(aside)
        raise ReportLocked(f"its lock file {self.path} keeps changing hands")

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        if self._owner(self.path) == os.getpid():
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass


def load_report(path) -> dict:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(path, "no such report") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(path, f"cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(path, f"not a report (corrupt JSON at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ReportError(path, f"not a pytest-scaledmm report (key 'schema' is {data.get('schema') if isinstance(data, dict) else None!r})")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ReportError(
            path, f"key 'schema_version' is {version!r}; this pytest-scaledmm reads version {SCHEMA_VERSION} only"
        )
    for key in ("environment", "cases"):
        if key not in data:
            raise ReportError(path, f"key '{key}' is missing")
    for index, case in enumerate(data["cases"]):
        if not isinstance(case, dict) or "id" not in case or "outcome" not in case:
            raise ReportError(path, f"key 'cases[{index}]' lacks 'id' or 'outcome'")
    return data
