"""The report file: what a report holds and where it goes by default, writes that are atomic, the
path a run claims and what it refuses to replace there, the earlier report moved aside, its mode,
and readers that refuse a malformed file, a FIFO or one nested too deep, in one line."""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.reports import report as report_module

# -- what a report holds, written atomically -------------------------------------------------------


def test_report_contents_and_default_location(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct"), planted("ignores_scale_b")]))
    matrix_project.run("--scaledmm-matrix").assert_outcomes(passed=1, failed=1)
    matrix_project.run("--scaledmm-matrix").assert_outcomes(passed=1, failed=1)
    reports = sorted((matrix_project.path / ".scaledmm" / "reports").glob("*.json"))
    assert len(reports) == 2  # each run its own file: the earlier report is still there
    report = json.loads(reports[-1].read_text())
    assert report["schema"] == "pytest-scaledmm/report" and report["schema_version"] == 4
    for key in ("torch", "python", "device_name", "arch", "hypothesis", "plugin", "tox_env"):
        assert key in report["environment"]
    assert report["matrix"]["hash"] and report["matrix"]["seed"] == 20240501
    assert report["summary"] == {"MISMATCH": 1, "PASS": 1}
    case = next(c for c in report["cases"] if c["outcome"] == "MISMATCH")
    assert set(case) >= {"id", "params", "outcome", "signature", "errors", "timing"}
    assert case["timing"]["eager_s"] > 0 and case["timing"]["compile_s"] > 0
    assert case["errors"]["eager"]["ratio"] > 1


def test_earlier_report_is_kept_and_writes_are_atomic(tmp_path, monkeypatch):
    from pytest_scaledmm.reports import report as report_module

    target = tmp_path / "r.json"
    report_module.write_atomic(target, {"old": True})

    def broken_dump(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report_module, "dumps_strict", broken_dump)
    with pytest.raises(RuntimeError):
        report_module.write_atomic(target, {"new": True})
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


# -- claiming the report path ----------------------------------------------------------------------


ONE_CASE = matrix_text([planted("correct")])


def _run(matrix_project, *args):
    matrix_project.write_matrix(ONE_CASE)
    return matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", *args)


def _complete_run(matrix_project, name="report.json") -> bytes:
    matrix_project.write_matrix(ONE_CASE)
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", name).assert_outcomes(passed=1)
    first = matrix_project.path / name
    assert json.loads(first.read_text())["session"]["complete"] is True
    return first.read_bytes()


def _complete(path) -> bool:
    return json.loads(path.read_text())["session"]["complete"] is True


def test_a_link_to_an_old_report_is_neutralised_by_a_usage_error(matrix_project):
    old = _complete_run(matrix_project, "old.json")
    link = matrix_project.path / "report.json"
    link.symlink_to("old.json")
    result = _run(matrix_project, "--scaledmm-timeout=nan")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not _complete(link), "the link still leads to a complete report"
    assert (matrix_project.path / "old.json").read_bytes() == old  # a link's target is left alone


def test_a_previous_path_that_is_a_directory_refuses_naming_it(matrix_project):
    old = _complete_run(matrix_project)
    (matrix_project.path / "report.previous.json").mkdir()
    result = _run(matrix_project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "report.previous.json" in text, text
    assert "cannot write" not in text or "report.previous.json" in text.split("cannot write", 1)[1].split("\n")[0]
    assert not _complete(matrix_project.path / "report.json")
    # The earlier report is kept somewhere, not destroyed.
    kept = [p for p in matrix_project.path.glob("report.previous*.json") if p.is_file()]
    assert [p.read_bytes() for p in kept] == [old]


def test_a_file_at_the_report_path_that_is_no_report_is_refused(matrix_project):
    matrix = matrix_project.write_matrix(ONE_CASE)
    before = matrix.read_bytes()
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", matrix.name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "not a pytest-scaledmm report" in result.stderr.str() + result.stdout.str()
    assert matrix.read_bytes() == before
    assert not list(matrix_project.path.glob("*.previous.json"))


def test_a_previous_path_that_is_no_report_is_never_overwritten(matrix_project):
    old = _complete_run(matrix_project)
    previous = matrix_project.path / "report.previous.json"
    previous.write_text("my notes\n")
    result = _run(matrix_project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert previous.read_text() == "my notes\n"
    assert "report.previous.json" in result.stderr.str() + result.stdout.str()
    assert not _complete(matrix_project.path / "report.json")
    kept = [p.read_bytes() for p in matrix_project.path.glob("report.previous*.json") if p != previous]
    assert kept == [old]


def test_an_earlier_report_still_moves_aside(matrix_project):
    old = _complete_run(matrix_project)
    _run(matrix_project).assert_outcomes(passed=1)
    assert (matrix_project.path / "report.previous.json").read_bytes() == old


@pytest.mark.parametrize("through_link", [False, True])
def test_report_path_that_is_not_a_regular_file_is_refused_never_replaced(matrix_project, pytester, through_link):
    fifo = pytester.path / "pipe"
    os.mkfifo(fifo)
    target = fifo
    if through_link:
        target = pytester.path / "report.json"
        target.symlink_to(fifo)
    matrix_project.write_matrix(ONE_CASE)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", str(target))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --scaledmm-report: *not a regular file*"])
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert os.path.islink(target) is through_link
    assert "passed" not in result.stdout.str()


def test_a_report_path_that_is_also_a_pytest_output_is_a_usage_error(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    for flag in ("--junitxml", "--debug"):
        result = matrix_project.run(
            *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "out.json", f"{flag}=out.json"
        )
        assert result.ret == pytest.ExitCode.USAGE_ERROR, flag
        assert f"is also {flag}'s file" in result.stderr.str()
        assert (
            not (matrix_project.path / "out.json").exists()
            or "testsuite" not in (matrix_project.path / "out.json").read_text()
        )


# -- the file's mode, and a write that fails -------------------------------------------------------


def test_reports_are_readable_by_others_modulo_the_umask(matrix_project):
    old = os.umask(0o022)
    try:
        _complete_run(matrix_project)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(matrix_project.path / "report.json").st_mode) == 0o644


def test_no_report_line_after_the_final_write_failed(matrix_project, monkeypatch):
    from pytest_scaledmm.plugin import reporter

    real = reporter.write_atomic

    def failing(path, data):
        if data.get("session", {}).get("complete"):
            raise OSError(28, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(reporter, "write_atomic", failing)  # where the session's reporter writes
    result = _run(matrix_project)
    out = result.stdout.str()
    assert "No space left" in out + result.stderr.str()
    assert not [line for line in out.splitlines() if line.startswith("report: ")], out


def _lock_down(directory) -> list[str]:
    """Shell words that make `directory` unwritable, even for root (an immutable directory)."""
    return ["chattr", "+i", str(directory)] if os.geteuid() == 0 else ["chmod", "555", str(directory)]


def _unlock(directory) -> None:
    words = ["chattr", "-i", str(directory)] if os.geteuid() == 0 else ["chmod", "755", str(directory)]
    subprocess.run(words, check=False, capture_output=True)


def _can_lock_down(tmp_path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        if subprocess.run(_lock_down(probe), capture_output=True).returncode != 0:
            return False
        try:
            (probe / "x").write_text("x")
        except OSError:
            return True
        return False
    finally:
        _unlock(probe)


def test_report_directory_unwritable_mid_run_is_one_error_line(matrix_project, pytester, tmp_path_factory):
    if shutil.which("chattr" if os.geteuid() == 0 else "chmod") is None or not _can_lock_down(
        tmp_path_factory.mktemp("lock")
    ):
        pytest.skip("cannot make a directory unwritable here")
    out = pytester.path / "out"
    out.mkdir()
    pytester.makeconftest(
        f"""
        import subprocess
        def pytest_runtest_teardown(item, nextitem):
            if nextitem is None:
                subprocess.run({_lock_down(out)!r}, check=True)
        """
    )
    matrix_project.write_matrix(ONE_CASE)
    try:
        result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "out/report.json")
    finally:
        _unlock(out)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret not in (pytest.ExitCode.OK, pytest.ExitCode.INTERNAL_ERROR), text
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    assert sum("cannot write" in line for line in text.splitlines()) == 1, text
    # What stays at the path says that the run did not finish.
    assert json.loads((out / "report.json").read_text())["session"]["complete"] is False
    (out / "report.json.lock").unlink(missing_ok=True)


# -- readers refuse what is not a report, in one line ----------------------------------------------


def _scaledmm(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("command", ["gate", "compare"])
def test_readers_refuse_a_fifo(tmp_path, command):
    os.mkfifo(tmp_path / "fifo")
    good = tmp_path / "good.json"
    from reports_factory import case, report, write

    write(good, report([case("a", "PASS")]))
    if command == "gate":
        args = ["gate", "--baseline", str(good), "--candidate", str(tmp_path / "fifo")]
    else:
        args = ["compare", str(tmp_path / "fifo"), str(good)]
    done = _scaledmm(*args, cwd=tmp_path)
    assert done.returncode == 2, done
    assert "not a regular file" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_fifo_baseline_is_a_usage_error(matrix_project):
    os.mkfifo(matrix_project.path / "fifo")
    matrix_project.write_matrix(ONE_CASE)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-baseline", "fifo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "not a regular file" in result.stderr.str()


BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")
OFF = "MISMATCH: compiled LoweringException: AssertionError: target"


def _set(path, value):
    def mutate(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
        return data

    return mutate


MALFORMED = [
    (_set(["cases"], None), "'cases'"),
    (_set(["cases"], 5), "'cases'"),
    (_set(["cases", 0, "id"], ["a"]), "'cases[0].id'"),
    (_set(["cases", 0, "id"], 5), "'cases[0].id'"),
    (_set(["cases", 0, "id"], None), "'cases[0].id'"),
    (_set(["cases", 0, "outcome"], ["PASS"]), "'cases[0].outcome'"),
    (_set(["cases", 0, "signature"], {"a": 1}), "'cases[0].signature'"),
    (_set(["cases", 0, "known_failure"], "x"), "'cases[0].known_failure'"),
    (_set(["session"], []), "'session'"),
    (_set(["session"], "x"), "'session'"),
    (_set(["environment"], []), "'environment'"),
    (_set(["environment"], "x"), "'environment'"),
    (_set(["matrix"], []), "'matrix'"),
    (_set(["matrix"], "x"), "'matrix'"),
    (_set(["matrix", "path"], 5), "'matrix.path'"),
    (_set(["summary"], [1]), "'summary'"),
    (_set(["schema_version"], 1.0), "'schema_version'"),
    (_set(["schema_version"], True), "'schema_version'"),
]


@pytest.mark.parametrize("mutate, key", MALFORMED, ids=[key + "-" + str(i) for i, (_, key) in enumerate(MALFORMED)])
@pytest.mark.parametrize("command", ["gate", "compare"])
def test_malformed_report_is_one_line_naming_file_and_key(tmp_path, capsys, mutate, key, command):
    good = write(tmp_path / "good.json", report([case("c1", "PASS"), case("c2", "MISMATCH", OFF)], **BASE))
    bad = write(tmp_path / "bad.json", mutate(report([case("c1", "PASS"), case("c2", "MISMATCH", OFF)], **CAND)))
    args = (
        ["gate", "--baseline", str(good), "--candidate", str(bad)]
        if command == "gate"
        else ["compare", str(good), str(bad)]
    )
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and str(bad) in err and key in err and "Traceback" not in err


def test_deeply_nested_json_is_one_line(tmp_path, capsys):
    good = write(tmp_path / "good.json", report([case("c1", "PASS")], **BASE))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    assert main(["gate", "--baseline", str(good), "--candidate", str(deep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested" in err and "Traceback" not in err


def test_deep_value_inside_a_record_is_refused(tmp_path, capsys):
    # Parses, but copying it for the comparison used to end in RecursionError.
    good = write(tmp_path / "good.json", report([case("c1", "PASS")], **BASE))
    data = report([case("c1", "PASS")], **CAND)
    data["cases"][0]["extra"] = json.loads('{"a":' * 600 + "1" + "}" * 600)
    bad = write(tmp_path / "bad.json", data)
    assert main(["gate", "--baseline", str(good), "--candidate", str(bad)]) == 2
    assert "nested deeper than" in capsys.readouterr().err


def test_duplicate_key_in_a_record_is_refused(tmp_path, capsys):
    good = write(tmp_path / "good.json", report([case("c1", "MISMATCH", OFF)], **BASE))
    text = json.dumps(report([case("c1", "MISMATCH", OFF)], **CAND))
    text = text.replace('"outcome": "MISMATCH"', '"outcome": "MISMATCH", "outcome": "PASS"')
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["gate", "--baseline", str(good), "--candidate", str(bad)]) == 2
    assert "'outcome' appears twice" in capsys.readouterr().err


def test_report_over_the_size_cap_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(report_module, "MAX_REPORT_BYTES", 100)
    good = write(tmp_path / "good.json", report([case("c1", "PASS")], **BASE))
    assert main(["compare", str(good)]) == 2
    assert "larger than" in capsys.readouterr().err


def test_malformed_baseline_is_refused_before_any_case_runs(matrix_project):
    matrix_project.write_matrix(ONE_CASE)
    bad = report([case("c1", "PASS")])
    bad["session"] = ["not", "a", "session"]
    write(matrix_project.path / "bad.json", bad)
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-baseline", "bad.json", "--scaledmm-report", "r.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --scaledmm-baseline: bad.json: key 'session' must be *"])
    assert "passed" not in result.stdout.str() and "Traceback" not in result.stderr.str() + result.stdout.str()
