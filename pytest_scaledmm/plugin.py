"""pytest hooks: options, collection of the matrix file, per-case items, summary and report.

Inert unless --scaledmm-matrix is given: no collection, no report, no torch import.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from . import outcome as oc
from .options import add_pytest_options, validate_device

STATE_KEY = pytest.StashKey["MatrixSession"]()
PARTIAL_REPORT_EVERY_S = 30.0


def pytest_addhooks(pluginmanager):
    from . import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser):
    add_pytest_options(parser.getgroup("scaledmm", "scaled-mm compatibility matrix"))


def _state(config):
    return config.stash.get(STATE_KEY, None)


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _default_report_path(config) -> Path:
    # Second, microsecond and pid: two runs never share a name, so no earlier report is replaced.
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"-{int(now % 1 * 1e6):06d}-{os.getpid()}"
    return Path(config.rootpath) / ".scaledmm" / "reports" / f"report-{stamp}.json"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    matrix = config.getoption("scaledmm_matrix")
    if matrix is None:
        return
    from .session import MatrixSession
    from .spec import MatrixError

    config.addinivalue_line("markers", "scaledmm: a case of the scaled-mm compatibility matrix")
    problem = validate_device(config.getoption("scaledmm_device"))
    if problem:
        raise pytest.UsageError(problem)
    if config.getoption("scaledmm_device").startswith("cuda"):
        from .device import resolve_device

        try:  # an explicit GPU that is not there: one usage error now, not one per case
            resolve_device(config.getoption("scaledmm_device"))
        except RuntimeError as exc:
            raise pytest.UsageError(str(exc)) from None
    path = Path(matrix)
    if not path.is_absolute():
        invocation = Path(config.invocation_params.dir)
        path = invocation / path if (invocation / path).exists() else Path(config.rootpath) / path
    try:
        from .hooks import declared_kernels
        from .spec import load_spec

        spec = load_spec(path.resolve(), declared_kernels=declared_kernels(config))
        report = config.getoption("scaledmm_report")
        state = MatrixSession(
            spec,
            config.getoption("scaledmm_profile"),
            config.getoption("scaledmm_seed"),
            config.getoption("scaledmm_device"),
            Path(report).resolve() if report else _default_report_path(config),
        )
        state.load_kernels()
    except MatrixError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(MatrixReporter(config, state), "scaledmm-reporter")
    from .reproduce import configure_reproduce

    configure_reproduce(config, state)  # how cases run and what happens to failures: reproduce.py
    _configure_baseline_gate(config, state)
    from .speed import configure_speed

    configure_speed(config, state, _is_worker(config))
    if not config.getoption("scaledmm_reuse_cache") and not _is_worker(config):
        state.use_fresh_cache()
    _collect_only_the_matrix(config, spec.path)


def pytest_sessionstart(session):
    # After every plugin's and conftest's pytest_configure: the child inherits the environment
    # they set, as a restarted child would; before collection, which its start-up overlaps.
    state = _state(session.config)
    if state is not None and _runs_cases_here(session.config):
        state.prestart_child()


def _runs_cases_here(config) -> bool:
    """False for an xdist controller (its workers run the cases), --collect-only and --help."""
    option = config.option
    if getattr(option, "collectonly", False) or getattr(option, "help", False):
        return False
    # xdist distributes only with a --dist mode and somewhere to send cases (-n or --tx).
    distributing = getattr(option, "dist", "no") != "no" and bool(getattr(option, "tx", None))
    return _is_worker(config) or not distributing


def _collect_only_the_matrix(config, matrix_path: Path) -> None:
    """`pytest --scaledmm-matrix` runs the matrix, not the project's testpaths; explicit paths
    given on the command line are kept and the matrix is added to them."""
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        if str(matrix_path) not in config.args:
            config.args.append(str(matrix_path))
    else:
        config.args[:] = [str(matrix_path)]


def pytest_unconfigure(config):
    state = _state(config)
    if state is not None:
        state.close()  # the child process first: it may still use the cache
        state.drop_owned_cache()


def pytest_collect_file(file_path, parent):
    state = _state(parent.config)
    if state is not None and file_path == state.spec.path:
        return MatrixFile.from_parent(parent, path=file_path)
    return None


class MatrixFile(pytest.File):
    def collect(self):
        state = _state(self.config)
        if state.explore is not None:
            from .explore import explore_items

            yield from explore_items(self, state)
            return
        for case in state.cases():
            yield CaseItem.from_parent(self, name=case.id, case=case)


class CaseFailure(Exception):
    def __init__(self, record: dict):
        super().__init__(record["signature"])
        self.record = record


class CaseItem(pytest.Item):
    def __init__(self, *, case, **kwargs):
        super().__init__(**kwargs)
        self.case = case
        self.add_marker("scaledmm")

    def runtest(self):
        state = _state(self.config)
        state.attach_environment(self)
        result = state.run(self.case)
        record = state.apply_known_failures(_plain(state.record(self.case, result)))
        record.setdefault("extra", {})["device"] = state.context().device  # which GPU, under xdist
        self.user_properties.append(("scaledmm", record))
        if record["outcome"] == oc.XFAIL:
            pytest.xfail(f"{record['detail']}: {record['signature']}")
        if result.outcome == oc.SKIPPED:
            pytest.skip(result.detail)
        if result.outcome == oc.UNSUPPORTED:
            pytest.skip(f"UNSUPPORTED: {result.signature}")
        if result.failed:
            raise CaseFailure(record)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailure):
            return format_failure(excinfo.value.record)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"scaledmm {self.case.id}"


def _plain(data):
    """JSON-plain copy: xdist ships user_properties through execnet, which refuses str
    subclasses such as torch's TorchVersion."""
    return json.loads(json.dumps(data, default=str))


def format_failure(record: dict) -> str:
    lines = [f"{record['outcome']}: {record['signature']}"]
    if record.get("layer"):
        lines.append(f"layer: {record['layer']}")
    if record.get("detail"):
        lines.append(f"detail: {record['detail']}")
    params = ", ".join(f"{k}={v}" for k, v in record["params"].items())
    lines.append(f"params: {params}")
    for side in ("eager_error", "compiled_error"):
        error = record.get(side)
        if error:
            first = error["message"].splitlines()[0] if error["message"] else ""
            lines.append(f"{side.split('_')[0]} raised {error['type']}: {first}")
    return "\n".join(lines)


class MatrixReporter:
    """Registered only for a matrix run; on the controller it gathers every case's record,
    including those xdist workers send in their reports' user_properties."""

    def __init__(self, config, state):
        self.config = config
        self.state = state
        self._last_write = time.monotonic()

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        properties = dict(report.user_properties)
        if "scaledmm" not in properties:
            return
        record = properties["scaledmm"]
        self.state.records[record["id"]] = record
        if self.state.environment is None and "scaledmm_env" in properties:
            self.state.environment = properties["scaledmm_env"]
        if not _is_worker(self.config) and time.monotonic() - self._last_write > PARTIAL_REPORT_EVERY_S:
            self._write(complete=False)

    def _write(self, complete: bool) -> None:
        # A partial report now and then: a run killed by a CI time limit still leaves its results.
        from .report import write_atomic

        write_atomic(self.state.report_path, self.state.build_report(complete=complete))
        self._last_write = time.monotonic()

    def pytest_sessionfinish(self, session, exitstatus):
        if _is_worker(self.config) or not self.state.records:
            return
        self._write(complete=True)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if _is_worker(config) or not self.state.records:
            return
        from .report import signature_groups
        from .summary import summary_lines

        terminalreporter.section("scaled-mm matrix")
        for line in summary_lines(self.state, signature_groups(self.state.records.values())):
            terminalreporter.write_line(line)


def pytest_report_teststatus(report, config):
    """A known failure that passes is shown as "fixed upstream", not as a plain pass: its
    known_failures entry can be retired. It does not fail the session."""
    if report.when == "call" and report.passed:
        record = dict(report.user_properties).get("scaledmm")
        if record and record.get("outcome") == oc.FIXED_UPSTREAM:
            return "fixed upstream", "U", ("FIXED_UPSTREAM", {"yellow": True})
    return None


def _configure_baseline_gate(config, state) -> None:
    path = config.getoption("scaledmm_baseline")
    if not path or _is_worker(config):
        return
    from .report import ReportError, load_report

    try:
        baseline = load_report(path)
    except ReportError as exc:
        raise pytest.UsageError(f"--scaledmm-baseline: {exc}") from None
    config.pluginmanager.register(BaselineGate(config, state, path, baseline), "scaledmm-baseline-gate")


class BaselineGate:
    """--scaledmm-baseline REPORT: `scaledmm gate` at session end. The session's exit status is the
    gate's: 1 when a case newly fails (printed in the terminal summary), 0 when every failing case
    failed the same way in the baseline. Failures outside the matrix always keep exit status 1."""

    def __init__(self, config, state, path, baseline):
        self.config, self.state = config, state
        self.baseline = (Path(path), baseline)
        self.other_failures = 0
        self.result = None

    def pytest_runtest_logreport(self, report):
        if report.failed and "scaledmm" not in dict(report.user_properties):
            self.other_failures += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if not self.state.records or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return
        from .gate import check

        self.result = check(self.baseline, (self.state.report_path, self.state.build_report()))
        if not self.result.passed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif exitstatus == pytest.ExitCode.TESTS_FAILED and not self.other_failures:
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter):
        if self.result is None:
            return
        terminalreporter.section("scaled-mm baseline gate", red=not self.result.passed, green=self.result.passed)
        for line in self.result.lines():
            terminalreporter.write_line(line)
        if self.result.passed and any(r["outcome"] in oc.FAILURES for r in self.state.records.values()):
            terminalreporter.write_line("  exit status 0: every failing case failed the same way in the baseline")


def pytest_terminal_summary(terminalreporter, config):
    state = _state(config)
    if state is None or _is_worker(config):
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
            terminalreporter.write_line(
                f"known_failures[{index}] ({entry['signature']}){link}: {len(records)} case(s) pass now, retire the entry"
                f" (e.g. {records[0]['id']})"
            )
