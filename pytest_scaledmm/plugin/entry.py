"""pytest hooks: options, collection of the matrix file, per-case items, summary and report.

Inert unless --scaledmm-matrix is given: no collection, no report, no torch import. With it,
pytest_configure reads the options once (settings.py), builds the MatrixSession and registers
every plugin object of the run, here and nowhere else.

Every case item ends as exactly one record (a harness failure or a setup error is a
HARNESS_ERROR record, a skip before the case ran a SKIPPED one), and the report says whether the
run was complete: the controller counts the generated cases itself and names what cut the run
short (a subset, -x, Ctrl-C, SIGTERM, an internal error, an unusual exit status).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..verdict import outcome as oc
from .options import ALLOW_CAPABILITY_LOSS, ALLOW_LOOSER_SLACK, ALLOW_MISSING, ALLOW_WORSE, add_pytest_options

if TYPE_CHECKING:
    from ..records import Report
    from ..reports.report import ReportLock
    from .session import MatrixSession

STATE_KEY: pytest.StashKey[MatrixSession] = pytest.StashKey()
LOCK_KEY: pytest.StashKey[ReportLock] = pytest.StashKey()
PARTIAL_REPORT_EVERY_S = 30.0
TERMINATED = "terminated (SIGTERM)"


class Terminated(KeyboardInterrupt):
    """SIGTERM during a matrix run: it ends the session as Ctrl-C does, so that the report is
    written and says why it is incomplete."""


def pytest_addhooks(pluginmanager):
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser):
    add_pytest_options(parser.getgroup("scaledmm", "scaled-mm compatibility matrix"), parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # A conftest that declares kernels imports torch: import it first, without its import noise.
    if getattr(early_config.known_args_namespace, "scaledmm_matrix", None) is not None:
        import os

        from ..execution.quiet import import_torch

        if "PYTEST_XDIST_WORKER" not in os.environ and SIGNALS_KEY not in early_config.stash:
            # From here, not from the session's start: a signal during torch's import or the
            # conftests is noted and ends the run in pytest_configure, inside pytest's session.
            guard = SignalGuard(deferred=True)
            early_config.stash[SIGNALS_KEY] = guard
            guard.install()
        import_torch()


def _state(config):
    return config.stash.get(STATE_KEY, None)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    from .settings import Settings

    guard = config.stash.get(SIGNALS_KEY, None)
    try:
        settings = Settings.from_config(config)
    except BaseException as exc:
        if guard is not None:
            guard.restore()
        if isinstance(exc, pytest.UsageError):
            _abandon_requested_report(config, exc)
        raise
    if guard is not None and (settings is None or settings.worker):
        guard.restore()
    if settings is None:
        from .sources import not_run_hint_plugin

        hint = not_run_hint_plugin(config)  # options given without --scaledmm-matrix: say so
        if hint is not None:
            config.pluginmanager.register(hint, "scaledmm-not-run-hint")
        return
    config.addinivalue_line("markers", "scaledmm: a case of the scaled-mm compatibility matrix")
    if not settings.worker:
        if guard is None:  # not through pytest_load_initial_conftests (a plugin given in-process)
            guard = SignalGuard(deferred=True)
            config.stash[SIGNALS_KEY] = guard
            guard.install()
        try:
            guard.arm()
            _configure_matrix_run(config, settings)
            guard.arm()
        except KeyboardInterrupt:
            guard.restore()
            if _writes_report(config, settings):
                from ..reports.report import abandon_report, start_report

                reason = f"{guard.reason(guard.seen or 'SIGINT')} before any case ran"
                try:  # claimed already (this run holds the lock): its stub says why it stopped
                    start_report(settings.report, reason) if LOCK_KEY in config.stash else abandon_report(
                        settings.report, reason
                    )
                except OSError:
                    pass
            import sys

            print(f"scaledmm: {guard.reason(guard.seen or 'SIGINT')} before any case ran", file=sys.stderr)
            raise
        except BaseException:
            guard.restore()
            raise
        return
    _configure_matrix_run(config, settings)


def _warn_other_torch(recorded: dict) -> None:
    """A replay under another torch than the one that recorded the case: one line on stderr (its
    outcome may differ for that reason alone)."""
    import sys

    import torch

    if recorded["torch"] == torch.__version__:
        return
    where = f" (tox env {recorded['tox']})" if recorded.get("tox") else ""
    print(
        f"scaledmm: warning: the case was recorded under torch {recorded['torch']}{where}; this is torch"
        f" {torch.__version__}: its outcome may differ for that reason alone",
        file=sys.stderr,
    )


def _configure_matrix_run(config, settings) -> None:
    from ..matrix.errors import MatrixError
    from ..matrix.known_failures import check_entries
    from ..matrix.spec import load_spec
    from .declared import declared_kernels
    from .session import MatrixSession

    # The baseline before the claim: it may be the report this run replaces.
    baseline = _load_baseline(settings.baseline) if settings.baseline and not settings.worker else None
    # Claimed before the matrix is read: a run refused from here on leaves an unfinished report.
    if _writes_report(config, settings):
        _claim_report_path(config, settings.report)
    from ..execution.quiet import import_torch
    from ..matrix.kernels import add_import_dirs

    import_torch()  # before a user kernel module imports it: without torch's import-time noise
    if settings.recorded_on and not settings.worker:
        _warn_other_torch(settings.recorded_on)
    import_dirs = [str(d) for d in dict.fromkeys([settings.matrix.parent, Path(config.rootpath)])]
    add_import_dirs(import_dirs)  # kernels import like tests
    try:
        spec = load_spec(settings.matrix, declared_kernels=declared_kernels(config))
        check_entries(spec.path, spec.known_failures)
        state = MatrixSession(spec, settings)
        state.import_dirs = tuple(import_dirs)  # repro scripts import the kernels from there too
    except MatrixError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[STATE_KEY] = state
    if not settings.reuse_cache and not settings.worker:
        state.use_fresh_cache()  # before Inductor's import, which fixes where headers are precompiled
    state.share_triage_claims()  # before xdist starts the workers, which inherit where
    if not settings.isolate and state.compiles_with_inductor():
        import_torch(inductor=True)  # cases run here: Inductor's import noise would land in the first
    if settings.cases:
        from .options import CASE
        from .reproduce import check_case_ids
        from .sources import resolve_options

        check_case_ids(state, settings.cases, resolve_options(config).label(CASE))
    named = matrix_node_ids(config, spec.path) if settings.explore is None else []
    if named:  # as --scaledmm-case does: the profile that has the case, or the closest ids
        from .reproduce import check_case_ids

        check_case_ids(state, named, "node id")
    _register_plugins(config, state, baseline)
    from .speed import longest_first, share_cpu_threads

    if settings.worker:
        share_cpu_threads()
    else:
        scheduler = longest_first(config)
        if scheduler is not None:
            config.pluginmanager.register(scheduler, "scaledmm-longest-first")
    _collect_only_the_matrix(config, spec.path)


def _register_plugins(config, state, baseline) -> None:
    """Every plugin object of a matrix run, in this order (pluggy calls later ones first)."""
    from .reproduce import ReproducePlugin
    from .schedule import CostOrder
    from .speed import FirstFailureOrder, SignatureTicker

    settings = state.settings
    manager = config.pluginmanager
    manager.register(MatrixReporter(config, state), "scaledmm-reporter")
    manager.register(ReproducePlugin(state), "scaledmm-reproduce")
    if baseline is not None:
        manager.register(BaselineGate(config, state, settings.baseline, baseline), "scaledmm-baseline-gate")
    # Under xdist the workers collect, so they order; they read the same file, so they agree.
    # Registered later, called earlier: cost orders first, a first-failure order sorts after it.
    if settings.first_failure:
        manager.register(FirstFailureOrder(state.report_path.parent, str(state.spec.path)), "scaledmm-first-failure")
    manager.register(CostOrder(state.report_path.parent, str(state.spec.path)), "scaledmm-cost-order")
    if not settings.worker:
        manager.register(SignatureTicker(config), "scaledmm-ticker")
        from .run_outputs import RunOutputs

        manager.register(RunOutputs(config, state, build_session_report), "scaledmm-run-outputs")
        if getattr(config.option, "xmlpath", None):
            from .junit import JunitProperties

            manager.register(JunitProperties(state), "scaledmm-junit")


def _writes_report(config, settings) -> bool:
    option = config.option
    return not (settings.worker or option.collectonly or option.help)


def _abandon_requested_report(config, error) -> None:
    """A usage error before the report path is claimed: an earlier report at the path asked for
    must not pass for this run (reports/report.py, abandon_report)."""
    from ..reports.report import abandon_report
    from .settings import is_worker, requested_report

    option = config.option
    if not (is_worker(config) or option.collectonly or option.help):
        abandon_report(requested_report(config), f"stopped by a usage error before any case ran: {error}")


# pytest's own outputs (option dest -> flag): a report at one of their paths would be overwritten.
_PYTEST_OUTPUTS = {"xmlpath": "--junitxml", "reportlog": "--report-log", "debug": "--debug", "resultlog": "--resultlog"}


def _output_clash(config, path: Path) -> str | None:
    """The flag of a pytest output written to the report path, or None."""
    from ..reports.step_summary import same_file

    for dest, flag in _PYTEST_OUTPUTS.items():
        value = getattr(config.option, dest, None)
        if isinstance(value, str) and value and same_file(Path(config.invocation_params.dir, value), path):
            return flag
    return None


def _claim_report_path(config, path: Path) -> None:
    """Before any case runs: the report can be written there, no other live run writes it, and
    an earlier report there moves aside for an unfinished one (reports/report.py, start_report)."""
    from ..reports.report import ReportLock, ReportLocked, check_writable, start_report

    clash = _output_clash(config, path)
    if clash:
        raise pytest.UsageError(
            f"--scaledmm-report: {path} is also {clash}'s file: one of them would overwrite the other"
        )
    try:
        check_writable(path)
    except OSError as exc:
        raise pytest.UsageError(f"--scaledmm-report: cannot write {path}: {exc.strerror or exc}") from None
    lock = ReportLock(path)
    try:
        lock.acquire()
    except ReportLocked as exc:
        raise pytest.UsageError(f"--scaledmm-report: {path} {exc}") from None
    except OSError as exc:
        raise pytest.UsageError(f"--scaledmm-report: cannot lock {path}: {exc.strerror or exc}") from None
    config.stash[LOCK_KEY] = lock
    if lock.taken_over:
        import sys

        print(f"scaledmm: warning: --scaledmm-report: {lock.taken_over}", file=sys.stderr)
    from ..reports.report_path import ClaimRefused

    try:
        start_report(path)
    except ClaimRefused as exc:
        raise pytest.UsageError(f"--scaledmm-report: {exc}") from None
    except OSError as exc:
        raise pytest.UsageError(f"--scaledmm-report: cannot write {path}: {exc.strerror or exc}") from None


def pytest_sessionstart(session):
    # After every plugin's and conftest's pytest_configure: the child inherits the environment
    # they set, as a restarted child would; before collection, which its start-up overlaps.
    state = _state(session.config)
    if state is not None and _runs_cases_here(session.config, state.settings):
        state.prestart_child()


def pytest_collection_finish(session):
    state = _state(session.config)
    if state is not None and _runs_cases_here(session.config, state.settings) and session.items:
        state.start_runner()


def _runs_cases_here(config, settings) -> bool:
    """False for an xdist controller (its workers run the cases), --collect-only and --help."""
    option = config.option
    if option.collectonly or option.help:
        return False
    # xdist distributes only with a --dist mode and somewhere to send cases (-n or --tx);
    # without xdist installed these options do not exist.
    distributing = getattr(option, "dist", "no") != "no" and bool(getattr(option, "tx", None))
    return settings.worker or not distributing


def _collect_only_the_matrix(config, matrix_path: Path) -> None:
    """`pytest --scaledmm-matrix` runs the matrix, not the project's testpaths; explicit paths
    given on the command line are kept and the matrix is added to them, unless one of them names
    it already: a node id in it (`m.yaml::CASE`) runs only that case."""
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        if not matrix_node_ids(config, matrix_path) and not any(
            _names(config, arg, matrix_path) for arg in config.args
        ):
            config.args.append(str(matrix_path))
    else:
        config.args[:] = [str(matrix_path)]


def _names(config, arg, path: Path) -> bool:
    """Whether a path argument (or the file of a node id) is `path`."""
    try:
        return Path(config.invocation_params.dir, str(arg).split("::", 1)[0]).resolve() == path
    except (OSError, RuntimeError):  # a link loop: not the matrix
        return False


def matrix_node_ids(config, matrix_path: Path) -> list[str]:
    """The case ids the command line's node ids in the matrix file name (`m.yaml::CASE`)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    return [str(arg).split("::")[1] for arg in config.args if "::" in str(arg) and _names(config, arg, matrix_path)]


def pytest_unconfigure(config):
    state = _state(config)
    if state is not None:
        state.close()  # the child process first: it may still use the cache
        state.drop_triage_claims()
        state.drop_owned_cache()
    lock = config.stash.get(LOCK_KEY, None)
    if lock is not None:
        lock.release()


def pytest_collect_file(file_path, parent):
    state = _state(parent.config)
    if state is not None and file_path == state.spec.path:
        return MatrixFile.from_parent(parent, path=file_path)
    return None


class MatrixFile(pytest.File):
    def collect(self):
        state = _state(self.config)
        if state.settings.explore is not None:
            from .explore import explore_items

            yield from explore_items(self, state)
            return
        for case in state.cases():
            yield CaseItem.from_parent(self, name=case.id, case=case, state=state)


class CaseFailure(Exception):
    def __init__(self, record: dict):
        super().__init__(record["signature"])
        self.record = record


class CaseItem(pytest.Item):
    def __init__(self, *, case, state, **kwargs):
        super().__init__(**kwargs)
        self.case = case
        self.state = state
        self.add_marker("scaledmm")

    def runtest(self):
        state = self.state
        start = time.perf_counter()
        try:
            environment = state.environment_to_send()
            if environment is not None:
                self.user_properties.append(("scaledmm_env", environment))
            result = state.run(self.case)
            # The case's whole time in this process: what the parts above do not hold is harness.
            result.timing["case_s"] = round(time.perf_counter() - start, 6)
            result.observations.device = state.context().device  # which GPU, under xdist
            record = state.apply_known_failures(state.record(self.case, result))
        except Exception as exc:  # the harness, not the case: still a record of this case
            record = state.harness_error_record(self.case, exc)
            self.user_properties.append(("scaledmm", record))
            raise CaseFailure(record) from exc
        self.user_properties.append(("scaledmm", record))
        # A signal that arrived while the kernel ran in this process, and that the kernel or the
        # runner swallowed, still ends the session (this case's record goes with it).
        if state.signalled == "SIGTERM":
            raise Terminated()
        if state.signalled == "SIGINT":
            raise KeyboardInterrupt()
        known = oc.outcome_class(record["outcome"])
        status = known.pytest_status if known is not None else "failed"  # an unknown class fails
        if known is not None and known.fails and not known.fails_when(state.settings.strict_errors):
            return  # tolerated: it passes, and the terminal shows it apart (pytest_report_teststatus)
        if status == "xfailed":
            pytest.xfail(f"{record['detail']}: {record['signature']}")
        if status == "skipped":
            # A refusal says which; a case not applicable here says why.
            pytest.skip(f"{record['outcome']}: {record['signature']}" if record.get("signature") else record["detail"])
        if status == "failed":
            raise CaseFailure(record)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailure):
            from ..reports.printable import printable

            text = format_failure(excinfo.value.record, self.state.replay_command(self.case.id))
            return "\n".join(printable(line) for line in text.splitlines())  # the kernel's text is data
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"scaledmm {self.case.id}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """The safety net: a case item that ends a phase without its record (a setup error, a skip
    before the case ran, anything that bypassed runtest) gets one here."""
    report = yield
    if isinstance(item, CaseItem) and not any(name == "scaledmm" for name, _ in item.user_properties):
        record = _missing_record(item, call, report)
        if record is not None:
            item.user_properties.append(("scaledmm", record))
            report.user_properties.append(("scaledmm", record))
    return report


def _missing_record(item, call, report):
    state = item.state
    if report.when == "setup" and report.passed:
        return None  # the call phase records the case
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return state.record(item.case, oc.Outcome(oc.SKIPPED, None, None, f"skipped before it ran: {reason}"))
    if call.excinfo is not None:
        return state.harness_error_record(item.case, call.excinfo.value, report.when)
    record = state.harness_error_record(
        item.case, f"the {report.when} phase ended without a record of the case", report.when
    )
    if report.passed:  # a case without a verdict never passes
        report.outcome = "failed"
        report.longrepr = record["detail"]
    return record


def format_failure(record: dict, replay: str | None = None) -> str:
    from ..execution.triage import headline
    from ..matrix.case_params import ordered_params

    lines = [headline(record)]
    if record.get("layer"):
        lines.append(f"layer: {record['layer']}")
    if record.get("detail"):
        lines.append(f"detail: {record['detail']}")
    params = ", ".join(f"{k}={v}" for k, v in ordered_params(record["params"]).items())
    lines.append(f"params: {params}")
    for side in ("eager_error", "compiled_error"):
        error = record.get(side)
        if error:
            first = error["message"].splitlines()[0] if error["message"] else ""
            lines.append(f"{side.split('_')[0]} raised {error['type']}: {first}")
            if isinstance(error.get("source"), str) and error["source"]:
                lines.append(f"  in user code: {error['source']}")
    if replay:
        lines.append(f"replay: {replay}")
    return "\n".join(lines)


ENDING_GRACE_S = 5.0  # how long after a session a signal ended a further SIGINT is ignored
SIGNALS_KEY = pytest.StashKey["SignalGuard"]()


class SignalGuard:
    """SIGINT and SIGTERM from the start of a matrix run to its end. The first ends the session
    as Ctrl-C does (SIGTERM as Terminated); any later one, whatever the moment (a CI cancel or
    `timeout -s INT` sends one to pytest, then one to its process group), is noted and never
    raised into the ending session, so that the run ends with exit 2, its report incomplete and
    "interrupted", not with a traceback per signal. Both are noted so that a kernel swallowing
    the exception cannot hide them."""

    def __init__(self, deferred: bool = False):
        self.old: dict = {}
        self.seen: str | None = None  # the signal that ends the session; SIGTERM wins
        self.state = None
        self.deferred = deferred  # before pytest's session: noted only, raised by `arm`

    def install(self) -> None:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for name in ("SIGTERM", "SIGINT"):
            number = getattr(signal, name, None)
            if number is not None:
                self.old[number] = signal.signal(number, self.handle)

    @staticmethod
    def reason(name: str) -> str:
        return TERMINATED if name == "SIGTERM" else "interrupted (SIGINT)"

    def handle(self, signum, frame):
        import signal

        name = signal.Signals(signum).name
        old = self.old.get(signum)
        if name == "SIGINT" and old == signal.SIG_IGN:
            return None
        first = self.seen is None
        if name == "SIGTERM" or first:
            self.seen = name
        if self.state is not None:
            self.state.note_signal(name)
            self.state.interrupted(self.reason(name))
        if not first or self.deferred:
            return None
        if name == "SIGTERM":
            raise Terminated()
        if callable(old) and old is not signal.default_int_handler:
            return old(signum, frame)
        raise KeyboardInterrupt()

    def arm(self, deferred: bool | None = None) -> None:
        """At a safe point of pytest's session (a hook of this plugin, not inside torch's
        import or the generation's drawing, where pytest cannot show the traceback): a signal
        noted before ends the run now. `deferred` False: later ones are raised where they land."""
        if deferred is not None:
            self.deferred = deferred
        if self.seen == "SIGTERM":
            raise Terminated()
        if self.seen is not None:
            raise KeyboardInterrupt()

    def attach(self, state) -> None:
        """From here on signals are noted in `state`, one that came before too."""
        self.state = state
        if self.seen is not None:
            state.note_signal(self.seen)
            state.interrupted(self.reason(self.seen))

    def restore(self) -> None:
        import signal

        ending = self.seen is not None and self.old
        for number, old in self.old.items():
            old = old if old is not None else signal.SIG_DFL
            if ending and old in (signal.default_int_handler, signal.SIG_DFL):
                # The session ended on a signal: one more in the last moments of the process
                # would be a traceback or a kill after the report; it has nothing left to stop.
                old = _ending_handler(old, time.monotonic() + ENDING_GRACE_S)
            signal.signal(number, old)
        self.old = {}
        if ending:
            import atexit

            atexit.register(_ignore_signals_at_exit)


def _ending_handler(old, deadline: float):
    """A signal just after a session that a signal ended: the process is exiting, nothing is
    left to interrupt. After the grace (in-process, as under pytester) it acts as `old` did."""
    import os
    import signal

    def handler(signum, frame):
        if time.monotonic() < deadline:
            return
        if old is signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        else:
            old(signum, frame)

    return handler


def _ignore_signals_at_exit() -> None:
    # The interpreter drops Python handlers as it finalises: a signal then would kill it.
    import signal

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)


class MatrixReporter:
    """Registered only for a matrix run; on the controller it gathers every case's record,
    including those xdist workers send in their reports' user_properties, and tells whether the
    run was complete. While cases run, SIGTERM ends the session like Ctrl-C, and both are noted so
    that a kernel swallowing the exception cannot hide them."""

    def __init__(self, config, state):
        self.config = config
        self.state = state
        self._last_write = time.monotonic()
        self.deselected = 0
        self.write_error = None  # why the last report write failed

    def pytest_sessionstart(self, session):
        self.session = session
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is not None:
            guard.attach(self.state)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session):
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
    def pytest_runtestloop(self, session):
        # After the last case the session is ending: a signal is noted (sessionfinish writes the
        # report with it and exits 2), never raised into pytest's or a plugin's teardown.
        try:
            return (yield)
        finally:
            guard = self.config.stash.get(SIGNALS_KEY, None)
            if guard is not None:
                guard.deferred = True

    def pytest_deselected(self, items):
        self.deselected += sum(1 for item in items if isinstance(item, CaseItem))

    def pytest_keyboard_interrupt(self, excinfo):
        value = excinfo.value
        if isinstance(value, Terminated):
            reason = TERMINATED
        elif isinstance(value, pytest.exit.Exception):
            reason = f"stopped by pytest.exit: {value.msg}"
        else:
            reason = f"interrupted ({type(value).__name__})"
        self.state.interrupted(reason)

    def pytest_internalerror(self, excrepr, excinfo):
        message = str(excinfo.value).strip().splitlines()
        self.state.interrupted(
            f"pytest internal error: {excinfo.typename}: {message[0] if message else ''}".rstrip(": ")
        )

    def pytest_runtest_logreport(self, report):
        properties = dict(report.user_properties)
        record = properties.get("scaledmm")
        # Setup and teardown reports carry a record only when the call phase gave none.
        if record is None or (report.when != "call" and record["id"] in self.state.records):
            return
        self.state.add_record(record, properties.get("scaledmm_env"))
        if not self.state.settings.worker and time.monotonic() - self._last_write > PARTIAL_REPORT_EVERY_S:
            self._write()

    def _write(self) -> None:
        # A partial report now and then: a run killed by a CI time limit still leaves its results.
        from ..reports.report import write_atomic

        try:
            write_atomic(self.state.report_path, build_session_report(self.state))
            self.write_error = None
        except OSError as exc:  # one line at the end of the session, not a traceback per write
            self.write_error = f"--scaledmm-report: cannot write {self.state.report_path}: {exc.strerror or exc}"
        self._last_write = time.monotonic()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.state.settings.worker:
            return
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is not None:
            guard.deferred = True  # the report is being written: a signal now is noted, not raised
        seen = guard.seen if guard is not None else None
        try:
            self._finish(session, exitstatus)
            # Even with no record: an older report at this path must not stand in for this run.
            if _writes_report(self.config, self.state.settings):
                self._write()
                if guard is not None and guard.seen != seen:
                    self._write()  # a signal came while it was written: the report says so
                if self.write_error:  # the results are lost: the session never exits 0
                    session.exitstatus = pytest.ExitCode.USAGE_ERROR
        finally:
            self.seen_at_write = guard.seen if guard is not None else None
        self._interrupted_after_all(session)

    def _interrupted_after_all(self, session) -> None:
        """A signal noted, not raised (after the last case): the session still ends as
        interrupted, its report rewritten when the signal came after it was written."""
        guard = self.config.stash.get(SIGNALS_KEY, None)
        if guard is None or guard.seen is None or self.write_error:
            return
        if guard.seen != self.seen_at_write and _writes_report(self.config, self.state.settings):
            self.seen_at_write = guard.seen
            self._write()
        session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _finish(self, session, exitstatus) -> None:
        """What the final report needs to say why it is incomplete (session.incomplete_reasons)."""
        state = self.state
        causes = []
        selection = _selection_options(self.config, state.settings)
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
        if int(exitstatus) == pytest.ExitCode.NO_TESTS_COLLECTED and not causes and state.empty_shard() is not None:
            # Its slice is empty and it ran all of it: complete, and no failed CI job to merge around.
            session.exitstatus = exitstatus = pytest.ExitCode.OK
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
    def pytest_unconfigure(self, config):
        # Signals stay noted until here: the other plugins' teardown and the terminal summary
        # ran after the report was written, and a signal then must not be a traceback.
        session = getattr(self, "session", None)
        if (
            session is not None
            and not self.state.settings.worker
            and getattr(self, "seen_at_write", "unset") != "unset"
        ):
            self._interrupted_after_all(session)
        self._restore_signal_handlers()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        # Around pytest's own summary, whose short test summary closes it: the root causes, the
        # answer a user runs for, come last, right above pytest's final line.
        try:
            return (yield)
        finally:
            self._summary(terminalreporter, config)

    def _summary(self, terminalreporter, config) -> None:
        if not _writes_report(config, self.state.settings) or not self.state.finished:
            return
        if self.write_error:
            terminalreporter.write_line(f"ERROR: {self.write_error}", red=True)
        from ..reports.report import signature_groups
        from ..reports.summary import summary_lines

        terminalreporter.section("scaled-mm matrix")
        lines = summary_lines(self.state, signature_groups(self.state.records.values()))
        lines[1:1] = self.state.coverage_lines()  # what was really tested, under the headline
        from ..matrix.packs import pack_notes

        # What a kernel library's import held back (its C extensions that do not load here), in one line.
        ran = {str((record.get("params") or {}).get("kernel")) for record in self.state.records.values()}
        lines[1:1] = [f"note: {note}" for note in pack_notes(ran)]
        # What a kernel's declaration left untested (matrix/cases.py), right under it.
        lines[1:1] = [f"warning: {w}" for w in self.state.matrix_block()["generation"].get("warnings", [])]
        total = self.state.empty_shard()
        if total:
            index, count = self.state.settings.shard
            lines.insert(
                1,
                f"shard {index}/{count} holds none of the matrix's {total} case(s) (more shards than cases):"
                " its empty report merges with the others",
            )
        if self.write_error:  # no report was written: do not point at one
            lines = [line for line in lines if not line.startswith("report: ")]
        from ..reports.printable import printable

        for line in lines:
            terminalreporter.write_line(printable(line))  # record text (signatures, ids) is data


def _selection_options(config, settings) -> list[str]:
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


def pytest_report_teststatus(report, config):
    """A case that passes with a record of a class shown apart (OutcomeClass.shown_apart): a
    known failure fixed upstream, a lenient compiled side, a tolerated error parity."""
    if report.when == "call" and report.passed:
        record = dict(report.user_properties).get("scaledmm")
        known = oc.outcome_class(record.get("outcome")) if record else None
        if known is not None and known.shown_apart is not None:
            return known.shown_apart.teststatus()
    return None


def build_session_report(state) -> Report:
    """The session's report with how strict it was: the gate judges strict-only failures by the
    candidate's session.strict_errors."""
    report = state.build_report()
    report["session"]["strict_errors"] = state.settings.strict_errors
    return report


def _load_baseline(path: str) -> Report:
    from ..reports.report import ReportError, load_report

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

    def __init__(self, config, state, path, baseline):
        self.config, self.state = config, state
        self.baseline = (Path(path), baseline)
        self.other_failures = 0
        self.result = None
        self.excused = False  # exit status 1 turned to 0: every failure is an old one

    def pytest_runtest_logreport(self, report):
        if report.failed and "scaledmm" not in dict(report.user_properties):
            self.other_failures += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        # Other exit statuses fail the session already; --collect-only runs nothing to gate. The
        # session's status as it is now: an empty shard's "no tests collected" became OK and is gated.
        if (
            session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
            or self.config.option.collectonly
        ):
            return
        from ..reports.gate import run_gate

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
            flags={
                "allow_missing": ALLOW_MISSING.flag,
                "allow_capability_loss": ALLOW_CAPABILITY_LOSS.flag,
                "allow_worse": ALLOW_WORSE.flag,
                "allow_looser_slack": ALLOW_LOOSER_SLACK.flag,
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

    def pytest_terminal_summary(self, terminalreporter):
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


def pytest_terminal_summary(terminalreporter, config):
    state = _state(config)
    if state is None or state.settings.worker:
        return
    fixed = [r for r in state.records.values() if r.get("outcome") == oc.FIXED_UPSTREAM]
    if fixed:
        terminalreporter.section("scaled-mm known failures fixed upstream", yellow=True)
        entries: dict = {}
        for record in fixed:
            entries.setdefault(record["known_failure"]["entry"], []).append(record)
        for index, records in sorted(entries.items()):
            entry = records[0]["known_failure"]
            link = f" {entry['link']}" if entry.get("link") else ""
            from ..reports.printable import printable

            terminalreporter.write_line(
                printable(
                    f"known_failures[{index}] ({entry['signature']}){link}: {len(records)} case(s) pass now,"
                    " retire the entry"
                    f" (e.g. {records[0]['id']})"
                )
            )
