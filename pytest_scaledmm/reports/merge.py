"""`scaledmm merge`: the reports of the shards of one run (--scaledmm-shard I/N) joined into one.

The merged report is complete only when it can stand for an unsharded run: every shard 1..N
is there exactly once, each complete; all come from the same matrix (hash, profile, seed, arch)
and the same environment (torch, CUDA/HIP, triton, hypothesis, device); no case id appears
twice; and the ids the shards ran are exactly the ids of the whole (the `total_ids_sha256`
every shard recorded). Otherwise the report is still written, with `complete: false` and one
reason per problem, so that `scaledmm gate` fails on it. Shards that ran different code (a
kernel's digest or the plugin's, matrix.code) are not merged at all: MergeRefused, one line
naming the kernel and the shard files.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..errors import ScaledmmError
from ..records import Report
from .coverage import coverage_block
from .gate import incompleteness
from .provenance import shards_code_difference
from .report import build_report, ids_sha256, iso_time

CHECKED_MATRIX = ("hash", "profile", "seed", "arch")
CHECKED_ENVIRONMENT = ("torch", "cuda", "hip", "triton", "hypothesis", "arch", "device_name")


class MergeRefused(ScaledmmError):
    """Shards that must not be merged (they ran different code): no merged report is written."""


@dataclass
class ShardInput:
    path: str
    report: Report | None = None
    error: str | None = None  # why it could not be read: one line naming the file


@dataclass
class _Shard:
    """A shard input that was read and is a shard's report: what the merge joins."""

    path: str
    report: Report
    index: int  # I of I/N


@dataclass
class MergeResult:
    report: Report
    reasons: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.reasons


def _differences(shards: Sequence[_Shard], block: str, keys: Sequence[str]) -> list[str]:
    reasons = []
    for key in keys:
        values: dict[str, list[str]] = {}
        for shard in shards:
            values.setdefault(repr(_block(shard.report, block).get(key)), []).append(shard.path)
        if len(values) > 1:
            shown = "; ".join(f"{value} in {', '.join(paths)}" for value, paths in values.items())
            reasons.append(f"the shards come from different runs: key '{block}.{key}' differs ({shown})")
    return reasons


def _block(report: Report, name: str) -> Mapping[str, Any]:
    """A block of the report by name (matrix, environment, shard), {} when absent."""
    return cast("Mapping[str, Any]", report.get(name) or {})


def _usable(inputs: Sequence[ShardInput], reasons: list[str]) -> list[_Shard]:
    shards = []
    for item in inputs:
        if item.error or item.report is None:
            reasons.append(item.error or f"{item.path}: not read")
            continue
        block = item.report.get("shard")
        index = block.get("index") if isinstance(block, dict) else None
        if not isinstance(block, dict):
            reasons.append(f"{item.path}: not a shard report (no 'shard' block: run pytest with --scaledmm-shard I/N)")
        elif index is None:
            reasons.append(f"{item.path}: a merged report, not a shard: merge the shard reports themselves")
        else:
            shards.append(_Shard(item.path, item.report, index))
    return sorted(shards, key=lambda s: (s.index, s.path))


MISSING_SHOWN = 20


def _shard_set(shards: Sequence[_Shard], reasons: list[str]) -> int:
    """N, after a reason for each shard 1..N missing or given twice."""
    counts = Counter(s.report["shard"]["count"] for s in shards)
    if not counts:
        reasons.append("no shard report to merge")
        return 0
    count = max(counts)
    if len(counts) > 1:
        shown = ", ".join(f"{s.path} is {s.index}/{s.report['shard']['count']}" for s in shards)
        reasons.append(f"the shards disagree on N: {shown}")
    given = Counter(s.index for s in shards)
    # A shard given twice first: it is why another looks missing (`merge OUT s1.json s1.json`).
    for index, times in sorted(given.items()):
        if times > 1:
            paths = ", ".join(s.path for s in shards if s.index == index)
            reasons.append(f"shard {index}/{count} is duplicated: given {times} times ({paths})")
    # N is the file's word: count the missing shards without listing them all (N may be 10**30).
    missing = count - len({index for index in given if 1 <= index <= count})
    if missing:
        first = list(itertools.islice((i for i in range(1, count + 1) if not given.get(i)), MISSING_SHOWN))
        more = f" and {missing - len(first)} more" if missing > len(first) else ""
        reasons.append(
            f"shard(s) {', '.join(f'{i}/{count}' for i in first)}{more} missing: {missing} of {count} not given"
        )
    for index in sorted(given):
        if index > count:
            reasons.append(f"shard {index} is beyond N = {count}")
    return count


def merge_shards(inputs: Sequence[ShardInput]) -> MergeResult:
    """Join the shard reports; the result says whether the merge is complete, and why not.
    MergeRefused when the shards ran different code: old and new results would pass for one run."""
    reasons: list[str] = []
    shards = _usable(inputs, reasons)
    refused = shards_code_difference([(shard.path, shard.report) for shard in shards])
    if refused:
        raise MergeRefused(refused)
    count = _shard_set(shards, reasons)
    reasons += _differences(shards, "matrix", CHECKED_MATRIX)
    reasons += _differences(shards, "environment", CHECKED_ENVIRONMENT)
    reasons += _differences(shards, "shard", ("total_cases", "total_ids_sha256"))
    if len({bool((s.report.get("session") or {}).get("strict_errors", True)) for s in shards}) > 1:
        reasons.append("the shards were run with and without --scaledmm-strict-errors")
    for shard in shards:
        why = incompleteness(shard.report)
        if why:
            reasons.append(f"{shard.path}: shard {shard.index}/{shard.report['shard']['count']} is incomplete: {why}")

    owners: dict[str, list[str]] = {}
    for shard in shards:
        for record in shard.report["cases"]:
            owners.setdefault(record["id"], []).append(shard.path)
    duplicated = {cid: paths for cid, paths in owners.items() if len(paths) > 1}
    if duplicated:
        cid, paths = min(duplicated.items())
        reasons.append(f"{len(duplicated)} case id(s) recorded more than once, e.g. {cid} in {', '.join(paths)}")
    first_shard = _block(shards[0].report, "shard") if shards else {}
    total = first_shard.get("total_cases")
    expected = first_shard.get("total_ids_sha256")
    if shards and not reasons and ids_sha256(owners) != expected:
        reasons.append(
            f"the shards' {len(owners)} case(s) are not the {total} case(s) of the run they name (total_ids_sha256)"
        )
    return MergeResult(_merged_report(shards, count, total, reasons), reasons)


def _merged_report(shards: Sequence[_Shard], count: int, total: int | None, reasons: list[str]) -> Report:
    first: Mapping[str, Any] = shards[0].report if shards else {}
    records = [record for shard in shards for record in shard.report["cases"]]  # duplicates kept: the gate names them
    sessions = [_block(s.report, "session") for s in shards]
    started = sorted(str(s["started"]) for s in sessions if s.get("started"))
    walls = [s["wall_s"] for s in sessions if type(s.get("wall_s")) in (int, float)]
    session = {
        "started": started[0] if started else iso_time(),
        "wall_s": max(walls) if walls else None,  # the shards ran side by side
        "complete": not reasons,
        "incomplete_reasons": list(reasons),
        "generated": total if type(total) is int else len(records),
        "recorded": len(records),
        "strict_errors": any(bool(s.get("strict_errors", True)) for s in sessions) if sessions else True,
    }
    matrix = dict(first.get("matrix") or {})
    if type(total) is int:
        matrix["cases"] = total
    block = first.get("shard") or {}
    report = build_report(dict(first.get("environment") or {}), matrix, records, session)
    report["coverage"] = coverage_block(records, block.get("possible"), matrix.get("arch"))
    report["shard"] = {
        "index": None,
        "count": count or 1,
        "cases": len(records),
        "total_cases": total if type(total) is int else len(records),
        "total_ids_sha256": block.get("total_ids_sha256") or "",
        "ids_sha256": ids_sha256(r["id"] for r in records),
        "merged": [
            {
                "index": s.index,
                "path": s.path,
                "cases": len(s.report["cases"]),
                "complete": (s.report.get("session") or {}).get("complete") is True,
            }
            for s in shards
        ],
    }
    return report
