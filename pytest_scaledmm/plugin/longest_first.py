"""The xdist controller's scheduler for a matrix run: the next case in the workers' cost order
(schedule.CostOrder) to whichever worker has fewer than QUEUED_PER_WORKER queued; greedy
longest-processing-time-first, each case committed to a worker two cases before it starts (so not
LPT's 4/3 bound; the cheapest cases, last in the order, are the ones committed at the tail).

xdist's own modes hand out contiguous chunks in collection order, so a worker can draw the last
few autotuning cases while the others sit idle. A --dist the user gave wins.

`LongestFirstScheduling` implements xdist's `Scheduling` protocol (xdist/scheduler/protocol.py)
whole, as each of xdist's own modes does, rather than overriding another mode's private members.
The host lane (schedule.py) is looked up in the controller's typed cases, by case id.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Collection, Sequence
from typing import Protocol

import pytest
from xdist.remote import Producer
from xdist.report import report_collection_diff
from xdist.workermanage import parse_tx_spec_config

from .schedule import HOST_LANE_WORKER, builds_host_kernel
from .session import MatrixSession

# At most this many cases queued on a worker: one running and two behind it. xdist's worker takes
# the case after next before it runs one (pytest's nextitem): with two, each case waited for the
# controller's answer to the one before (a round trip, longer while the controller writes a
# partial report: 0.5-0.6 s per worker of a 60 s run on 2 cores).
QUEUED_PER_WORKER = 3


class Gateway(Protocol):
    id: str


class Worker(Protocol):
    """What the scheduler uses of xdist's WorkerController (xdist publishes no types)."""

    gateway: Gateway
    shutting_down: bool

    def send_runtest_some(self, indices: Sequence[int]) -> None: ...

    def shutdown(self) -> None: ...


def _case_id(node_id: str) -> str:
    """A matrix item's name is its case id (items.py): the node id's last part."""
    return node_id.rpartition("::")[2]


class LongestFirstScheduling:
    """Every worker collects the same cases in the same cost order (xdist checks); the controller
    hands out positions in that order. `host_lane` holds the ids of the cases only the host lane's
    worker takes while it lives."""

    def __init__(self, config: pytest.Config, log: Producer | None = None, host_lane: Collection[str] = ()):
        self.numnodes = len(parse_tx_spec_config(config))
        self.node2collection: dict[Worker, list[str]] = {}
        self.node2pending: dict[Worker, list[int]] = {}
        self.pending: list[int] = []
        self.collection: list[str] | None = None
        self.log = Producer("longestfirst") if log is None else log.longestfirst
        self.config = config
        self.host_lane = frozenset(host_lane)

    # -- the protocol's state ------------------------------------------------------------------
    @property
    def nodes(self) -> list[Worker]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        """Nothing pending, and every worker at its last case at most."""
        if not self.collection_is_completed or self.pending:
            return False
        return all(len(queued) < 2 for queued in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.pending) or any(self.node2pending.values())

    # -- the protocol's events -----------------------------------------------------------------
    def add_node(self, node: Worker) -> None:
        assert node not in self.node2pending
        self.node2pending[node] = []

    def add_node_collection(self, node: Worker, collection: Sequence[str]) -> None:
        assert node in self.node2pending
        if self.collection_is_completed and self.collection is not None and list(collection) != self.collection:
            first = next(iter(self.node2collection))
            self.log(report_collection_diff(self.collection, list(collection), first.gateway.id, node.gateway.id))
            return
        self.node2collection[node] = list(collection)

    def mark_test_complete(self, node: Worker, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self._top_up(node)

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        self.pending.insert(0, self.collection.index(item))
        for node in self.nodes:
            self._top_up(node)

    def remove_pending_tests_from_node(self, node: Worker, indices: Sequence[int]) -> None:
        raise NotImplementedError("cases are not taken back from a live worker here")

    def remove_node(self, node: Worker) -> str | None:
        """A worker that finished or died: the case it was running (None when it held none); its
        queued cases go back to their place in the order."""
        queued = self.node2pending.pop(node)
        if not queued:
            return None
        assert self.collection is not None
        crashed = self.collection[queued.pop(0)]
        self.pending.extend(queued)
        for other in self.nodes:
            self._top_up(other)
        return crashed

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a worker added later: it gets its share too
            for node in self.nodes:
                self._top_up(node)
            return
        if not self._same_collection_everywhere():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = next(iter(self.node2collection.values()))
        self.pending[:] = range(len(self.collection))
        if not self.collection:
            return
        # Round by round, so the costliest cases start at once, one on each worker.
        for _ in range(QUEUED_PER_WORKER):
            for node in self.nodes:
                if self.pending:
                    self._send(node, 1)
        self._shut_down_when_all_sent()

    # -- hand-out --------------------------------------------------------------------------------
    def _in_host_lane(self, index: int) -> bool:
        assert self.collection is not None
        return _case_id(self.collection[index]) in self.host_lane

    def _lane_node(self) -> Worker | None:
        for node in self.node2pending:
            if node.gateway.id == HOST_LANE_WORKER and not node.shutting_down:
                return node
        return None

    def _top_up(self, node: Worker) -> None:
        if node.shutting_down:
            return
        queued = len(self.node2pending[node])
        if queued < QUEUED_PER_WORKER:
            self._send(node, QUEUED_PER_WORKER - queued)
        self._shut_down_when_all_sent()

    def _send(self, node: Worker, count: int) -> None:
        """The next `count` pending cases this node may take: the host lane's go to its worker
        (to any worker once it is gone), the others to every worker."""
        lane = self._lane_node()
        # Pending indices are positions in the cost order; a dead worker's queued cases were
        # appended at the end, and go back to their place.
        self.pending.sort()
        chosen: list[int] = []
        for position, index in enumerate(self.pending):
            if len(chosen) == count:
                break
            if lane is None or node is lane or not self._in_host_lane(index):
                chosen.append(position)
        indices = [self.pending[position] for position in chosen]
        for position in reversed(chosen):
            del self.pending[position]
        if indices:
            self.node2pending[node].extend(indices)
            node.send_runtest_some(indices)

    def _shut_down_when_all_sent(self) -> None:
        """Every worker stops after its queue once nothing is pending; not before, and not while
        the host lane's worker holds host cases behind the one it runs (no other worker may take
        them while it lives): should it die, another must be there to take them."""
        if self.pending:
            return
        lane = self._lane_node()
        if lane is not None and any(node is not lane and not node.shutting_down for node in self.nodes):
            if any(self._in_host_lane(index) for index in self.node2pending[lane][1:]):
                return
        for node in self.nodes:
            if not node.shutting_down:
                node.shutdown()

    def _same_collection_everywhere(self) -> bool:
        """Whether every worker collected the same cases in the same order; a collection error
        names the ones that differ."""
        (first, collection), *others = self.node2collection.items()
        same = True
        for node, other in others:
            diff = report_collection_diff(collection, other, first.gateway.id, node.gateway.id)
            if diff:
                same = False
                self.log(diff)
                report = pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=diff, result=[])
                self.config.hook.pytest_collectreport(report=report)
        return same


def _dist_given(config: pytest.Config) -> bool:
    """Whether the user chose an xdist distribution mode (command line, PYTEST_ADDOPTS, addopts)."""
    args = list(config.invocation_params.args) + shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    args += list(config.getini("addopts"))
    return any(arg in ("--dist", "-d") or arg.startswith("--dist=") for arg in map(str, args))


class LongestFirst:
    """Registered on the xdist controller of a matrix run when no --dist was given."""

    def __init__(self, state: MatrixSession):
        self.state = state

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Producer) -> LongestFirstScheduling:
        host_lane = [case.id for case in self.state.cases() if builds_host_kernel(case.params)]
        return LongestFirstScheduling(config, log, host_lane)


def schedule_longest_first(config: pytest.Config, state: MatrixSession) -> LongestFirst | None:
    """xdist's default `load` mode hands out chunks of consecutive cases and never takes them
    back, and `worksteal` takes back the cheap end of a queue: with cases of very different cost
    (eager 0.05 s, autotuning 5 s) a worker drawing the last autotuning cases holds the wall while
    the others sit idle. The plugin to register, or None where the user chose a --dist."""
    if getattr(config.option, "dist", "no") != "load" or _dist_given(config):
        return None
    return LongestFirst(state)
