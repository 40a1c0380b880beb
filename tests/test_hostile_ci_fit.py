"""The CI-fit features under hostile use: bad values from the environment and ini files named
where they came from, strict JSON, shard reports gated alone, step summaries that are not files,
pruning that spares what it did not write for this matrix, merges that would lose an input, and
a shard that gets no case."""

import json

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main

MATRIX = matrix_text([planted("correct"), planted("ignores_scale_b")], {"out_dtype": ["bf16", "fp16"]})


def _usage_lines(result):
    return [line for line in result.stderr.lines if line.strip()]


# -- a bad value names its real source ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("SCALEDMM_SHARD", "3/2", "ERROR: SCALEDMM_SHARD=3/2: '3/2' is not I/N with whole numbers 1 <= I <= N"),
        ("SCALEDMM_SHARD", "a/b", "ERROR: SCALEDMM_SHARD=a/b: 'a/b' is not I/N"),
        ("SCALEDMM_SHARD", "1/0", "ERROR: SCALEDMM_SHARD=1/0: '1/0' is not I/N"),
        ("SCALEDMM_KEEP", "-1", "ERROR: SCALEDMM_KEEP=-1: keeps at least one report (the run's own): N must be a whole number >= 1, got -1"),
        ("SCALEDMM_KEEP", "two", "ERROR: SCALEDMM_KEEP=two: expected an integer"),
    ],
)
def test_a_bad_shard_or_keep_from_the_environment_names_the_variable(matrix_project, monkeypatch, name, value, expected):
    monkeypatch.setenv(name, value)
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _usage_lines(result)
    assert len(lines) == 1 and lines[0].startswith(expected) and "--scaledmm-" not in lines[0].split(":")[0]
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    "ini, text, expected",
    [
        ("tox.ini", "[pytest]\nscaledmm_shard = 0/2\n", "ERROR: tox.ini [pytest] scaledmm_shard = 0/2: '0/2' is not I/N"),
        ("pytest.ini", "[pytest]\nscaledmm_keep = 0\n", "ERROR: pytest.ini [pytest] scaledmm_keep = 0: keeps at least one report"),
        ("pyproject.toml", "[tool.pytest.ini_options]\nscaledmm_shard = 2\n",
         "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_shard = 2: '2' is not I/N"),
        ("pyproject.toml", "[tool.pytest.ini_options]\nscaledmm_keep = 2.5\n",
         "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_keep = 2.5: expected an integer"),
    ],
)
def test_a_bad_shard_or_keep_from_an_ini_file_names_the_file(matrix_project, pytester, ini, text, expected):
    (pytester.path / ini).write_text(text)
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _usage_lines(result)
    assert len(lines) == 1 and lines[0].startswith(expected)


def test_the_command_line_still_names_the_flag(matrix_project, monkeypatch):
    monkeypatch.setenv("SCALEDMM_SHARD", "1/2")  # the command line wins, and its value is the bad one
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-shard", "2/1", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result)[0].startswith("ERROR: --scaledmm-shard: '2/1' is not I/N")


# -- help texts say what the code does ------------------------------------------------------------------


def test_the_report_help_names_the_real_default_directory():
    from pytest_scaledmm.plugin import options as opt
    from pytest_scaledmm.reports.report_dir import PROJECT_MARKERS, REPORTS_SUBDIR, default_report_name

    assert "under the rootdir" not in opt.REPORT.help
    assert f"<project>/{REPORTS_SUBDIR.as_posix()}/report-" in opt.REPORT.help
    assert default_report_name(0).startswith("report-19700101-")
    assert all(marker in opt.REPORT.help for marker in PROJECT_MARKERS if not marker.startswith("."))
    assert "--rootdir" in opt.REPORT.help
    assert "a directory stands for its matrix.yaml" in opt.MATRIX.help
    assert f"<project>/{REPORTS_SUBDIR.as_posix()}" in opt.KEEP.help
