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


# -- every JSON file is strict JSON -------------------------------------------------------------------


def _strict(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity, as jq and most parsers do."""
    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_reports_are_strict_json_and_non_finite_numbers_round_trip(matrix_project, pytester, tmp_path, capsys):
    from pytest_scaledmm.reports.report import load_report, write_atomic

    # returns_none fails with an infinite error ratio on both sides.
    matrix_project.write_matrix(matrix_text([planted("correct"), planted("returns_none")]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json", "--scaledmm-shard", "1/1",
                                "--junitxml", "junit.xml", "--scaledmm-repro-dir", "repros")
    assert result.ret == 1
    text = (pytester.path / "r.json").read_text()
    data = _strict(text)
    broken = next(c for c in data["cases"] if c["params"]["kernel"] == "returns_none")
    assert broken["errors"]["eager"]["ratio"] == "inf"
    for index in (pytester.path / "repros").glob("*.json"):
        _strict(index.read_text())
    # The readers take the report as written; rewritten, it is the same text.
    loaded = load_report(pytester.path / "r.json")
    write_atomic(tmp_path / "again.json", loaded)
    assert (tmp_path / "again.json").read_text() == text
    # Merged, compared and gated: strict again, and the same verdicts.
    merged = tmp_path / "merged.json"
    assert main(["merge", str(merged), str(pytester.path / "r.json")]) == 0
    _strict(merged.read_text())
    assert main(["compare", str(pytester.path / "r.json"), str(merged)]) == 0
    assert main(["gate", "--baseline", str(pytester.path / "r.json"), "--candidate", str(merged)]) == 0
    capsys.readouterr()


def test_a_report_written_with_bare_infinity_and_nan_is_read_and_rewritten_strict(tmp_path, capsys):
    from pytest_scaledmm.reports.gate import _bound_difference
    from pytest_scaledmm.reports.report import load_report, write_atomic
    from reports_factory import case, report

    record = case("k-1", "MISMATCH", "MISMATCH: wrong")
    record["errors"] = {side: {"ok": False, "ratio": float("inf"), "bound": {"slack": float("nan")}} for side in ("eager", "compiled")}
    old = report([record, case("k-2", "PASS")])
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(old))  # what earlier versions wrote
    assert "Infinity" in legacy.read_text() and "NaN" in legacy.read_text()
    loaded = load_report(legacy)
    write_atomic(tmp_path / "strict.json", loaded)
    rewritten = _strict((tmp_path / "strict.json").read_text())
    assert rewritten["cases"][0]["errors"]["eager"] == {"ok": False, "ratio": "inf", "bound": {"slack": "nan"}}
    strict = load_report(tmp_path / "strict.json")  # the schema takes "nan" for a slack
    assert _bound_difference(loaded, strict) is None  # the same bound, however it was written
    strict["cases"][0]["errors"]["eager"]["bound"]["slack"] = "lots"
    (tmp_path / "bad.json").write_text(json.dumps(strict))
    from pytest_scaledmm.reports.report import ReportError

    with pytest.raises(ReportError, match=r"bound.slack' is 'lots', not a number \(nor inf, -inf or nan\)"):
        load_report(tmp_path / "bad.json")


def test_doctor_json_is_strict(capsys):
    assert main(["doctor", "--json", "--no-probe"]) == 0
    _strict(capsys.readouterr().out)
