"""The versioned JSON report: build, write atomically, read back with one clear error."""

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
