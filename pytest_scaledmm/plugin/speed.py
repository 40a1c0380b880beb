"""Getting to the first failure fast: likely-failing cases first, each new signature noted with
the time it appeared; CPU threads shared out between xdist workers, and cases balanced between them."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..execution.device import threads_per_worker
from ..execution.triage import headline
from ..matrix.compile_modes import inductor_modes
from ..matrix.schema import SCALE_RANK
from ..reports.printable import printable
from ..verdict import outcome as oc
from .items import user_property
from .schedule import newest_finished_report

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler import LoadScheduling


def likelihood(params: dict) -> int:
    """A prior on failing: mixed scale ranks under Inductor first, then any Inductor mode."""
    inductor = params.get("mode") in inductor_modes()
    mixed = SCALE_RANK.get(str(params.get("scale_a"))) != SCALE_RANK.get(str(params.get("scale_b")))
    return 2 * (inductor and mixed) + inductor


def last_failures(report_dir: Path, matrix: str | None = None) -> set[str]:
    """Ids that failed in the newest readable report of the directory (of `matrix`, when given),
    like pytest's --ff. The unfinished report this run claimed its path with is skipped: it is
    the newest, and holds no case."""

    data = newest_finished_report(report_dir, matrix)
    return {c["id"] for c in data["cases"] if c["outcome"] in oc.FAILURES} if data is not None else set()


class FirstFailureOrder:
    def __init__(self, report_dir: Path, matrix: str | None = None):
        self.report_dir = report_dir
        self.matrix = matrix

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Same inputs in every xdist worker (the same report file), so the same order everywhere.
        failed = last_failures(self.report_dir, self.matrix)
        keyed = [(item, getattr(item, "case", None)) for item in items]  # other tests have no case
        keyed.sort(
            key=lambda pair: (
                pair[1] is None or pair[1].id not in failed,
                -likelihood(pair[1].params) if pair[1] else 0,
            )
        )
        items[:] = [item for item, _ in keyed]


class SignatureTicker:
    """Notes each new failure signature when its first case reports, with the time it took to
    appear, and lists them in a section of the terminal summary: a line written during the run
    would break pytest's progress line."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.seen: set[tuple] = set()
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        record = user_property(report.user_properties, "scaledmm")
        if not record or record["outcome"] not in oc.FAILURES:
            return
        key = (record["outcome"], record["signature"])
        if key in self.seen:
            return
        self.seen.add(key)

        elapsed = time.monotonic() - self.started

        self.lines.append(printable(f"[scaledmm +{elapsed:.1f}s] new signature: {headline(record)} ({record['id']})"))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.lines:
            terminalreporter.section("scaled-mm signatures, as they appeared")
            for line in self.lines:
                terminalreporter.write_line(line)


def _dist_given(config: pytest.Config) -> bool:
    """Whether the user chose an xdist distribution mode (command line, PYTEST_ADDOPTS, addopts)."""
    args = list(config.invocation_params.args) + shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    args += list(config.getini("addopts"))
    return any(arg in ("--dist", "-d") or arg.startswith("--dist=") for arg in map(str, args))


class LongestFirst:
    """Registered on the xdist controller of a matrix run when no --dist was given."""

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Producer) -> LoadScheduling:
        from .schedule import longest_first_scheduling  # noqa: PLC0415  lazy: only under xdist

        return longest_first_scheduling(config, log)


def schedule_longest_first(config: pytest.Config) -> LongestFirst | None:
    """xdist's default `load` mode hands out chunks of consecutive cases and never takes them
    back, and `worksteal` takes back the cheap end of a queue: with cases of very different cost
    (eager 0.05 s, autotuning 5 s) a worker drawing the last autotuning cases holds the wall while
    the others sit idle. schedule.py hands the costliest case first, one at a time. A --dist the
    user gave wins. The plugin to register, or None."""
    if getattr(config.option, "dist", "no") != "load" or _dist_given(config):
        return None
    try:
        from xdist.scheduler import LoadScheduling  # noqa: F401, PLC0415
    except ImportError:
        return None
    return LongestFirst()


def share_cpu_threads() -> None:
    """On an xdist worker: its share of the CPU threads, read by torch at start-up, here and in any
    child process that runs cases."""

    os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_worker()))
