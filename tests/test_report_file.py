"""The report file: what a report holds and where it goes by default, writes that are atomic, the
path a run claims and what it refuses to replace there, the earlier report moved aside, its mode,
and readers that refuse a malformed or hostile file in one line."""

import json

import pytest

from matrices import matrix_text, planted

# -- what a report holds, written atomically -------------------------------------------------------


def test_report_contents_and_default_location(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct"), planted("ignores_scale_b")]))
    matrix_project.run("--scaledmm-matrix").assert_outcomes(passed=1, failed=1)
    matrix_project.run("--scaledmm-matrix").assert_outcomes(passed=1, failed=1)
    reports = sorted((matrix_project.path / ".scaledmm" / "reports").glob("*.json"))
    assert len(reports) == 2  # each run its own file: the earlier report is still there
    report = json.loads(reports[-1].read_text())
    assert report["schema"] == "pytest-scaledmm/report" and report["schema_version"] == 2
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
