"""Getting to the first failure fast: likely-failing cases first, each new signature noted with
the time it appeared; CPU threads shared out between xdist workers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ..execution.device import threads_per_worker
from ..execution.triage import headline
from ..matrix.compile_modes import inductor_modes
from ..matrix.schema import SCALE_RANK
from ..reports.printable import printable
from ..verdict import outcome as oc
from ..verdict.case_axes import CaseParams
from .items import user_property
from .schedule import newest_finished_report


def likelihood(params: CaseParams) -> int:
    """A prior on failing: mixed scale ranks under Inductor first, then any Inductor mode."""
    inductor = params.mode in inductor_modes()
    mixed = SCALE_RANK.get(params.scale_a) != SCALE_RANK.get(params.scale_b)
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


def share_cpu_threads() -> None:
    """On an xdist worker: its share of the CPU threads, read by torch at start-up, here and in any
    child process that runs cases."""

    os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_worker()))
