"""Routes found by a second hostile review of the fail-closed gate: a report path that is a link
or whose `<name>.previous.json` cannot be replaced, a file at the report path that is no report,
readers handed a FIFO, report permissions, PASS records without proof, a slack the report hides.
"""

import json
import math
import os
import stat
import subprocess
import sys

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main

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


# -- 1. claiming the report path ------------------------------------------------------------------


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


# -- 2. readers handed a FIFO ---------------------------------------------------------------------


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


# -- 3. permissions, and the summary after a failed write -----------------------------------------


def test_reports_are_readable_by_others_modulo_the_umask(matrix_project):
    old = os.umask(0o022)
    try:
        _complete_run(matrix_project)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(matrix_project.path / "report.json").st_mode) == 0o644


def test_no_report_line_after_the_final_write_failed(matrix_project, monkeypatch):
    from pytest_scaledmm.reports import report as report_module

    real = report_module.write_atomic

    def failing(path, data):
        if data.get("session", {}).get("complete"):
            raise OSError(28, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(report_module, "write_atomic", failing)
    result = _run(matrix_project)
    out = result.stdout.str()
    assert "No space left" in out + result.stderr.str()
    assert not [line for line in out.splitlines() if line.startswith("report: ")], out


# -- 4. a PASS record without proof ---------------------------------------------------------------


def _edited_pass(tmp_path, edit, capsys):
    from reports_factory import case, report, write

    base = report([case("a", "PASS"), case("b", "PASS")], torch="2.11.0")
    cand = report([case("a", "PASS"), case("b", "PASS")], torch="2.13.0")
    edit(cand["cases"][1])
    b, c = write(tmp_path / "b.json", base), write(tmp_path / "c.json", cand)
    capsys.readouterr()
    code = main(["gate", "--baseline", str(b), "--candidate", str(c)])
    return code, capsys.readouterr().out


def test_a_pass_without_checks_fails_the_gate(tmp_path, capsys):
    code, err = _edited_pass(tmp_path, lambda r: r.pop("errors"), capsys)
    assert code == 1 and "1 passing record(s) lack a passing check" in err and "e.g. b" in err, err


@pytest.mark.parametrize("ratio", [6.7, math.nan, "0.5", None])
def test_a_pass_with_a_ratio_over_one_fails_the_gate(tmp_path, capsys, ratio):
    code, err = _edited_pass(tmp_path, lambda r: r["errors"]["compiled"].update(ratio=ratio), capsys)
    assert code == 1 and "lack a passing check" in err, err


def test_unedited_passes_still_pass(tmp_path, capsys):
    code, err = _edited_pass(tmp_path, lambda r: None, capsys)
    assert code == 0, err
