"""Scheduling for the tail: the costliest cases first, handed out one at a time.

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
from typing import TYPE_CHECKING, Any

import pytest

from ..matrix.case_params import OPERAND_LAYOUT_SHORT
from ..matrix.compile_modes import inductor_modes
from ..reports.report import ReportError, load_report
from .cost import case_cost

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler import LoadScheduling
    from xdist.workermanage import WorkerController

# At most this many cases queued on a worker: one running and two behind it. xdist's worker takes
# the case after next before it runs one (pytest's nextitem): with two, each case waited for the
# controller's answer to the one before (a round trip, longer while the controller writes a
# partial report: 0.5-0.6 s per worker of a 60 s run on 2 cores).
QUEUED_PER_WORKER = 3
HOST_LANE_WORKER = "gw0"


def builds_host_kernel(case_id: str) -> bool:
    """Whether a case's compiled side builds a CPU kernel beside the GPU ones: its scale on the host
    (case_params.OPERAND_LAYOUT_SHORT) under an Inductor mode. Read from the id alone, as the
    controller has nothing else."""
    if OPERAND_LAYOUT_SHORT["scale_on_host"] not in case_id.split("-"):
        return False
    return any(f"-{mode}-" in f"-{case_id}-" for mode in inductor_modes())


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


def longest_first_scheduling(config: pytest.Config, log: Producer) -> LoadScheduling:
    """The controller's scheduler: the next case in collection order to the first worker with
    fewer than QUEUED_PER_WORKER queued (xdist's LoadScheduling, with its chunking taken out)."""
    from xdist.scheduler import LoadScheduling  # noqa: PLC0415  lazy: only under xdist

    class LongestFirstScheduling(LoadScheduling):
        def _lane_node(self) -> WorkerController | None:
            for node in self.nodes:
                if node.gateway.id == HOST_LANE_WORKER and not node.shutting_down:
                    return node
            return None

        def _send_next(self, node: WorkerController, count: int) -> None:
            """The next `count` pending cases this node may take: the host lane's go to its worker
            (to any worker once it is gone), the others to every worker."""
            lane = self._lane_node()
            collection = self.collection or []  # type: ignore[has-type]
            # Pending indices are positions in the cost order; xdist appends a dead worker's
            # queued cases at the end, and they go back to their place.
            self.pending.sort()
            chosen: list[int] = []
            for position, index in enumerate(self.pending):
                if len(chosen) == count:
                    break
                in_lane = lane is not None and builds_host_kernel(collection[index].rpartition("::")[2])
                if not in_lane or node is lane:
                    chosen.append(position)
            indices = [self.pending[position] for position in chosen]
            for position in reversed(chosen):
                del self.pending[position]
            if indices:
                self.node2pending[node].extend(indices)
                node.send_runtest_some(indices)

        def schedule(self) -> None:
            assert self.collection_is_completed
            if self.collection is not None:  # type: ignore[has-type]
                for node in self.nodes:
                    self.check_schedule(node)
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            collection = next(iter(self.node2collection.values()))
            self.collection = collection
            self.pending[:] = range(len(collection))
            if not collection:
                return
            # Round by round, so the costliest cases start at once, one on each worker.
            for _ in range(QUEUED_PER_WORKER):
                for node in self.nodes:
                    if self.pending:
                        self._send_next(node, 1)
            self._shut_down_when_all_sent()

        def check_schedule(self, node: WorkerController, duration: float = 0) -> None:
            if node.shutting_down:
                return
            queued = len(self.node2pending[node])
            if queued < QUEUED_PER_WORKER:
                self._send_next(node, QUEUED_PER_WORKER - queued)
            self._shut_down_when_all_sent()

        def _shut_down_when_all_sent(self) -> None:
            """Every worker stops after its queue once nothing is pending; not before, and not
            while the host lane's worker holds host cases behind the one it runs (no other worker
            may take them while it lives): should it die, another must be there to take them."""
            if self.pending:
                return
            lane = self._lane_node()
            if lane is not None and any(node is not lane and not node.shutting_down for node in self.nodes):
                collection = self.collection or []
                behind = self.node2pending[lane][1:]
                if any(builds_host_kernel(collection[index].rpartition("::")[2]) for index in behind):
                    return
            for node in self.nodes:
                if not node.shutting_down:
                    node.shutdown()

    return LongestFirstScheduling(config, log)
