"""What a matrix run leaves for CI besides its report, on the controller, once the report is
written: the Markdown summary appended to `$GITHUB_STEP_SUMMARY` (reports/step_summary.py) and,
with --scaledmm-keep N, old reports pruned from the default report directory
(reports/report_dir.py). Neither changes the run's exit status: a failure is one warning line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..reports.compare import compare_reports
from ..reports.declaration_hints import hint_markdown
from ..reports.printable import printable
from ..reports.render import md_code, md_escape, render_markdown
from ..reports.report_dir import default_report_dir, prune_reports, report_series
from ..reports.step_summary import append_step_summary, step_summary_path

if TYPE_CHECKING:
    from ..records import Report
    from .session import MatrixSession


class RunOutputs:
    def __init__(
        self, config: pytest.Config, state: MatrixSession, build_report: Callable[[MatrixSession], Report]
    ) -> None:
        self.config = config
        self.state = state
        self.build_report = build_report  # the session's report as written (entry.build_session_report)
        self.done = False

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:

        for line in self._emit():
            terminalreporter.write_line(printable(line), yellow=line.startswith("warning"))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for line in self._emit():  # no terminal reporter (-p no:terminal): still done, said on stderr
            print(line, file=sys.stderr)

    def _emit(self) -> list[str]:
        if self.done or not self.state.finished:
            return []
        self.done = True
        reporter = self.config.pluginmanager.get_plugin("scaledmm-reporter")
        if reporter is not None and reporter.write_error:
            return []  # no report: nothing to summarise, nothing newer to keep
        lines = []
        warning = self._step_summary()
        if warning:
            lines.append(warning)
        if self.state.settings.keep:
            lines += self._prune(self.state.settings.keep)
        return lines

    def _step_summary(self) -> str | None:

        if step_summary_path() is None:
            return None
        return append_step_summary(self.markdown())

    def markdown(self) -> str:

        state = self.state
        report = self.build_report(state)
        text = render_markdown(compare_reports([(state.report_path, report)]), str(state.spec.path))
        shard = state.settings.shard
        head = f"report {md_code(state.report_path)}" + (f", shard {shard[0]}/{shard[1]}" if shard else "")
        text += f"\n\n{head}\n"
        hints = hint_markdown(state.records.values())
        if hints:  # what the user pastes to make torch's own refusals UNSUPPORTED
            text += f"\n{hints}\n"
        gate = self.config.pluginmanager.get_plugin("scaledmm-baseline-gate")
        if gate is not None and gate.result is not None:
            lines = gate.result.lines()
            text += (
                "\n".join(
                    ["", f"**{md_escape(lines[0])}**", ""] + [f"- {md_escape(line.strip())}" for line in lines[1:]]
                )
                + "\n"
            )
        return text

    def _prune(self, keep: int) -> list[str]:

        settings = self.state.settings
        directory = default_report_dir(self.state.spec.path, getattr(self.config.option, "rootdir", None))
        protected = [settings.report] + ([Path(settings.baseline)] if settings.baseline else [])
        # Only earlier runs of this matrix, profile and shard: the project's other jobs keep theirs.
        series = report_series(self.build_report(self.state))
        removed, problems = prune_reports(directory, keep, protected, series)
        lines = []
        if removed:
            lines.append(f"--scaledmm-keep {settings.keep}: removed {len(removed)} older report(s) from {directory}")
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            lines.append(f"warning: --scaledmm-keep: {problems[0]}{more}")
        return lines
