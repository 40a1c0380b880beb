"""The versioned JSON report: build, write atomically, read back with one clear error; the
report path checked writable and locked against a second run, and claimed, before any case runs.

Claiming the path moves an earlier report aside (`<name>.previous.json`) and leaves an unfinished
report in its place, so that a run killed or refused before it writes its own never leaves a
complete-looking report from an earlier run where the user asked for this one.

Reading a report checks its structure once (REPORT_SCHEMA, for the fields the readers use), caps
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
from ..matrix.schema import CATEGORICAL_AXES, KERNEL_AXES, SHAPE_AXES
from ..records import CaseRecord, MatrixBlock, Report, SessionBlock, SignatureGroup
from ..verdict import outcome as oc
from .causes import example_text, mismatch_cause, passing_classes, shape_classes, source_of
from .files import write_text_atomic
from .printable import printable
from .report_path import claim

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
        "environment": environment,
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


# JSON has no spelling for infinities and NaN (json.dumps would write Infinity and NaN, which
# jq and strict parsers reject): every file written holds these strings instead, as the JUnit
# properties do, and readers take them back with `number`.
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


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


def number(value: Any) -> float | None:
    """A number as a report holds it (a JSON number or one of NON_FINITE's strings), else None."""
    if type(value) in (int, float):
        return float(value)
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return None


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


# The fields the readers use (compare, gate, merge, render, repro, the plugin's baseline and
# first-failure order), by type: everything else a report holds is free. "integer" and "number"
# exclude booleans, and "integer" excludes 6.0 (see _validator).
_TEXT = {"type": ["string", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
# A class name; one this version does not know (a newer plugin's) counts as a failure.
_CLASS_NAME = "^[A-Z][A-Z0-9_]*$"
# `source`: the innermost user-code frame, "path:line in fn" (outcome.source_frame).
_ERROR_INFO = {
    "type": ["object", "null"],
    "properties": {key: _TEXT for key in ("type", "message", "root_type", "layer", "root_message", "source")},
}
# A number, or how a non-finite one is written (NON_FINITE).
_NUMBER = {"type": ["number", "string"], "pattern": "^(-?inf|nan)$"}
_NUMBER_OR_NULL = {**_NUMBER, "type": ["number", "string", "null"]}
_COUNT = {"type": "integer", "minimum": 0}
# One side's check against the reference (verdict/reference.py); a check may carry measures a
# newer plugin adds, and those named here are typed.
_CHECK = {
    "type": ["object", "null"],
    "properties": {
        "ok": {"type": "boolean"},
        **{key: _NUMBER for key in ("ratio", "max_abs", "max_rel")},
        **{key: _TEXT for key in ("problem", "where", "pattern")},
        **{key: _COUNT for key in ("off_elements", "off")},
        **{key: _NUMBER_OR_NULL for key in ("off_rows", "off_columns", "nonfinite", "elements")},
        "bound": {"type": ["object", "null"], "properties": {"slack": _NUMBER, "model": _TEXT}},
    },
}
# The known-failure entry a record matched or missed (known_failures.py Entry.describe).
_KNOWN_FAILURE = {
    "type": ["object", "null"],
    "properties": {
        "entry": {"type": ["integer", "null"]},
        "original_outcome": {"type": ["string", "null"], "pattern": _CLASS_NAME},
        **{key: _TEXT for key in ("signature", "torch", "link", "reason")},
    },
}


def _axis_types(values) -> list[str]:
    """The JSON types of an axis's values, as a record's params hold them."""
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return sorted({names[type(value)] for value in values})


# A record's params: the case as generation made it (matrix/case_params.py). Each axis holds
# the type of its values (readers group, match and show cases by them); the kernel, scale
# forms, mode and sizes that coverage and shape classes read are always there.
_PARAMS = {
    "type": "object",
    "required": ["kernel", "scale_a", "scale_b", "mode", *SHAPE_AXES],
    "properties": {
        **{name: {"type": _axis_types(values)} for name, values in CATEGORICAL_AXES.items()},
        **{name: {"type": _axis_types(values)} for name, (values, _, _) in KERNEL_AXES.items()},
        "kernel": {"type": "string", "minLength": 1},
        **{dim: _COUNT for dim in SHAPE_AXES},
        "purpose": {"type": "string"},
        "expected_refusal": _TEXT,
        "activation": {"type": "string"},
        "accumulation": {"type": "string"},
        "activation_divisor": {"type": "number"},
    },
    # An axis a newer plugin adds: a plain value, as every axis is.
    "additionalProperties": {"type": ["string", "integer", "number", "boolean", "null"]},
}
_RECORD = {
    "type": "object",
    "required": ["id", "outcome", "params"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "outcome": {"type": "string", "pattern": _CLASS_NAME},
        "params": _PARAMS,
        **{key: _TEXT for key in ("signature", "root_cause", "met", "layer", "detail")},
        "eager_error": _ERROR_INFO,
        "compiled_error": _ERROR_INFO,
        "known_failure": _KNOWN_FAILURE,
        "known_failure_missed": {"type": "array", "items": {**_KNOWN_FAILURE, "type": "object"}},
        "errors": {"type": ["object", "null"], "properties": {"eager": _CHECK, "compiled": _CHECK}},
        "timing": {"type": ["object", "null"], "additionalProperties": _NUMBER_OR_NULL},
        "extra": {
            "type": ["object", "null"],
            "properties": {
                # The Inductor GEMM kernel chosen (verdict/kernel_choice.py).
                "kernel_choice": {
                    "type": ["object", "null"],
                    "properties": {"label": _TEXT, "kernels": _STRINGS},
                },
                # The kernel's own tolerance slack and why (the gate refuses a looser one).
                "kernel_slack": {"type": ["object", "null"], "properties": {"slack": _NUMBER, "reason": _TEXT}},
            },
        },
        # What the support model expected (coverage.py model_block).
        "model": {
            "type": ["object", "null"],
            "properties": {
                "mismatch": {"type": "boolean"},
                **{key: _TEXT for key in ("purpose", "expected_refusal", "refusal", "explained", "detail")},
            },
        },
        "triage": {"type": ["object", "null"]},
        # Every run of a case that ran more than once (plugin/session.py repeated_record).
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["outcome"],
                "properties": {"outcome": {"type": "string", "pattern": _CLASS_NAME}, "signature": _TEXT},
            },
        },
    },
}

# The environment's text fields: compare's columns, merge's sameness checks, replay commands and
# repro scripts show them.
ENVIRONMENT_TEXT = (
    "torch",
    "cuda",
    "hip",
    "triton",
    "python",
    "platform",
    "device",
    "device_name",
    "arch",
    "capability",
    "tox_env",
    "hypothesis",
    "plugin",
)
REPORT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema", "schema_version", "environment", "cases"],
    "properties": {
        "environment": {
            "type": "object",
            "properties": {
                **{key: _TEXT for key in ENVIRONMENT_TEXT},
                "sm_count": {"type": ["integer", "null"]},
            },
        },
        "matrix": {
            "type": "object",
            "properties": {
                **{key: _TEXT for key in ("path", "hash", "profile", "arch")},
                "seed": {"type": ["integer", "null"]},
                "cases": {"type": ["integer", "null"]},
                # The seed and device the run was given, which its replay commands name.
                "forced": {
                    "type": ["object", "null"],
                    "properties": {"seed": {"type": ["integer", "null"]}, "device": _TEXT},
                },
                # The code that ran (matrix/code_digest.py): merge, compare and gate read it.
                "code": {
                    "type": ["object", "null"],
                    "properties": {
                        "plugin": _TEXT,
                        "kernels": {
                            "type": "object",
                            "additionalProperties": {
                                "type": "object",
                                "properties": {
                                    "sha256": _TEXT,
                                    "files": {"type": "object", "additionalProperties": _TEXT},
                                    "builtin": {"type": "boolean"},
                                    "unknown": _TEXT,
                                },
                            },
                        },
                    },
                },
                "tolerance": {
                    "type": ["object", "null"],
                    "properties": {
                        "slack": _NUMBER,
                        "kernels": {
                            "type": "object",
                            "additionalProperties": {
                                "type": "object",
                                "properties": {"slack": _NUMBER, "reason": _TEXT},
                            },
                        },
                    },
                },
            },
        },
        "session": {
            "type": "object",
            "properties": {
                "complete": {"type": "boolean"},
                # Whether strict-only failures (error parity on invalid input) failed the run;
                # missing is strict.
                "strict_errors": {"type": "boolean"},
                "incomplete_reasons": _STRINGS,
                "generated": _COUNT,
                "recorded": _COUNT,
                # ISO 8601 since version 2; epoch seconds in version 1 (upgrade_report).
                "started": {"type": ["string", "number", "null"]},
                "wall_s": {"type": ["number", "null"]},
                # Inductor's FX graph cache over the run (plugin/session.py compile_cache_counts).
                "compile_cache": {"type": "object", "additionalProperties": _COUNT},
                # The session's own seconds, per process (plugin/timeline.py).
                "phases": {"type": "object"},
            },
        },
        # A shard run (--scaledmm-shard I/N) and a merged report (scaledmm merge).
        "shard": {
            "type": "object",
            "required": ["index", "count", "total_cases", "total_ids_sha256"],
            "properties": {
                "index": {"type": ["integer", "null"], "minimum": 1},
                "count": {"type": "integer", "minimum": 1},
                "cases": _COUNT,
                "total_cases": _COUNT,
                "total_ids_sha256": {"type": "string"},
                "ids_sha256": {"type": "string"},
                # Per kernel, what the whole run can cover (coverage.py): lists of plain values;
                # the values of each dimension of its space, the token counts the server slice added.
                "possible": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "axis_values": {
                                "type": "object",
                                "additionalProperties": {
                                    "type": "array",
                                    "items": {"type": ["string", "integer", "boolean"]},
                                },
                            },
                            "m_added": {"type": "array", "items": {"type": "integer"}},
                            # Strings: epilogue targets (matrix/epilogue.py), shape labels.
                            "epilogue": {"type": "array", "items": {"type": "string"}},
                            "shapes_added": {"type": "array", "items": {"type": "string"}},
                            "not_proven": {"type": "array", "items": {"type": "string"}},
                        },
                        "additionalProperties": {
                            "type": "array",
                            "items": {"type": "array", "items": {"type": ["string", "integer", "boolean"]}},
                        },
                    },
                },
                "merged": {"type": "array"},
            },
        },
        "summary": {"type": "object", "additionalProperties": _COUNT},
        # Root-cause groups (signature_groups); older reports lack the example and shape fields.
        "signatures": {
            "type": "array",
            "items": {
                "properties": {
                    "root_cause": _TEXT,
                    "example": _TEXT,
                    "example_message": _TEXT,
                    "source": _TEXT,
                    "shape_classes": _STRINGS,
                },
            },
        },
        "cases": {"type": "array", "items": _RECORD},
    },
}


_VALIDATOR = None


def _validator():
    global _VALIDATOR
    if _VALIDATOR is None:
        from jsonschema import Draft202012Validator, validators  # noqa: PLC0415 (jsonschema at first read)

        checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
            {
                "integer": lambda _, value: type(value) is int,
                "number": lambda _, value: type(value) in (int, float),
            }
        )
        _VALIDATOR = validators.extend(Draft202012Validator, type_checker=checker)(REPORT_SCHEMA)
    return _VALIDATOR


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


def _json_path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


_SCHEMA_TYPES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "boolean": "a boolean",
    "integer": "a whole number",
    "number": "a number",
    "null": "null",
}
_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def _schema_message(error) -> str:
    where = _json_path(error.absolute_path)
    value = error.instance
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        wanted = " or ".join(_SCHEMA_TYPES.get(t, str(t)) for t in types)
        return f"key '{where}' must be {wanted}, not {_JSON_TYPES.get(type(value), type(value).__name__)}"
    if error.validator == "required":
        missing = next((k for k in error.validator_value if isinstance(value, dict) and k not in value), "?")
        return f"key '{_json_path([*error.absolute_path, missing])}' is missing"
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if error.validator == "pattern" and error.validator_value == _NUMBER["pattern"]:
        return f"key '{where}' is {shown}, not a number (nor inf, -inf or nan)"
    if error.validator == "pattern":
        return f"key '{where}' is {shown}, not an outcome class name"
    if error.validator == "minLength":
        return f"key '{where}' is empty"
    if error.validator == "minimum":
        return f"key '{where}' is {shown}, below {error.validator_value}"
    return f"key '{where}' is {shown}: {error.validator} {error.validator_value!r}"


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
    from jsonschema.exceptions import best_match  # noqa: PLC0415 (jsonschema at first read)

    error = best_match(_validator().iter_errors(data))
    if error is not None:
        raise ReportError(path, _schema_message(error))
    # The schema checked the fields the readers use: from here on the dict is typed.
    return cast(Report, upgrade_report(data))
