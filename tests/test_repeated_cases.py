"""A case recorded more than once (a rerun plugin, a hook that runs an item twice) keeps every
run's outcome and counts by its worst: a failing run is never replaced by a later pass, and
pytest's exit status says what the report says. `--dist each`, which runs every case on every
worker, is refused before any case runs."""

import textwrap

import pytest
from reports_factory import case, gate, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main

# The first call of the kernel is off (a wrong result), every later call right: the case's
# first run fails and a second run of it passes.
FAILS_FIRST = """
from planted_kernels import correct

CALLS = [0]


def fails_first(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    CALLS[0] += 1
    out = correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
    return out + 1 if CALLS[0] == 1 else out
"""

# Runs every item twice, each run reported as pytest reports it.
RUN_TWICE = """
import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    runtestprotocol(item, nextitem=item)
    runtestprotocol(item, nextitem=nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""

# What pytest-rerunfailures does: a failed run is reported as "rerun", not failed, and the item
# runs again; only the last run counts for pytest.
RERUN_FAILURES = """
import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=item, log=False)
    if any(r.failed for r in reports):
        for r in reports:
            if r.failed:
                r.outcome = "rerun"
            item.ihook.pytest_runtest_logreport(report=r)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for r in reports:
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""


def _project(matrix_project, pytester, conftest):
    pytester.makepyfile(fails_first=FAILS_FIRST, conftest=textwrap.dedent(conftest))
    matrix_project.write_matrix(matrix_text([planted("fails_first", module="fails_first")], cases=1))


def _only_record(data):
    assert len(data["cases"]) == 1, [c["id"] for c in data["cases"]]
    return data["cases"][0]


def test_a_case_run_twice_keeps_both_runs_and_counts_by_the_worst(matrix_project, pytester, tmp_path, capsys):
    _project(matrix_project, pytester, RUN_TWICE)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=1, passed=1)  # pytest counts both runs
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    data = matrix_project.report()
    record = _only_record(data)
    failed = record["outcome"]
    assert failed != "PASS" and data["summary"] == {failed: 1}
    assert [run["outcome"] for run in record["runs"]] == [failed, "PASS"]
    assert record["runs"][0]["signature"] == record["signature"]
    assert data["session"]["complete"] is True and data["session"]["recorded"] == 1
    assert (
        f"note: 1 case(s) ran more than once: each counts by its worst run (e.g. {record['id']}: {failed}, then PASS)"
        in (result.outlines)
    )

    # Gated against a baseline where it passed: a regression, and the note says the case ran twice.
    baseline = report([case(record["id"], "PASS", **record["params"])])
    assert gate(tmp_path, baseline, data) == 1
    out = capsys.readouterr().out
    assert f"  regression: 1 case PASS -> {failed}: kernel fails_first" in out
    assert f"note: candidate: 1 case(s) ran more than once: each counts by its worst run (e.g. {record['id']}" in out


def test_a_pass_on_a_rerun_does_not_hide_the_failed_run(matrix_project, pytester):
    _project(matrix_project, pytester, RERUN_FAILURES)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json")
    record = _only_record(matrix_project.report())
    assert record["outcome"] != "PASS" and [run["outcome"] for run in record["runs"]] == [record["outcome"], "PASS"]
    # pytest's last word agrees with the report: the run fails, and its last line says why.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "= 1 passed, 1 rerun, 1 failed on an earlier run in " in result.outlines[-1]


def test_dist_each_is_refused_with_one_line(matrix_project, pytester):
    _project(matrix_project, pytester, "")
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", "--dist", "each", "-n", "2"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        "ERROR: --dist each: every worker would run every case, and a case has one record in the report;"
        " use --dist load (or -n alone) to run each case once"
    ]
    assert not (pytester.path / "report.json").exists()  # refused before any case ran


def test_compare_names_cases_that_ran_more_than_once_and_bad_runs_are_one_error(tmp_path, capsys):
    twice = case("c1", "MISMATCH", "values off")
    twice["runs"] = [{"outcome": "PASS", "signature": None}, {"outcome": "MISMATCH", "signature": "values off"}]
    candidate = write(tmp_path / "candidate.json", report([twice, case("c2", "PASS")]))
    assert main(["compare", str(candidate)]) == 0
    assert (
        "torch2.13.0+cpu/cpu: 1 case(s) ran more than once: each counts by its worst run (e.g. c1: PASS, then MISMATCH)"
        in (capsys.readouterr().out)
    )

    twice["runs"][0]["outcome"] = "passed"
    bad = write(tmp_path / "bad.json", report([twice]))
    assert main(["compare", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"scaledmm compare: error: {bad}: key 'cases[0].runs[0].outcome' is 'passed', not an outcome class name"
    ]


def test_a_version_2_report_is_still_read(tmp_path):
    from pytest_scaledmm.reports.report import load_report

    older = write(tmp_path / "v2.json", dict(report([case("c1", "PASS")]), schema_version=2))
    loaded = load_report(older)
    assert loaded["schema_version"] == 4 and loaded["upgraded_from"] == 2
    assert "runs" not in loaded["cases"][0]
