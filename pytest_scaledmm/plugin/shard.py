"""--scaledmm-shard I/N: one runner's part of the matrix, for a CI system's own job matrix.

Every shard generates the identical full case list first (same file, profile, seed, arch) and
keeps its slice, so the N slices are disjoint and cover every case whatever the runner. Cases
are dealt out by expected cost (cost.py, the scheduler's model too), longest first (LPT), over a
stable ordering (cost, then id): a shard of max-autotune cases does not run for minutes while
another holds only eager ones.

The report of a shard says which shard it is and which whole it belongs to (`shard` block:
index, count, total_cases, total_ids_sha256, ids_sha256, possible): `scaledmm merge` joins the
slices back into one report and checks that they make the whole (reports/merge.py).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence

import pytest

from ..reports.report import ids_sha256
from .cost import case_cost

_FORMAT = re.compile(r"^\s*(\d{1,9})\s*/\s*(\d{1,9})\s*$")


def shard_problem(value: object) -> str | None:
    """None when `value` is "I/N" with whole numbers 1 <= I <= N, else the problem."""
    found = _FORMAT.match(str(value))
    if found and 1 <= int(found.group(1)) <= int(found.group(2)):
        return None
    return f"{value!r} is not I/N with whole numbers 1 <= I <= N (e.g. 2/4 for the second of four shards)"


def parse_shard(value: str | None) -> tuple[int, int] | None:
    """(I, N) from "I/N" (1-based), None when not given; pytest.UsageError for anything else."""
    if value is None:
        return None
    problem = shard_problem(value)
    if problem:
        raise pytest.UsageError(f"--scaledmm-shard: {problem}")
    found = _FORMAT.match(str(value))
    assert found is not None  # shard_problem checked the format
    return int(found.group(1)), int(found.group(2))


def assign(costs: Sequence[tuple[str, float]], count: int) -> list[int]:
    """Shard index (0-based) of each (id, cost), greedy longest processing time first: cases in
    the order (cost descending, id), each to the least loaded shard (the lowest index on a tie).
    Depends only on the ids and costs, never on their order in `costs`."""
    order = sorted(range(len(costs)), key=lambda i: (-costs[i][1], costs[i][0]))
    loads = [(0.0, shard) for shard in range(count)]
    heapq.heapify(loads)
    owner = [0] * len(costs)
    for i in order:
        load, shard = heapq.heappop(loads)
        owner[i] = shard
        heapq.heappush(loads, (load + costs[i][1], shard))
    return owner


def shard_slice(cases: list, index: int, count: int) -> list:
    """The cases of shard `index` of `count` (1-based), in the full list's order."""
    owner = assign([(case.id, case_cost(case.params)) for case in cases], count)
    return [case for case, shard in zip(cases, owner) if shard == index - 1]


def shard_block(index: int, count: int, full_cases: list, slice_cases: list, possible: dict) -> dict:
    """The report's `shard` block for shard `index` of `count`."""
    return {
        "index": index,
        "count": count,
        "cases": len(slice_cases),
        "total_cases": len(full_cases),
        "total_ids_sha256": ids_sha256(case.id for case in full_cases),
        "ids_sha256": ids_sha256(case.id for case in slice_cases),
        # What the whole run can cover (reports/coverage.py), so that the merged report's
        # coverage block is that of an unsharded run.
        "possible": possible,
    }
