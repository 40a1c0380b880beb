"""Scheduling for the tail: the costliest cases first, handed out one at a time (the controller's
scheduler is longest_first.py).

A run's wall is bounded below by the longer of (total case time ÷ workers) and its longest case.
xdist's own modes hand out contiguous chunks in collection order, so a worker can draw the last
few autotuning cases while the others sit idle. Here every worker orders its collection by
expected cost, highest first (the same inputs in every worker, so the same order: xdist checks),
and the controller hands the next case to whichever worker has fewer than three queued: greedy
longest-processing-time-first scheduling, each case committed to a worker two cases before it
starts (so not LPT's 4/3 bound; the cheapest cases, last in the order, are the ones committed
at the tail).

The expected cost of a case is its measured seconds in the newest report of the same matrix in
the run's report directory, else the one cost model (cost.py): the compile mode's typical
seconds, less for a case expected to be refused, more for scales on the host.

One lane: the cases whose compiled side builds a CPU kernel beside the GPU ones (a scale on the
host under an Inductor mode) all go to worker HOST_LANE_WORKER, whose child starts the check of
the CPU's vector ISAs when it gets its settings (session.py sets RunContext.host_lane,
execution/isolate.py starts it). Inductor checks them once per process, a test build and a test
load in a new Python for each ISA, one process at a time under its file lock: on an H200 with 14
workers that check, paid by each process that met such a case, was 50-95 s of one case's compile
(device.py's quicker load probe has since cut the check itself to 9 s cold, 2 s warm).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..matrix.compile_modes import inductor_modes
from ..reports.report import ReportError, load_report
from ..verdict.case_axes import CaseParams
from .cost import case_cost

HOST_LANE_WORKER = "gw0"


def builds_host_kernel(params: CaseParams) -> bool:
    """Whether a case's compiled side builds a CPU kernel beside the GPU ones: its scale on the host
    under an Inductor mode."""
    return params.operand_layout == "scale_on_host" and params.mode in inductor_modes()


def measured_seconds(record: Mapping[str, Any]) -> float | None:
    """A recorded case's seconds: the worker's own clock when the record has it, else its parts."""
    timing = record.get("timing")
    if not isinstance(timing, Mapping):
        return None
    whole = timing.get("case_s")
    if isinstance(whole, (int, float)) and not isinstance(whole, bool):
        return float(whole)
    parts = [v for v in timing.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return float(sum(parts)) if parts else None


def previous_durations(report_dir: Path, matrix: str | None = None) -> dict[str, float]:
    """Case id -> seconds from the newest finished, readable report of `matrix` in the directory."""
    data = newest_finished_report(report_dir, matrix)
    if data is None:
        return {}
    durations = {}
    for case in data["cases"]:
        seconds = measured_seconds(case)
        if seconds is not None:
            durations[case["id"]] = seconds
    return durations


def newest_finished_report(report_dir: Path, matrix: str | None = None) -> dict | None:
    """The newest readable report of a finished run (of `matrix`, when given) in the directory.
    The placeholder a run claims its path with holds no case and is skipped."""
    try:
        reports = sorted(report_dir.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    for path in reports:
        try:
            data = load_report(path)
        except (ReportError, OSError):
            continue
        if "generated" not in (data.get("session") or {}):
            continue
        if matrix is not None and (data.get("matrix") or {}).get("path") != matrix:
            continue
        return dict(data)
    return None


class CostOrder:
    """Orders a matrix run's cases by expected cost, highest first; other items keep their place
    after them. With --scaledmm-first-failure that order (speed.FirstFailureOrder) comes first and
    cost breaks its ties."""

    def __init__(self, report_dir: Path, matrix: str | None = None):
        self.report_dir = report_dir
        self.matrix = matrix

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        measured = previous_durations(self.report_dir, self.matrix)

        def cost(item: pytest.Item) -> float:
            case = getattr(item, "case", None)
            if case is None:
                return -1.0
            seen = measured.get(case.id)
            return seen if seen is not None else case_cost(case.params)

        # Stable: among equal costs the generator's order stays, and so does any earlier ordering's
        # key when a plugin that runs after this one sorts again.
        items.sort(key=lambda item: -cost(item))
