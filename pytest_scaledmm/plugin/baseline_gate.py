"""--scaledmm-baseline: the gate of `scaledmm gate` at the session's end, its exit status the
session's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..records import Report
from ..reports.gate import run_gate
from ..reports.report import ReportError, load_report
from .options import ALLOW_CAPABILITY_LOSS, ALLOW_LOOSER_SLACK, ALLOW_MISSING, ALLOW_UNCHECKED, ALLOW_WORSE
from .reporter import build_session_report

if TYPE_CHECKING:
    from ..reports.gate import GateResult
    from .session import MatrixSession


def load_baseline(path: str) -> Report:
    try:
        return load_report(path)
    except ReportError as exc:
        raise pytest.UsageError(f"--scaledmm-baseline: {exc}") from None


class GateFailedEntry:
    """A stats entry of the terminal reporter: counted in pytest's last line, and nothing else."""

    count_towards_summary = True
    when = "gate"
    nodeid = ""


class BaselineGate:
    """--scaledmm-baseline REPORT: `scaledmm gate` at session end, same rules. The session's exit
    status is the gate's: 1 when it fails (a case newly fails, the run is incomplete, cases are
    missing, capability lost: printed in the terminal summary), 0 when every failing case failed
    the same way in the baseline. Failures outside the matrix always keep exit status 1."""

    def __init__(self, config: pytest.Config, state: MatrixSession, path: str, baseline: Report) -> None:
        self.config, self.state = config, state
        self.baseline = (Path(path), baseline)
        self.other_failures = 0
        self.result: GateResult | None = None
        self.excused = False  # exit status 1 turned to 0: every failure is an old one

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and "scaledmm" not in dict(report.user_properties):
            self.other_failures += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        # Other exit statuses fail the session already; --collect-only runs nothing to gate. The
        # session's status as it is now: an empty shard's "no tests collected" became OK and is gated.
        if (
            session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
            or self.config.option.collectonly
        ):
            return
        # The same gate as `scaledmm gate`, with the catalogue of the matrix this session ran.
        settings = self.state.settings
        self.result = run_gate(
            self.baseline,
            (self.state.report_path, build_session_report(self.state)),
            spec=self.state.spec,
            allow_missing=settings.allow_missing,
            allow_capability_loss=settings.allow_capability_loss,
            allow_worse=settings.allow_worse,
            allow_looser_slack=settings.allow_looser_slack,
            allow_unchecked=settings.allow_unchecked,
            flags={
                "allow_missing": ALLOW_MISSING.flag,
                "allow_capability_loss": ALLOW_CAPABILITY_LOSS.flag,
                "allow_worse": ALLOW_WORSE.flag,
                "allow_looser_slack": ALLOW_LOOSER_SLACK.flag,
                "allow_unchecked": ALLOW_UNCHECKED.flag,
            },
        )
        if not self.result.passed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif (
            session.exitstatus == pytest.ExitCode.TESTS_FAILED
            and not self.other_failures
            and not self.result.unexplained_failures(self.state.records.values())
        ):
            session.exitstatus = pytest.ExitCode.OK
            self.excused = True

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.result is None:
            return
        if not self.result.passed:
            # pytest's last line counts what is in its stats: "11 passed, 1 baseline gate failed",
            # not "11 passed" on exit 1 with the reason only above it.
            terminalreporter.stats.setdefault("baseline gate failed", []).append(GateFailedEntry())
        terminalreporter.section("scaled-mm baseline gate", red=not self.result.passed, green=self.result.passed)
        for line in self.result.lines():
            terminalreporter.write_line(line)
        if self.excused:
            terminalreporter.write_line("  exit status 0: every failing case failed the same way in the baseline")
