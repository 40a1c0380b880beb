"""The report says whether the run was complete, and why not; every case that ran has a record;
bad settings and an unusable report path stop the run before any case; a killed or refused
rerun leaves no complete-looking report behind; repeated signals end the run as interrupted.

Runs are real small matrices of planted kernels, in-process (no isolation, no triage) unless
isolation or a separate process is what is being tested.
"""

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.execution import isolate
from pytest_scaledmm.plugin import reporter
from pytest_scaledmm.plugin.session import MatrixSession

TWO_CASES = matrix_text([planted("correct")], {"scale_b": ["tensor_0d", "tensor_1d"]})


def _run(matrix_project, *args, matrix=TWO_CASES):
    matrix_project.write_matrix(matrix)
    return matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", *args)


def _run_interrupted(matrix_project, pytester, *args, matrix=TWO_CASES):
    """_run for a run that ends in KeyboardInterrupt, which pytester would otherwise re-raise here."""
    matrix_project.write_matrix(matrix)
    return pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore",
        *IN_PROCESS,
        "--scaledmm-matrix",
        "--scaledmm-report",
        "report.json",
        *args,
        no_reraise_ctrlc=True,
    )


def _session(matrix_project):
    return matrix_project.report()["session"]


def test_a_full_run_is_complete_and_counts_its_cases(matrix_project):
    _run(matrix_project).assert_outcomes(passed=2)
    session = _session(matrix_project)
    assert session["complete"] is True and session["incomplete_reasons"] == []
    assert session["generated"] == session["recorded"] == 2


# -- stopped, deselected, interrupted -------------------------------------------------------------


def test_ctrl_c_makes_the_report_incomplete(matrix_project, pytester):
    # Ctrl-C after the first case: it used to write complete: true.
    pytester.makeconftest(
        """
        def pytest_runtest_teardown(item, nextitem):
            if nextitem is not None:
                raise KeyboardInterrupt
        """
    )
    result = _run_interrupted(matrix_project, pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    session = _session(matrix_project)
    assert session["complete"] is False
    assert (session["generated"], session["recorded"]) == (2, 1)
    assert "interrupted (KeyboardInterrupt)" in session["incomplete_reasons"]
    assert "1 of 2 generated case(s) have no record" in session["incomplete_reasons"][0]


@pytest.mark.slow
def test_sigterm_ends_the_run_with_an_incomplete_report(matrix_project, pytester):
    # A CI time limit sends SIGTERM: the run used to die without a report. A subprocess, since
    # before the handler existed SIGTERM ended the whole process.
    pytester.makeconftest(
        """
        import os, signal
        def pytest_runtest_teardown(item, nextitem):
            if nextitem is not None:
                os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    matrix_project.write_matrix(TWO_CASES)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", timeout=300
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    session = _session(matrix_project)
    assert session["complete"] is False
    assert "terminated (SIGTERM)" in session["incomplete_reasons"]


def test_signal_handlers_are_restored_after_the_run(matrix_project):
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    _run(matrix_project).assert_outcomes(passed=2)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


SWALLOWING_KERNEL = """
import os, signal, time
from planted_kernels import correct

def swallows_ctrl_c(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    try:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the kernel runs ...
        time.sleep(1)
    except KeyboardInterrupt:
        pass  # ... and a kernel (or a runner) that catches everything
    return correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
"""


@pytest.fixture
def sigint(monkeypatch):
    """SIGINT as the test says, restored after. The run honours the handler it finds, and a
    process started in the background by a shell without job control (a CI script's `cmd &`,
    and the xdist workers it spawns) inherits SIGINT ignored: Ctrl-C then never reaches a
    kernel, and a test relying on the inherited disposition passed or failed by how it was
    started."""
    before = signal.getsignal(signal.SIGINT)
    yield lambda handler: signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGINT, before)


def _swallowing_run(matrix_project, pytester):
    pytester.makepyfile(swallowing_kernels=SWALLOWING_KERNEL)
    pytester.syspathinsert()
    matrix = TWO_CASES.replace("planted_kernels:correct", "swallowing_kernels:swallows_ctrl_c")
    return _run_interrupted(matrix_project, pytester, matrix=matrix)


def test_ctrl_c_swallowed_by_a_kernel_still_ends_the_run(matrix_project, pytester, sigint):
    sigint(signal.default_int_handler)
    result = _swallowing_run(matrix_project, pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    session = _session(matrix_project)
    assert session["complete"] is False and session["recorded"] == 0
    assert "interrupted (KeyboardInterrupt)" in session["incomplete_reasons"]


def test_ctrl_c_ignored_by_the_process_stays_ignored(matrix_project, pytester, sigint):
    sigint(signal.SIG_IGN)  # as in a background job: the kernel's SIGINT reaches nobody
    result = _swallowing_run(matrix_project, pytester)
    # Each case ran to its verdict (whatever the compiler makes of os.kill), and the run did not stop.
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    session = _session(matrix_project)
    assert session["complete"] is True and session["recorded"] == 2
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


@pytest.mark.parametrize("option", ["-k", "--scaledmm-case"])
def test_a_subset_of_the_cases_is_incomplete(matrix_project, option):
    matrix_project.write_matrix(TWO_CASES)
    first = matrix_project.collect()[0]
    _run(matrix_project, option, first).assert_outcomes(passed=1)
    session = _session(matrix_project)
    assert session["complete"] is False
    assert (session["generated"], session["recorded"]) == (2, 1)
    assert any(option in reason for reason in session["incomplete_reasons"])


@pytest.mark.slow
def test_keyword_subset_under_xdist_is_incomplete(matrix_project, pytester):
    # Built-in kernels: nothing to import in the workers. The controller never collects: it
    # counts the generated cases itself.
    matrix_project.write_matrix(
        """
        version: 1
        kernels: [aten_scaled_mm]
        axes: {scale_a: [tensor_0d], scale_b: [tensor_0d, tensor_1d], mode: [eager], m: [16], k: [32], n: [16]}
        profiles: {default: {cases: 2}}
        """
    )
    generated = matrix_project.collect()
    first = generated[0]
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", "-n", "2", "-k", first
    )
    result.assert_outcomes(passed=1)
    session = _session(matrix_project)
    assert session["complete"] is False
    assert (session["generated"], session["recorded"]) == (len(generated), 1) and len(generated) >= 2
    assert any("-k" in reason for reason in session["incomplete_reasons"])


MISMATCH_TWICE = matrix_text([planted("ignores_scale_b")], {"scale_b": ["tensor_0d", "tensor_1d"]})


def test_stop_after_first_failure_fails_the_baseline_gate(matrix_project):
    # Both cases failed in the baseline. -x stops after the first: the old failure alone used to
    # make the gate pass and the session exit 0, though half the cases never ran.
    baseline = _run(matrix_project, matrix=MISMATCH_TWICE)
    baseline.assert_outcomes(failed=2)
    (matrix_project.path / "report.json").rename(matrix_project.path / "baseline.json")
    result = _run(matrix_project, "-x", "--scaledmm-baseline", "baseline.json", matrix=MISMATCH_TWICE)
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["gate FAILED*", "*the candidate run is incomplete: 1 of 2 generated case(s) have no record*"]
    )
    session = _session(matrix_project)
    assert session["complete"] is False
    assert any(reason.startswith("stopped early") for reason in session["incomplete_reasons"])


def test_pytest_internal_error_makes_the_report_incomplete(matrix_project, pytester):
    pytester.makeconftest(
        """
        def pytest_runtest_logfinish(nodeid, location):
            raise RuntimeError("a plugin broke")
        """
    )
    result = _run(matrix_project)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    session = _session(matrix_project)
    assert session["complete"] is False
    assert any(
        "pytest internal error: RuntimeError: a plugin broke" in reason for reason in session["incomplete_reasons"]
    )


def test_partial_report_stays_incomplete(matrix_project, pytester, monkeypatch):
    monkeypatch.setattr(reporter, "PARTIAL_REPORT_EVERY_S", -1.0)  # a partial report after every case
    pytester.makeconftest(
        """
        import shutil
        def pytest_runtest_teardown(item, nextitem):
            if nextitem is None:
                shutil.copy("report.json", "partial.json")
        """
    )
    _run(matrix_project).assert_outcomes(passed=2)
    partial = matrix_project.report("partial.json")["session"]
    assert partial["complete"] is False and partial["incomplete_reasons"]
    assert _session(matrix_project)["complete"] is True


# -- every case ends as one record ---------------------------------------------------------------


def test_harness_error_still_records_the_case(matrix_project, monkeypatch):
    real_run = MatrixSession.run

    def failing_run(self, case, triage=True):
        if case.params.scale_b == "tensor_0d":
            raise isolate.HarnessError("the harness failed in the isolated child:\nboom")
        return real_run(self, case, triage)

    monkeypatch.setattr(MatrixSession, "run", failing_run)
    result = _run(matrix_project)
    result.assert_outcomes(passed=1, failed=1)
    cases = {c["params"]["scale_b"]: c for c in matrix_project.report()["cases"]}
    assert cases["tensor_0d"]["outcome"] == "HARNESS_ERROR"
    assert "HarnessError" in cases["tensor_0d"]["signature"] and "boom" in cases["tensor_0d"]["detail"]
    assert cases["tensor_1d"]["outcome"] == "PASS"
    assert _session(matrix_project)["complete"] is True


def test_setup_error_and_setup_skip_still_record_the_case(matrix_project, pytester):
    pytester.makeconftest(
        """
        import pytest
        def pytest_runtest_setup(item):
            if "tensor_0d" in item.case.params.scale_b:
                raise RuntimeError("fixture broke")
            pytest.skip("not on this runner")
        """
    )
    result = _run(matrix_project)
    result.assert_outcomes(errors=1, skipped=1)
    cases = {c["params"]["scale_b"]: c for c in matrix_project.report()["cases"]}
    assert cases["tensor_0d"]["outcome"] == "HARNESS_ERROR" and "fixture broke" in cases["tensor_0d"]["detail"]
    assert cases["tensor_1d"]["outcome"] == "SKIPPED" and "not on this runner" in cases["tensor_1d"]["detail"]
    assert _session(matrix_project)["complete"] is True


@pytest.mark.parametrize(
    "kernel, outcomes, incomplete_reason",
    [
        # A SystemExit is the kernel's: its case is a CRASH and the run goes on to the next.
        ("exits", {"bad": "CRASH", "good": "PASS"}, None),
        # In the pytest process a KeyboardInterrupt may be the user's Ctrl-C: the run stops at
        # the first case, and the report says that neither case has a record.
        ("raises_keyboard_interrupt", {}, "2 of 2 generated case(s) have no record"),
    ],
)
def test_kernel_ending_the_process_leaves_no_case_unrecorded(
    matrix_project, pytester, kernel, outcomes, incomplete_reason
):
    matrix = matrix_text([planted("bad", kernel), planted("good", "correct")])
    _run_interrupted(matrix_project, pytester, matrix=matrix)
    report = matrix_project.report()
    session = report["session"]
    assert {c["params"]["kernel"]: c["outcome"] for c in report["cases"]} == outcomes
    assert (session["generated"], session["recorded"]) == (2, len(outcomes))
    assert session["complete"] is (incomplete_reason is None)
    if incomplete_reason:
        assert incomplete_reason in session["incomplete_reasons"][0]
        assert "interrupted (KeyboardInterrupt)" in session["incomplete_reasons"]


# -- bounded settings -----------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--scaledmm-timeout", "--scaledmm-triage-budget"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_seconds_must_be_finite_and_positive(matrix_project, option, value):
    matrix_project.write_matrix(TWO_CASES)
    result = matrix_project.run("--scaledmm-matrix", f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and option in errors[0] and "finite" in errors[0]
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_unwritable_report_path_stops_the_run_before_any_case(matrix_project, pytester):
    (pytester.path / "blocker").write_text("a file, not a directory")
    matrix_project.write_matrix(TWO_CASES)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "blocker/report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --scaledmm-report: cannot write *blocker/report.json*"])
    assert "passed" not in result.stdout.str() and "Traceback" not in result.stderr.str()


# A process holding a report's lock: `acquire` takes it as a run does; `flock` holds a bare flock
# on the lock file; `soft<errno>` takes it as a run does on a filesystem whose flock fails with
# that errno (filelock's soft lock). It says "held", then holds it until its stdin closes or it is killed.
_HOLDER = """
import errno, fcntl, os, sys
from pathlib import Path
if sys.argv[1].startswith("soft"):
    def no_flock(fd, operation):
        raise OSError(int(sys.argv[1][4:]), "no flock here")
    fcntl.flock = no_flock
from pytest_scaledmm.reports.report_lock import ReportLock
if sys.argv[1] == "flock":
    fd = os.open(sys.argv[2] + ".lock", os.O_CREAT | os.O_WRONLY, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
else:
    lock = ReportLock(Path(sys.argv[2]))
    lock.acquire()
print("held", flush=True)
sys.stdin.read()
if sys.argv[1] != "flock":
    lock.release()
"""


def _holder(report: Path, mode: str = "acquire", prefix=()) -> subprocess.Popen:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-W", "ignore", "-c", _HOLDER, mode, str(report)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def _refused(result, report: Path) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --scaledmm-report: {report} is being written by another run; lock file {report}.lock"]
    )
    assert json.loads(report.read_text()) == {"kept": True}  # nothing the user had is lost
    assert "Traceback" not in result.stderr.str()


def _kept_report(pytester) -> Path:
    report = pytester.path / "report.json"
    report.write_text('{"kept": true}')
    return report


def test_second_run_on_the_same_report_is_refused_until_the_first_releases_it(matrix_project, pytester):
    report = _kept_report(pytester)
    holder = _holder(report)
    try:
        _refused(_run(matrix_project), report)
        assert Path(f"{report}.lock").exists()  # not ours to remove
    finally:
        holder.stdin.close()
        assert holder.wait() == 0
    assert not Path(f"{report}.lock").exists()  # released by its holder
    report.unlink()
    _run(matrix_project).assert_outcomes(passed=2)
    assert matrix_project.report()["session"]["complete"] is True


def test_the_lock_of_a_killed_run_is_taken_and_released(matrix_project, pytester):
    """The kernel drops a killed run's flock: the lock file it leaves is free, whatever it holds
    (here also what an earlier version wrote: a pid, or a JSON owner)."""
    report = pytester.path / "report.json"
    lock = Path(f"{report}.lock")
    _stop(_holder(report))
    assert lock.exists()
    for left in (None, "1\n", json.dumps({"pid": os.getpid(), "start": 1, "flock": True})):
        if left is not None:
            lock.write_text(left)
        _run(matrix_project).assert_outcomes(passed=2)
        assert matrix_project.report()["session"]["complete"] is True
        assert not lock.exists()


def test_a_bare_flock_on_the_lock_file_is_refused(matrix_project, pytester):
    """A holder that names no run (an empty lock file) is refused all the same: the flock decides."""
    report = _kept_report(pytester)
    holder = _holder(report, "flock")
    try:
        _refused(_run(matrix_project), report)
    finally:
        _stop(holder)


@pytest.mark.parametrize("missing", [errno.ENOSYS, errno.ENOLCK], ids=["ENOSYS", "ENOLCK"])
def test_without_flock_a_soft_lock_refuses_while_its_run_lives_and_is_taken_once_it_is_killed(
    matrix_project, pytester, missing
):
    """On a filesystem without flock (ENOLCK: NFS without a lock daemon) the lock names its run;
    this run takes it only once that run is gone, and takes it then without help or warnings."""
    import fcntl

    def no_flock(fd, operation):
        raise OSError(missing, "no flock here")

    report = _kept_report(pytester)
    lock = Path(f"{report}.lock")
    holder = _holder(report, f"soft{missing}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fcntl, "flock", no_flock)
        try:
            assert str(holder.pid) in lock.read_text()  # the soft lock names its run
            result = _run(matrix_project, "-W", "error")
            assert result.ret == pytest.ExitCode.USAGE_ERROR
            result.stderr.fnmatch_lines(
                [f"ERROR: --scaledmm-report: {report} is being written by another run; lock file {lock} (remove it*"]
            )
        finally:
            _stop(holder)
        assert lock.exists()  # a killed run leaves its soft lock behind
        report.unlink()
        result = _run(matrix_project, "-W", "error")
        result.assert_outcomes(passed=2)
        assert "Warning" not in result.stderr.str() + result.stdout.str()
        assert matrix_project.report()["session"]["complete"] is True
        assert not lock.exists()


def _pid_namespace() -> list[str]:
    """A command prefix running its command as pid 1 of a PID namespace of its own."""
    for prefix in (
        ["unshare", "--pid", "--fork", "--mount-proc"],
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"],
    ):
        try:
            probe = subprocess.run(
                [*prefix, sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
            )
        except OSError:
            pytest.skip("no unshare(1) on this system")
        if probe.returncode == 0 and probe.stdout.strip() == b"1":
            return prefix
    pytest.skip(f"unshare cannot make a PID namespace here: {probe.stderr.decode(errors='replace').strip()}")


def test_a_run_in_another_pid_namespace_keeps_its_lock(matrix_project, pytester):
    """A run in another container sharing the volume: its pid means nothing here, its flock does."""
    report = _kept_report(pytester)
    holder = _holder(report, prefix=_pid_namespace())
    try:
        _refused(_run(matrix_project), report)
    finally:
        holder.stdin.close()
        assert holder.wait() == 0
    assert not Path(f"{report}.lock").exists()  # released by its holder
    report.unlink()
    _run(matrix_project).assert_outcomes(passed=2)


@pytest.mark.parametrize("kind", ["a directory", "a link"])
def test_a_lock_path_that_is_not_a_regular_file_is_one_error_and_leaves_it(matrix_project, pytester, kind):
    report = _kept_report(pytester)
    lock = Path(f"{report}.lock")
    if kind == "a directory":
        lock.mkdir()
    else:
        lock.symlink_to(lock.name)  # a link to itself: opening it fails for every user
    before = set(os.listdir(pytester.path))
    result = _run(matrix_project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert errors == [f"ERROR: --scaledmm-report: cannot lock {report}: its lock path {lock} is {kind}: remove it"], (
        result.errlines
    )
    assert "Traceback" not in result.stderr.str()
    assert set(os.listdir(pytester.path)) - before <= {"matrix.yaml"}
    assert (os.listdir(lock) == []) if kind == "a directory" else (os.readlink(lock) == lock.name)
    assert json.loads(report.read_text()) == {"kept": True}


# -- a stale report at the path --------------------------------------------------------------------


ONE_CASE = matrix_text([planted("correct")])
IN_PROGRESS = "run in progress or killed before it wrote its report"


def _complete_run(matrix_project) -> bytes:
    matrix_project.write_matrix(ONE_CASE)
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json").assert_outcomes(passed=1)
    first = matrix_project.path / "report.json"
    assert json.loads(first.read_text())["session"]["complete"] is True
    return first.read_bytes()


def _assert_not_complete_and_previous_kept(matrix_project, old: bytes, reason=None):
    session = matrix_project.report()["session"]
    assert session["complete"] is False, session
    if reason:
        assert session["incomplete_reasons"] == [reason]
    assert (matrix_project.path / "report.previous.json").read_bytes() == old


def test_killed_rerun_leaves_no_complete_looking_report(matrix_project, pytester, capsys):
    # SIGKILL in the first case of a rerun: the earlier complete report used to stay, byte for
    # byte, and the gate passed on it.
    old = _complete_run(matrix_project)
    pytester.makeconftest(
        """
        import os, signal
        def pytest_runtest_call(item):
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", timeout=300
    )
    assert result.ret == -signal.SIGKILL
    _assert_not_complete_and_previous_kept(matrix_project, old, IN_PROGRESS)
    capsys.readouterr()
    path = str(matrix_project.path / "report.json")
    previous = str(matrix_project.path / "report.previous.json")
    assert main(["gate", "--baseline", previous, "--candidate", path]) == 1
    assert "the candidate run is incomplete: " + IN_PROGRESS in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["--scaledmm-profile", "no-such-profile"],  # a matrix error, after the options are read
        ["--scaledmm-timeout=nan"],  # an option error, before the report path is resolved
    ],
)
def test_usage_error_leaves_no_complete_looking_report(matrix_project, args):
    old = _complete_run(matrix_project)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _assert_not_complete_and_previous_kept(matrix_project, old)


def test_an_unfinished_report_never_replaces_the_previous_one(matrix_project):
    old = _complete_run(matrix_project)
    for _ in range(2):  # the second refused run finds the first one's unfinished report
        result = matrix_project.run(
            *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", "--scaledmm-profile", "nope"
        )
        assert result.ret == pytest.ExitCode.USAGE_ERROR
    _assert_not_complete_and_previous_kept(matrix_project, old)


def test_baseline_at_the_report_path_is_read_before_the_path_is_claimed(matrix_project):
    # `--scaledmm-baseline report.json --scaledmm-report report.json`: gate against the last run.
    old = _complete_run(matrix_project)
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", "--scaledmm-baseline", "report.json"
    )
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gate passed*"])
    assert (matrix_project.path / "report.previous.json").read_bytes() == old
    assert matrix_project.report()["session"]["complete"] is True


# -- repeated signals and signals after the last case ----------------------------------------------


# The kernel says it started, then hangs; a conftest says the run collected its cases. The
# signals are sent on these events, so that they land where the test means on any machine.
HANGING_KERNEL = """
import time
from pathlib import Path

def hangs(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    Path(__file__).with_name("kernel").touch()
    while True:
        time.sleep(1)
"""
COLLECTED_CONFTEST = """
from pathlib import Path

def pytest_collection_finish(session):
    Path(__file__).with_name("collected").touch()
"""
RUN_LIMIT_S = 600  # only a run that ignores its signals (a hang) gets there


def _signalled_run(tmp_path, moment, name="SIGINT", count=2):
    """pytest on a matrix whose kernel hangs, sent `count` signals 0.3 s apart (the first to
    pytest, the others to its process group, as `timeout -s INT` and a CI cancel do) once
    `moment` came: "claimed" (it claimed its report path, in pytest_configure), "collected" (its
    cases are collected) or "kernel" (the kernel of its first case runs)."""
    (tmp_path / "hanging_kernels.py").write_text(HANGING_KERNEL)
    (tmp_path / "conftest.py").write_text(COLLECTED_CONFTEST)
    (tmp_path / "matrix.yaml").write_text(matrix_text([planted("hangs", module="hanging_kernels")], {"m": [4, 8]}))
    report_path = tmp_path / "r.json"
    event = {"claimed": report_path, "collected": tmp_path / "collected", "kernel": tmp_path / "kernel"}[moment]
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--scaledmm-matrix", "matrix.yaml"]
    command += ["--scaledmm-report", "r.json", "--no-scaledmm-triage", "--scaledmm-timeout", str(RUN_LIMIT_S)]
    # A process started with SIGINT ignored (a background job, and the xdist workers it starts)
    # passes that on to its children: the run starts with SIGINT's default action, as from a shell.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        deadline = time.monotonic() + RUN_LIMIT_S
        while not event.exists():
            if proc.poll() is not None:
                pytest.fail(f"the run ended before {moment}:\n{proc.communicate()[0].decode(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {moment} within {RUN_LIMIT_S} s")
            time.sleep(0.05)
        number = getattr(signal, name)
        os.kill(proc.pid, number)
        for _ in range(count - 1):
            time.sleep(0.3)
            try:
                os.killpg(proc.pid, number)
            except ProcessLookupError:
                break
        try:
            out, _ = proc.communicate(timeout=RUN_LIMIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not end within {RUN_LIMIT_S} s of its signals")
    finally:
        if proc.poll() is None:  # its isolated child dies with it (isolate._die_with_parent)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out.decode(errors="replace"), json.loads(report_path.read_text())["session"]


@pytest.mark.parametrize(
    "moment, name", [("claimed", "SIGINT"), ("collected", "SIGINT"), ("kernel", "SIGINT"), ("kernel", "SIGTERM")]
)
def test_repeated_signals_end_the_run_with_exit_2_and_no_traceback(tmp_path, moment, name):
    code, out, session = _signalled_run(tmp_path, moment, name)
    assert code == 2, out[-3000:]
    assert "Traceback (most recent call last)" not in out and len(out.splitlines()) < 40, out[-3000:]
    assert session["complete"] is False
    reasons = " ".join(session["incomplete_reasons"])
    assert ("interrupted" if name == "SIGINT" else "terminated") in reasons, reasons
    # No case ended before the signals (a run stopped while configuring writes no counts).
    assert session.get("recorded", 0) == 0, session


SIGNAL_AT_THE_END = """
import os, signal, pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # After the last case, before the report is written: another plugin's teardown.
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)
"""


def test_signals_after_the_last_case_still_end_the_run_as_interrupted(matrix_project, pytester, sigint):
    sigint(signal.default_int_handler)  # not the SIG_IGN a background job inherits
    pytester.makeconftest(SIGNAL_AT_THE_END)
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Traceback (most recent call last)" not in result.stdout.str() + result.stderr.str()
    session = matrix_project.report("r.json")["session"]
    assert session["complete"] is False and "interrupted (SIGINT)" in session["incomplete_reasons"], session
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
