"""The versioned JSON report: build, write atomically, read back with one clear error; the
report path checked writable and locked against a second run, and claimed, before any case runs.

Claiming the path moves an earlier report aside (`<name>.previous.json`) and leaves an unfinished
report in its place, so that a run killed or refused before it writes its own never leaves a
complete-looking report from an earlier run where the user asked for this one.

Reading a report checks its structure once (report_schema.py, derived from records.py's types), caps
its size and nesting, and refuses a key that appears twice in one object: every reader after
`load_report` can index the report without guarding each field.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from ..errors import ScaledmmError
from ..records import CaseRecord, EnvironmentBlock, MatrixBlock, Report, SessionBlock, SignatureGroup
from ..verdict import outcome as oc
from .causes import example_text, mismatch_cause, passing_classes, shape_classes, source_of
from .files import write_text_atomic
from .printable import printable
from .report_path import claim
from .report_schema import first_problem

SCHEMA = "pytest-scaledmm/report"
# 2: session.started is ISO 8601 (was epoch seconds), signatures carry `shared`, a shard run
# carries a `shard` block. 3: a case that ran more than once carries `runs` (its record is the
# worst run's). 4: the matrix block carries `code` (matrix/code_digest.py). Versions 1 to 3 are
# still read, upgraded in memory (upgrade_report).
SCHEMA_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
# Reports of the largest profiles are tens of MiB; beyond this, a file is not one of ours.
MAX_REPORT_BYTES = 512 * 1024 * 1024
# Records nest about six levels; deeper values would only exhaust the stack of the readers.
MAX_REPORT_DEPTH = 64
# What a claimed report path holds until the run writes its own report.
IN_PROGRESS = "run in progress or killed before it wrote its report"


class ReportError(ScaledmmError):
    """A report file that cannot be used; the message names the file, on one printable line (a
    file name that is not UTF-8, or a key holding a line break, shown escaped)."""

    def __init__(self, path, message: str):
        self.path = str(path)
        super().__init__(printable(f"{self.path}: {message}"))


def build_report(environment: dict, matrix: dict, cases: Iterable[Mapping[str, Any]], session: dict) -> Report:
    """A report of these records; a plain dict, to which the plugin adds its own blocks (coverage).
    The blocks are the writers' plain dicts: here they become the report's typed blocks."""
    records = cast("list[CaseRecord]", sorted(cases, key=lambda c: c["id"]))
    counts = Counter(c["outcome"] for c in records)
    report: Report = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "environment": cast("EnvironmentBlock", environment),
        "matrix": cast("MatrixBlock", matrix),
        "session": cast("SessionBlock", session),
        "summary": dict(sorted(counts.items())),
        "signatures": signature_groups(records),
        "cases": records,
    }
    return report


def iso_time(epoch: float | None = None) -> str:
    """A moment as ISO 8601 in UTC with microseconds: 2026-05-01T12:00:00.123456+00:00."""
    moment = datetime.now(UTC) if epoch is None else datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat(timespec="microseconds")


def upgrade_report(data: dict) -> dict:
    """A report of an older readable schema version as this version reads it (in memory only):
    version 1 wrote session.started as epoch seconds; what versions 3 and 4 added is absent
    before them (no record says it ran more than once; the code that ran is unknown)."""
    version = data.get("schema_version")
    if version == 1:
        session = data.get("session")
        if isinstance(session, dict) and type(session.get("started")) in (int, float):
            try:
                session["started"] = iso_time(session["started"])
            except (OverflowError, OSError, ValueError):
                session["started"] = None
    if version != SCHEMA_VERSION:
        data["schema_version"] = SCHEMA_VERSION
        data["upgraded_from"] = version
    return data


def root_cause_of(record: Mapping[str, Any]) -> str:
    """The cause a record groups under: its root_cause (the side that is wrong), else its
    signature (a report from before root causes, or a class whose signature is its cause); a
    MISMATCH by its kernel and what is off (causes.mismatch_cause)."""
    cause = record.get("root_cause")
    if isinstance(cause, str) and cause:
        return cause

    # A wrong result's signature says only how it is off: the kernel is part of its cause.
    return mismatch_cause(record) or record.get("signature") or record["outcome"]


def _worst(outcomes) -> str:
    def rank(name):
        known = oc.outcome_class(name)
        return (known.severity if known else -1, name)  # a class a newer plugin adds: worst

    return min(outcomes, key=rank)


def group_tier(outcome: str) -> int:
    """The tier a group of this worst class is listed under; 0 for a class this version does not
    know (before every tier: it is a failure nobody has ranked)."""
    known = oc.outcome_class(outcome)
    if known is None:
        return 0
    return known.tier if known.tier is not None else len(oc.TIERS) + 1


def signature_groups(cases: Iterable[Mapping[str, Any]]) -> list[SignatureGroup]:
    """Records grouped by root cause, one group per bug: the failures (every class that can fail
    a run, strict-only ones included) by (root cause, layer), whatever their class, so that one
    compiled-side cause is one group whatever eager refusals it met (listed in `met` with their
    counts); every other class apart, by class and cause. Failures first, by tier then size.
    `shared`: the parameters all of a group's cases share and the run's cases do not all share;
    `shape_classes`: the shape classes they all have and the passing cases of their kernels do
    not; `example_message` (numbers kept) and `source` (a user-code frame): of the example case."""

    cases = list(cases)
    groups = _gather_groups(cases)
    common = shared_params(case.get("params") or {} for case in cases)
    passed = passing_classes(cases)
    out = [_finish_group(group, common, passed) for group in groups.values()]
    return sorted(out, key=_group_order)


def _gather_groups(cases: list[Mapping[str, Any]]) -> dict[tuple, dict]:
    """The cases with a signature that neither passed nor skipped, gathered by (bucket, root
    cause, layer), the bucket "failure" for every class that fails: per group its counts, and
    under `_ids`, `_params` and `_records` what _finish_group draws the rest from."""
    groups: dict[tuple, dict] = {}
    for case in cases:
        outcome = case["outcome"]
        if not case.get("signature") or outcome in ("PASS", "SKIPPED"):
            continue
        known = oc.outcome_class(outcome)
        bucket = "failure" if known is None or known.fails else outcome
        cause = root_cause_of(case)
        group = groups.setdefault(
            (bucket, cause, case.get("layer")),
            {
                "root_cause": cause,
                "layer": case.get("layer"),
                "count": 0,
                "outcomes": {},
                "met": {},
                "_ids": {},
                "_params": [],
                "_records": [],
            },
        )
        group["count"] += 1
        group["outcomes"][outcome] = group["outcomes"].get(outcome, 0) + 1
        group["_ids"].setdefault(outcome, []).append((case["id"], case["signature"]))
        group["_params"].append(case.get("params") or {})
        group["_records"].append(case)
        met = case.get("met")
        if isinstance(met, str) and met:
            group["met"][met] = group["met"].get(met, 0) + 1
    return groups


def _finish_group(group: dict, common: dict, passed: dict) -> SignatureGroup:
    """A gathered group as signature_groups returns it (its working keys taken out): its worst
    class, tier and example, what its cases share beyond the run's `common` parameters, their
    shape classes (against the `passed` ones), and its outcome and met counts, largest first."""
    shared = shared_params(group.pop("_params"))
    # What the group's cases have in common that the run's other cases do not all share.
    group["shared"] = {k: v for k, v in shared.items() if k not in common} if group["count"] > 1 else {}
    members = group.pop("_records")
    group["shape_classes"] = shape_classes(members, passed)
    worst = _worst(group["outcomes"])
    example, signature = min(group.pop("_ids")[worst])
    record = next(r for r in members if r["id"] == example)
    return {
        "outcome": worst,
        "tier": group_tier(worst),
        "signature": signature,
        **group,
        "outcomes": dict(sorted(group["outcomes"].items(), key=lambda item: (-item[1], item[0]))),
        "met": dict(sorted(group["met"].items(), key=lambda item: (-item[1], item[0]))),
        "example": example,
        "example_message": example_text(record),
        "source": source_of(record),
    }


def _group_order(g: SignatureGroup) -> tuple:
    """The sort key of a group: failures first (by tier), then larger groups, then by name."""
    failing = g["outcome"] in oc.FAILURES or oc.outcome_class(g["outcome"]) is None
    return (not failing, g["tier"] if failing else 0, -g["count"], g["outcome"], g["root_cause"], str(g["layer"]))


# Parameters that say nothing about a bug when shared: bookkeeping of generation.
_NOT_SHARED = frozenset({"purpose", "expected_refusal"})


def shared_params(params_list: Iterable[dict]) -> dict:
    """The parameters with one and the same plain value in every mapping, in the first one's order."""
    params_list = list(params_list)
    if not params_list:
        return {}
    first = params_list[0]
    shared = {}
    for key, value in first.items():
        if key in _NOT_SHARED or not isinstance(value, (str, int, float, bool, type(None))):
            continue
        if all(key in p and p[key] == value and type(p[key]) is type(value) for p in params_list[1:]):
            shared[key] = value
    return shared


def strict_json(value: Any) -> Any:
    """`value` with every non-finite float as "inf", "-inf" or "nan": strict JSON."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {strict_json(k) if isinstance(k, float) else k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def dumps_strict(data: Any, **kwargs) -> str:
    return json.dumps(strict_json(data), allow_nan=False, default=str, **kwargs)


def write_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file beside the target and rename over it: a reader sees the old
    report or the new one, never half of one."""

    text = dumps_strict(data, indent=1, sort_keys=False)  # serialised in full before the file is touched
    write_text_atomic(path, text + "\n")


def ids_sha256(ids: Iterable[str]) -> str:
    """Hash of a set of case ids (sorted, one per line): what the shards of one run share, and
    what their union must hash to (reports/merge.py)."""

    digest = hashlib.sha256()
    for cid in sorted(set(ids)):
        digest.update(cid.encode("utf-8") + b"\n")
    return digest.hexdigest()


def shard_of(report: Report) -> tuple[int, int] | None:
    """(I, N) when the report is shard I of N of a sharded run (not a merge of the shards)."""
    block = report.get("shard")
    if not isinstance(block, dict):
        return None
    index, count = block.get("index"), block.get("count")
    return (index, count) if type(index) is int and type(count) is int else None


def shard_advice(report: Report) -> str | None:
    """What to do with a shard's report before comparing or gating it, or None."""
    position = shard_of(report)
    if position is None or position[1] == 1:  # shard 1/1 holds every case: it is the whole run
        return None
    return f"this is shard {position[0]}/{position[1]} of a sharded run: merge the shards first (scaledmm merge)"


def duplicate_ids(report: Report) -> dict[str, int]:
    """Case ids recorded more than once, with their count. Loading keeps every record, so a
    duplicate is named here instead of the last record silently winning."""
    counts = Counter(case["id"] for case in report["cases"])
    return {cid: n for cid, n in sorted(counts.items()) if n > 1}


def check_writable(path: Path) -> None:
    """Create the report's directory and a temporary file beside the report, then remove it: an
    unusable path is found before any case runs. The report itself is never touched, and a path
    that is there but is not a regular file (a directory, a FIFO, a device, a link to one) is
    refused: a report never replaces it. Raises OSError."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    if os.path.lexists(path):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise OSError("it is a link to nothing, not a regular file: a report never replaces it") from None
        if not stat.S_ISREG(mode):
            raise OSError(
                "it is there and is not a regular file (a FIFO, a device, a link to one): a report never replaces it"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)


def previous_path(path: Path) -> Path:
    """Where claiming `path` moves an earlier report: report.json -> report.previous.json."""
    path = Path(path)
    stem = path.stem if path.suffix == ".json" else path.name
    return path.with_name(f"{stem}.previous.json")


def unfinished_report(reason: str = IN_PROGRESS) -> Report:
    """A report that says only that its run did not finish: no record, complete false."""
    session = {"started": iso_time(), "complete": False, "incomplete_reasons": [reason]}
    return build_report({}, {}, [], session)


def is_unfinished_stub(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(64 * 1024)
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return False
    session = data.get("session") if isinstance(data, dict) else None
    return (
        isinstance(session, dict)
        and data.get("schema") == SCHEMA
        and data.get("cases") == []
        and session.get("complete") is False
        and "generated" not in session
    )


def start_report(path: Path, reason: str = IN_PROGRESS) -> Path | None:
    """Claim `path` for a run, under its lock: an earlier report there moves to
    `<name>.previous.json` (an unfinished one is simply replaced, so that it never displaces
    the last real report), and an unfinished report takes its place until the run writes its
    own. Returns where the earlier report went, or None. Raises OSError."""

    path = Path(path)
    return claim(path, unfinished_report(reason), write_atomic, previous_path(path), is_unfinished_stub)


def abandon_report(path, reason: str) -> None:
    """A run that stops before it claimed its report path (a usage error in its options): an
    earlier report there must not pass for this run. Best effort and quiet: a path that is not a
    regular file, or that another live run holds, is left alone; nothing is created where no
    report was."""
    if not path:
        return
    # Here, not at the top: reading reports (the tox report and gate envs) needs no lock library.
    from .report_lock import ReportLock, ReportLocked  # noqa: PLC0415

    path = Path(path)
    try:
        if not path.is_file():
            return
        lock = ReportLock(path)
        lock.acquire()
    except (OSError, ReportLocked):
        return
    try:
        start_report(path, reason)
    except OSError:
        pass
    finally:
        lock.release()


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs):
    data = dict(pairs)
    if len(data) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return data


def _too_deep(data, limit: int) -> bool:
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _check_regular(path: Path) -> None:
    # Opening a FIFO blocks until a writer comes: refuse anything but a regular file first.
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ReportError(path, "no such report") from None
    except OSError as exc:
        raise ReportError(path, f"cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ReportError(path, "not a regular file (a directory, a FIFO, a device): not a report")


def load_report(path) -> Report:
    """The report at `path`, checked: ReportError (naming the file and the key) for a file that
    is missing, unreadable, too large, not JSON, nested too deeply, not a report of this schema
    version, or whose fields the readers use have the wrong type."""
    path = Path(path)
    _check_regular(path)
    try:
        with open(path, "rb") as handle:  # a bounded read: /dev/zero or a pipe cannot fill memory
            raw = handle.read(MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        raise ReportError(path, "no such report") from None
    except OSError as exc:
        raise ReportError(path, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise ReportError(path, f"larger than {MAX_REPORT_BYTES // 2**20} MiB: not a report this version reads")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportError(path, f"cannot be read: {exc}") from None
    del raw
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ReportError(path, f"not a report (corrupt JSON at line {exc.lineno}, column {exc.colno})") from None
    except _DuplicateKey as exc:
        raise ReportError(
            path, f"not a report: key {exc.args[0]!r} appears twice in one object (which one counts is unknown)"
        ) from None
    except RecursionError:
        raise ReportError(path, f"not a report: nested deeper than {MAX_REPORT_DEPTH} levels") from None
    except (ValueError, MemoryError) as exc:
        raise ReportError(path, f"not a report ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ReportError(
            path,
            "not a pytest-scaledmm report"
            f" (key 'schema' is {data.get('schema') if isinstance(data, dict) else None!r})",
        )
    version = data.get("schema_version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        *earlier, last = (str(v) for v in READABLE_VERSIONS)
        readable = f"{', '.join(earlier)} and {last}" if earlier else last
        raise ReportError(
            path, f"key 'schema_version' is {version!r}; this pytest-scaledmm reads versions {readable} only"
        )
    if _too_deep(data, MAX_REPORT_DEPTH):
        raise ReportError(path, f"not a report: nested deeper than {MAX_REPORT_DEPTH} levels")
    problem = first_problem(data)
    if problem is not None:
        raise ReportError(path, problem)
    # The schema checked the fields the readers use: from here on the dict is typed.
    return cast(Report, upgrade_report(data))
