"""pytest hooks of the plugin (the pytest11 entry point) and the configure glue.

Inert unless --scaledmm-matrix is given: no collection, no report, no torch import. With it,
pytest_configure reads the options once (settings.py), builds the MatrixSession and registers
every plugin object of the run, here and nowhere else. The jobs live apart: the collection items
and the missing-record safety net (items.py), the signal guard (signal_guard.py), the reporter
(reporter.py) and the baseline gate (baseline_gate.py); those modules load only for a matrix run,
the signal guard excepted.

Every case item ends as exactly one record (a harness failure or a setup error is a
HARNESS_ERROR record, a skip before the case ran a SKIPPED one), and the report says whether the
run was complete: the controller counts the generated cases itself and names what cut the run
short (a subset, -x, Ctrl-C, SIGTERM, an internal error, an unusual exit status).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..verdict import outcome as oc
from .options import add_pytest_options
from .signal_guard import SIGNALS_KEY, SignalGuard

if TYPE_CHECKING:
    from ..records import Report
    from ..reports.report_lock import ReportLock
    from .session import MatrixSession
    from .settings import Settings

STATE_KEY: pytest.StashKey[MatrixSession] = pytest.StashKey()
LOCK_KEY: pytest.StashKey[ReportLock] = pytest.StashKey()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup("scaledmm", "scaled-mm compatibility matrix"), parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
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


def _state(config: pytest.Config) -> MatrixSession | None:
    return config.stash.get(STATE_KEY, None)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from .settings import Settings, writes_report

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
            if writes_report(config, settings):
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


def _configure_matrix_run(config: pytest.Config, settings: Settings) -> None:
    from ..matrix.errors import MatrixError
    from ..matrix.known_failures import check_entries
    from ..matrix.spec import load_spec
    from .baseline_gate import load_baseline
    from .declared import declared_kernels
    from .session import MatrixSession
    from .settings import writes_report

    # The baseline before the claim: it may be the report this run replaces.
    baseline = load_baseline(settings.baseline) if settings.baseline and not settings.worker else None
    # Claimed before the matrix is read: a run refused from here on leaves an unfinished report.
    if writes_report(config, settings):
        _claim_report_path(config, settings.report)
    from ..execution.quiet import import_torch
    from ..matrix.kernels import add_import_dirs

    import_torch()  # before a user kernel module imports it: without torch's import-time noise
    if settings.worker:
        from .handover import take_hand_over

        take_hand_over(config)
    if settings.recorded_on and not settings.worker:
        _warn_other_torch(settings.recorded_on)
    import_dirs = [str(d) for d in dict.fromkeys([settings.matrix.parent, Path(config.rootpath)])]
    add_import_dirs(import_dirs)  # kernels import like tests
    try:
        spec = load_spec(settings.matrix, declared_kernels=declared_kernels(config))
        check_entries(spec.path, spec.known_failures)
        state = MatrixSession(spec, settings)
        if settings.worker:
            from .handover import take_hand_over

            take_hand_over(config, state)
        state.import_dirs = tuple(import_dirs)  # repro scripts import the kernels from there too
        if not settings.worker:
            state.code()  # the code as it is when the run starts: the report's matrix.code
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
    from .speed import share_cpu_threads

    if settings.worker:
        share_cpu_threads()
    else:
        from .longest_first import schedule_longest_first

        longest_first = schedule_longest_first(config, state)
        if longest_first is not None:
            config.pluginmanager.register(longest_first, "scaledmm-longest-first")
        from .handover import hand_over_to_workers

        handover = hand_over_to_workers(config, state)
        if handover is not None:
            config.pluginmanager.register(handover, "scaledmm-handover")
    _collect_only_the_matrix(config, spec.path)


def _register_plugins(config: pytest.Config, state: MatrixSession, baseline: Report | None) -> None:
    """Every plugin object of a matrix run, in this order (pluggy calls later ones first)."""
    from .baseline_gate import BaselineGate
    from .reporter import MatrixReporter, build_session_report
    from .reproduce import ReproducePlugin
    from .schedule import CostOrder
    from .speed import FirstFailureOrder, SignatureTicker

    settings = state.settings
    manager = config.pluginmanager
    manager.register(MatrixReporter(config, state), "scaledmm-reporter")
    manager.register(ReproducePlugin(state), "scaledmm-reproduce")
    if baseline is not None and settings.baseline is not None:
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


def _abandon_requested_report(config: pytest.Config, error: pytest.UsageError) -> None:
    """A usage error before the report path is claimed: an earlier report at the path asked for
    must not pass for this run (reports/report.py, abandon_report)."""
    from ..reports.report import abandon_report
    from .settings import is_worker, requested_report

    option = config.option
    if not (is_worker(config) or option.collectonly or option.help):
        abandon_report(requested_report(config), f"stopped by a usage error before any case ran: {error}")


# pytest's own outputs (option dest -> flag): a report at one of their paths would be overwritten.
_PYTEST_OUTPUTS = {"xmlpath": "--junitxml", "reportlog": "--report-log", "debug": "--debug", "resultlog": "--resultlog"}


def _output_clash(config: pytest.Config, path: Path) -> str | None:
    """The flag of a pytest output written to the report path, or None."""
    from ..reports.step_summary import same_file

    for dest, flag in _PYTEST_OUTPUTS.items():
        value = getattr(config.option, dest, None)
        if isinstance(value, str) and value and same_file(Path(config.invocation_params.dir, value), path):
            return flag
    return None


def _claim_report_path(config: pytest.Config, path: Path) -> None:
    """Before any case runs: the report can be written there, no other live run writes it, and
    an earlier report there moves aside for an unfinished one (reports/report.py, start_report)."""
    from ..reports.report import check_writable, start_report
    from ..reports.report_lock import ReportLock, ReportLocked

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
    from ..reports.report_path import ClaimRefused

    try:
        start_report(path)
    except ClaimRefused as exc:
        raise pytest.UsageError(f"--scaledmm-report: {exc}") from None
    except OSError as exc:
        raise pytest.UsageError(f"--scaledmm-report: cannot write {path}: {exc.strerror or exc}") from None


def pytest_sessionstart(session: pytest.Session) -> None:
    # After every plugin's and conftest's pytest_configure: the child inherits the environment
    # they set, as a restarted child would; before collection, which its start-up overlaps.
    state = _state(session.config)
    if state is not None and _runs_cases_here(session.config, state.settings):
        state.prestart_child()


def pytest_collection_finish(session: pytest.Session) -> None:
    state = _state(session.config)
    if state is not None and _runs_cases_here(session.config, state.settings) and session.items:
        state.start_runner()


def _runs_cases_here(config: pytest.Config, settings: Settings) -> bool:
    """False for an xdist controller (its workers run the cases), --collect-only and --help."""
    option = config.option
    if option.collectonly or option.help:
        return False
    # xdist distributes only with a --dist mode and somewhere to send cases (-n or --tx);
    # without xdist installed these options do not exist.
    distributing = getattr(option, "dist", "no") != "no" and bool(getattr(option, "tx", None))
    return settings.worker or not distributing


def _collect_only_the_matrix(config: pytest.Config, matrix_path: Path) -> None:
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


def _names(config: pytest.Config, arg: str, path: Path) -> bool:
    """Whether a path argument (or the file of a node id) is `path`."""
    try:
        return Path(config.invocation_params.dir, str(arg).split("::", 1)[0]).resolve() == path
    except (OSError, RuntimeError):  # a link loop: not the matrix
        return False


def matrix_node_ids(config: pytest.Config, matrix_path: Path) -> list[str]:
    """The case ids the command line's node ids in the matrix file name (`m.yaml::CASE`)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    return [str(arg).split("::")[1] for arg in config.args if "::" in str(arg) and _names(config, arg, matrix_path)]


def pytest_unconfigure(config: pytest.Config) -> None:
    state = _state(config)
    if state is not None:
        state.close()  # the child process first: it may still use the cache
        state.drop_triage_claims()
        state.drop_generated_cases()
        state.drop_owned_cache()
    lock = config.stash.get(LOCK_KEY, None)
    if lock is not None:
        lock.release()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = _state(parent.config)
    if state is not None and file_path == state.spec.path:
        from .items import MatrixFile

        return MatrixFile.from_parent(parent, path=file_path, state=state)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The safety net: a case item that ends a phase without its record (a setup error, a skip
    before the case ran, anything that bypassed runtest) gets one here."""
    report = yield
    if _state(item.config) is None:
        return report
    from .items import CaseItem, missing_record

    if isinstance(item, CaseItem) and not any(name == "scaledmm" for name, _ in item.user_properties):
        record = missing_record(item, call, report)
        if record is not None:
            item.user_properties.append(("scaledmm", record))
            report.user_properties.append(("scaledmm", record))
    return report


def pytest_report_teststatus(
    report: pytest.TestReport | pytest.CollectReport, config: pytest.Config
) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    """A case that passes with a record of a class shown apart (OutcomeClass.shown_apart): a
    known failure fixed upstream, a lenient compiled side, a tolerated error parity."""
    if report.when == "call" and report.passed:
        record = dict(report.user_properties).get("scaledmm")
        known = oc.outcome_class(record.get("outcome")) if record else None
        if known is not None and known.shown_apart is not None:
            return known.shown_apart.teststatus()
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    state = _state(config)
    if state is None or state.settings.worker:
        return
    from .reporter import fixed_upstream_summary

    fixed_upstream_summary(terminalreporter, state)
