"""The matrix run's reporter: every case's record gathered on the controller, why the run is
incomplete when it is, the report written now and then and at the end, the terminal summary."""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

import pytest

from ..matrix.packs import pack_notes
from ..reports.printable import printable
from ..reports.provenance import repeated_note
from ..reports.report import signature_groups, write_atomic
from ..reports.summary import summary_lines
from ..verdict import outcome as oc
from .items import CaseItem, record_property, user_property
from .settings import writes_report
from .signal_guard import SIGNALS_KEY, TERMINATED, Terminated
from .strict_coverage import not_proven_lines, strict_coverage_failure
from .timeline import PROPERTY as TIMELINE_PROPERTY

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionRepr
    from _pytest.outcomes import Exit

    from ..records import CaseRecord, KnownFailureRecord, Report
    from .session import MatrixSession
    from .settings import Settings


PARTIAL_REPORT_EVERY_S = 30.0


class FailedEarlierEntry:
    """A stats entry of the terminal reporter: a case whose kept (worst) run failed while pytest
    counted only its passing rerun, counted in pytest's last line."""

    count_towards_summary = True
    when = "session"
    nodeid = ""


class MatrixReporter:
    """Registered only for a matrix run; on the controller it gathers every case's record,
    including those xdist workers send in their reports' user_properties, and tells whether the
    run was complete. While cases run, SIGTERM ends the session like Ctrl-C, and both are noted so
    that a kernel swallowing the exception cannot hide them."""

    def __init__(self, config: pytest.Config, state: MatrixSession) -> None:
        self.config = config
        self.state = state
        self._last_write = time.monotonic()
        self.deselected = 0
        self.write_error: str | None = None  # why the last report write failed
        self.session: pytest.Session | None = None
        self.written_at_end = False  # the session's end wrote the report (or tried to)
        self.seen_at_write: str | None = None  # the signal noted when it was last written
        self._run_recorded: set[str] = set()  # items whose current run's record was taken
        self._failed_ids: set[str] = set()  # cases of which pytest counted a failed report
        self.failed_earlier: list[str] = []  # cases failing by an earlier run that pytest did not count
        self.coverage_failure: str | None = None  # why --scaledmm-strict-coverage fails the run

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is not None:
            guard.attach(self.state)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
        # The cases are generated while collecting: a signal there ends the run after it.
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is not None:
            guard.deferred = True
        try:
            return (yield)
        finally:
            if guard is not None:
                guard.arm(deferred=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        # After the last case the session is ending: a signal is noted (sessionfinish writes the
        # report with it and exits 2), never raised into pytest's or a plugin's teardown.
        try:
            return (yield)
        finally:
            guard = self.config.stash.get(SIGNALS_KEY, None)
            if guard is not None:
                guard.deferred = True

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self.deselected += sum(1 for item in items if isinstance(item, CaseItem))

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[KeyboardInterrupt | Exit]) -> None:
        value = excinfo.value
        if isinstance(value, Terminated):
            reason = TERMINATED
        elif isinstance(value, pytest.exit.Exception):
            reason = f"stopped by pytest.exit: {value.msg}"
        else:
            reason = f"interrupted ({type(value).__name__})"
        self.state.interrupted(reason)

    def pytest_internalerror(self, excrepr: ExceptionRepr, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        message = str(excinfo.value).strip().splitlines()
        self.state.interrupted(
            f"pytest internal error: {excinfo.typename}: {message[0] if message else ''}".rstrip(": ")
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        # Every run of a case item (a rerun plugin runs one again) begins without the record of
        # its run before: each run's reports carry its own, and the safety net sees a run without one.
        if isinstance(item, CaseItem):
            item.user_properties[:] = [(name, value) for name, value in item.user_properties if name != "scaledmm"]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = record_property(report.user_properties)
        if report.when == "setup":  # a run of the item begins (a rerun begins another)
            self._run_recorded.discard(report.nodeid)
        if record is not None and report.failed:
            self._failed_ids.add(record["id"])
        # The teardown report carries the record its run's setup or call gave, taken already.
        if record is None or (report.when == "teardown" and report.nodeid in self._run_recorded):
            return
        self._run_recorded.add(report.nodeid)
        self.state.add_record(record, user_property(report.user_properties, "scaledmm_env"))
        self.state.add_timeline(user_property(report.user_properties, TIMELINE_PROPERTY))
        if not self.state.settings.worker and time.monotonic() - self._last_write > PARTIAL_REPORT_EVERY_S:
            self._write()

    def _write(self) -> None:
        # A partial report now and then: a run killed by a CI time limit still leaves its results.
        try:
            write_atomic(self.state.report_path, build_session_report(self.state))
            self.write_error = None
        except OSError as exc:  # one line at the end of the session, not a traceback per write
            self.write_error = f"--scaledmm-report: cannot write {self.state.report_path}: {exc.strerror or exc}"
        self._last_write = time.monotonic()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        if self.state.settings.worker:
            return
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is not None:
            guard.deferred = True  # the report is being written: a signal now is noted, not raised
        seen = guard.seen if guard is not None else None
        try:
            self._finish(session, exitstatus)
            # Even with no record: an older report at this path must not stand in for this run.
            if writes_report(self.config, self.state.settings):
                self._write()
                if guard is not None and guard.seen != seen:
                    self._write()  # a signal came while it was written: the report says so
                if self.write_error:  # the results are lost: the session never exits 0
                    session.exitstatus = pytest.ExitCode.USAGE_ERROR
        finally:
            self.written_at_end = True
            self.seen_at_write = guard.seen if guard is not None else None
        self._interrupted_after_all(session)

    def _interrupted_after_all(self, session: pytest.Session) -> None:
        """A signal noted, not raised (after the last case): the session still ends as
        interrupted, its report rewritten when the signal came after it was written."""
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is None or guard.seen is None or self.write_error:
            return
        if guard.seen != self.seen_at_write and writes_report(self.config, self.state.settings):
            self.seen_at_write = guard.seen
            self._write()
        session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _finish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        """What the final report needs to say why it is incomplete (session.incomplete_reasons)."""
        state = self.state
        causes = []
        selection = selection_options(self.config, state.settings)
        if self.deselected:
            causes.append(
                f"{self.deselected} case(s) deselected" + (f" by {', '.join(selection)}" if selection else "")
            )
        elif selection:
            causes.append(f"a subset was selected: {', '.join(selection)}")
        for stop in dict.fromkeys((session.shouldfail, session.shouldstop)):
            if stop:
                causes.append(f"stopped early: {stop}")
        state.finish(causes)
        # A case whose worst run failed fails the session, as it fails the report, also when
        # pytest counted only a passing rerun of it (a rerun plugin).
        strict = state.settings.strict_errors
        self.failed_earlier = [
            record["id"]
            for record in state.repeated()
            if record["id"] not in self._failed_ids and _fails(record["outcome"], strict)
        ]
        if self.failed_earlier and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = exitstatus = pytest.ExitCode.TESTS_FAILED
        if int(exitstatus) == pytest.ExitCode.NO_TESTS_COLLECTED and not causes and state.empty_shard() is not None:
            # Its slice is empty and it ran all of it: complete, and no failed CI job to merge around.
            session.exitstatus = exitstatus = pytest.ExitCode.OK
        generation = state.matrix_block()["generation"]
        self.coverage_failure = strict_coverage_failure(generation) if state.settings.strict_coverage else None
        if self.coverage_failure and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = exitstatus = pytest.ExitCode.TESTS_FAILED
        if int(exitstatus) not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not state.interruptions:
            try:
                name = f" ({pytest.ExitCode(exitstatus).name})"
            except ValueError:
                name = ""
            state.interrupted(f"session exit status {int(exitstatus)}{name}")

    def _restore_signal_handlers(self) -> None:
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is not None:
            guard.restore()

    @pytest.hookimpl(tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # Signals stay noted until here: the other plugins' teardown and the terminal summary
        # ran after the report was written, and a signal then must not be a traceback.
        if self.session is not None and not self.state.settings.worker and self.written_at_end:
            self._interrupted_after_all(self.session)
        self._restore_signal_handlers()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: pytest.ExitCode, config: pytest.Config
    ) -> Generator[None, None, None]:
        # Around pytest's own summary, whose short test summary closes it: the root causes, the
        # answer a user runs for, come last, right above pytest's final line.
        try:
            return (yield)
        finally:
            self._summary(terminalreporter, config)

    def _summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        if not writes_report(config, self.state.settings) or not self.state.finished:
            return
        if self.write_error:
            terminalreporter.write_line(f"ERROR: {self.write_error}", red=True)
        if self.failed_earlier:  # pytest's last line counts them: "1 passed, 1 failed on an earlier run"
            terminalreporter.stats.setdefault("failed on an earlier run", []).extend(
                FailedEarlierEntry() for _ in self.failed_earlier
            )
        terminalreporter.section("scaled-mm matrix")
        lines = summary_lines(self.state, signature_groups(self.state.records.values()))
        lines[1:1] = self.state.coverage_lines()  # what was really tested, under the headline
        # What a kernel library's import held back (its C extensions that do not load here), in one line.
        ran = {str((record.get("params") or {}).get("kernel")) for record in self.state.records.values()}
        lines[1:1] = [f"note: {note}" for note in pack_notes(ran)]
        repeated = repeated_note(self.state.records.values())
        if repeated:
            lines.insert(1, f"note: {repeated}")
        # What a kernel's declaration left untested (matrix/cases.py), right under it.
        generation = self.state.matrix_block()["generation"]
        lines[1:1] = [f"warning: {w}" for w in generation.get("warnings", [])]
        lines[1:1] = not_proven_lines(generation)
        if self.coverage_failure:
            lines.insert(1, f"FAILED {self.coverage_failure}")
        total, shard = self.state.empty_shard(), self.state.settings.shard
        if total and shard is not None:
            index, count = shard
            lines.insert(
                1,
                f"shard {index}/{count} holds none of the matrix's {total} case(s) (more shards than cases):"
                " its empty report merges with the others",
            )
        if self.write_error:  # no report was written: do not point at one
            lines = [line for line in lines if not line.startswith("report: ")]
        for line in lines:
            terminalreporter.write_line(printable(line))  # record text (signatures, ids) is data


def _fails(outcome: str, strict_errors: bool) -> bool:
    """Whether a record of this class fails the session (a class this version does not know does)."""
    known = oc.outcome_class(outcome)
    return known is None or known.fails_when(strict_errors)


def selection_options(config: pytest.Config, settings: Settings) -> list[str]:
    """The options given that run a subset of the collected cases."""
    option = config.option
    found = []
    if option.keyword:
        found.append(f"-k {option.keyword!r}")
    if option.markexpr:
        found.append(f"-m {option.markexpr!r}")
    if option.deselect:
        found.append("--deselect")
    if settings.cases:
        found.append("--scaledmm-case")
    if getattr(option, "lf", False):  # the cacheprovider plugin's, absent under -p no:cacheprovider
        found.append("--last-failed")
    if any("::" in str(arg) for arg in config.args):
        found.append("node ids on the command line")
    return found


def build_session_report(state: MatrixSession) -> Report:
    """The session's report with how strict it was: the gate judges strict-only failures by the
    candidate's session.strict_errors."""
    report = state.build_report()
    report["session"]["strict_errors"] = state.settings.strict_errors
    return report


def fixed_upstream_summary(terminalreporter: pytest.TerminalReporter, state: MatrixSession) -> None:
    """The known failures whose cases pass now: each entry once, to be retired."""
    fixed = [r for r in state.records.values() if r.get("outcome") == oc.FIXED_UPSTREAM]
    if not fixed:
        return
    terminalreporter.section("scaled-mm known failures fixed upstream", yellow=True)
    entries: dict[int, list[tuple[CaseRecord, KnownFailureRecord]]] = {}
    for record in fixed:
        known = record.get("known_failure")
        index = known.get("entry") if known else None
        if known and index is not None:
            entries.setdefault(index, []).append((record, known))
    for index, found in sorted(entries.items()):
        first, entry = found[0]
        link = f" {entry['link']}" if entry.get("link") else ""
        terminalreporter.write_line(
            printable(
                f"known_failures[{index}] ({entry.get('signature')}){link}: {len(found)} case(s) pass now,"
                " retire the entry"
                f" (e.g. {first['id']})"
            )
        )
