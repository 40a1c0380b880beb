"""`scaledmm gate` and `pytest --scaledmm-baseline`: a new failure fails, a capability gained does not
(the routes by which the gate used to pass without proof are in test_gate_fail_closed.py)."""

import textwrap
from pathlib import Path

import pytest
from reports_factory import DATA, case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.reports.gate import GateFailure, check
from pytest_scaledmm.reports.report import load_report

GATE = DATA / "gate"
BASELINE = GATE / "baseline-torch211.json"


def _load(path):
    return (path, load_report(path))


def test_planted_regression_fails_the_gate(capsys):
    code = main(["gate", "--baseline", str(BASELINE), "--candidate", str(GATE / "candidate-torch213-regression.json")])
    err = capsys.readouterr().out
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == "gate FAILED: 2 case(s) newly fail in torch213 against torch211"
    assert any(
        "regression: 1 case PASS -> MISMATCH: kernel int8_w8a8: compiled values off the reference"
        " (e.g. compiled: max |err|/tol = 3.1e+02 (max abs 41.5) (case w8a8-row_x_row-m33k64n32-fp16-inductor-5e0f55))"
        in line
        for line in lines
    )
    assert any("PASS -> COMPILE_ONLY_ERROR" in line and "4d0e44" in line for line in lines)
    # The long-standing lowering failure of case 2b0c22 is in both reports: not a reason.
    assert "2b0c22" not in err


def test_capability_change_only_passes_the_gate(capsys):
    code = main(["gate", "--baseline", str(BASELINE), "--candidate", str(GATE / "candidate-torch213-capability.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == "gate passed: no new failure in torch213 against torch211"
    assert "note: 2 case(s) capability gained" in out
    assert "note: 1 case(s) of the baseline" not in out


def test_changed_signature_of_an_old_failure_fails_the_gate(capsys):
    code = main(["gate", "--baseline", str(BASELINE), "--candidate", str(GATE / "candidate-torch213-signature.json")])
    err = capsys.readouterr().out
    assert code == 1
    assert (
        "signature changed: 1 case COMPILE_ONLY_ERROR -> COMPILE_ONLY_ERROR: InductorError <- RuntimeError: Expected scale_a"
        in err
    )


def test_gate_raises_its_own_exception_type():
    result = check(_load(BASELINE), _load(GATE / "candidate-torch213-regression.json"))
    assert not result.passed and result.exit_code == 1 and len(result.failures) == 2
    with pytest.raises(GateFailure) as excinfo:
        result.raise_for_failure()
    assert excinfo.value.reasons == result.reasons and len(result.reasons) == 2
    check(_load(BASELINE), _load(GATE / "candidate-torch213-capability.json")).raise_for_failure()


def test_gate_honours_the_known_failure_catalogue(tmp_path, capsys):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        textwrap.dedent(
            """\
            version: 1
            kernels: [aten_scaled_mm, int8_w8a8]
            axes: {mode: [inductor]}
            profiles: {default: {cases: 4}}
            known_failures:
              - match: {kernel: aten_scaled_mm, mode: max-autotune-no-cudagraphs}
                torch: ">=2.11"
                signature: "must both be 2D"
                link: https://example.invalid/issue/1
            """
        )
    )
    # The entry covers the baseline's torch 2.11 too, where the case passed ("fixed upstream"):
    # its failure on 2.13 is the known failure the entry describes; the MISMATCH is not covered.
    args = ["gate", "--baseline", str(BASELINE), "--candidate", str(GATE / "candidate-torch213-regression.json")]
    assert main(args + ["--matrix", str(matrix)]) == 1
    out = capsys.readouterr().out
    assert "gate FAILED: 1 case(s)" in out and "w8a8-row_x_row" in out and "1 case(s) known failure" in out
    assert "4d0e44" not in out

    # An entry made only of the words the harness writes names no cause: a usage error.
    catch_all = matrix.read_text() + textwrap.indent(
        textwrap.dedent("""\
        - match: {kernel: int8_w8a8, scale_a: rowwise}
          signature: "MISMATCH: compiled values off the reference"
        """),
        "  ",
    )
    (tmp_path / "catch_all.yaml").write_text(catch_all)
    assert main(args + ["--matrix", str(tmp_path / "catch_all.yaml")]) == 2
    assert "known_failures[1].signature" in capsys.readouterr().err

    # An entry that expects another signature does not excuse the failure.
    (tmp_path / "other.yaml").write_text(matrix.read_text().replace('"must both be 2D"', '"LoweringException"'))
    assert main(args + ["--matrix", str(tmp_path / "other.yaml")]) == 1
    out = capsys.readouterr().out
    assert "gate FAILED: 2 case(s)" in out and "4d0e44" in out

    # An entry whose range leaves the baseline's torch out: the case passed there and nothing
    # said it might not, so failing now as predicted is still a regression.
    matrix.write_text(matrix.read_text().replace('">=2.11"', '">=2.12"'))
    assert main(args + ["--matrix", str(matrix)]) == 1
    out = capsys.readouterr().out
    assert "regression: 1 case PASS -> XFAIL: InductorError <- RuntimeError" in out and "4d0e44" in out


def test_reports_without_a_common_case_fail_the_gate(tmp_path):
    a = write(tmp_path / "a.json", report([case("x-1", "PASS")], torch="2.11.0"))
    b = write(tmp_path / "b.json", report([case("x-2", "PASS")], torch="2.13.0"))
    result = check(_load(a), _load(b))
    assert not result.passed and "no case in common" in result.reasons[0]


def test_gate_markdown_is_appended(tmp_path):
    summary = tmp_path / "step-summary.md"
    summary.write_text("# earlier step\n")
    main(
        [
            "gate",
            "--baseline",
            str(BASELINE),
            "--candidate",
            str(GATE / "candidate-torch213-regression.json"),
            "--markdown",
            str(summary),
        ]
    )
    text = summary.read_text()
    assert (
        text.startswith("# earlier step\n")
        and "**gate FAILED: 2 case\\(s\\) newly fail in torch213 against torch211**" in text
    )
    assert "&lt;script&gt;" in text and "<script>" not in text


# -- the same gate inside pytest ----------------------------------------------------------------


# The gate is about the catalogue and the reports: cases run in the pytest process without
# triage, which keeps each run to a few seconds. One kernel name, so one case id, whatever it runs.
def _one_case(impl="correct") -> str:
    return matrix_text([planted("k", impl)])


def _baseline_run(matrix_project, impl):
    matrix_project.write_matrix(_one_case(impl))
    return matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "baseline.json")


def test_baseline_option_fails_the_session_on_a_new_failure(matrix_project):
    """Same kernel name (so the same case id), other implementation: it passed in the baseline and
    fails now. The session fails and the summary says why."""
    _baseline_run(matrix_project, "correct").assert_outcomes(passed=1)
    matrix_project.write_matrix(_one_case("asserts_rank_under_compile"))
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "now.json", "--scaledmm-baseline", "baseline.json"
    )
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*scaled-mm baseline gate*",
            "gate FAILED: 1 case(s) newly fail in * against *",
            "  regression: 1 case PASS -> COMPILE_ONLY_ERROR: *scale ranks differ*",
        ]
    )
    assert matrix_project.report("now.json")["cases"][0]["outcome"] == "COMPILE_ONLY_ERROR"


def test_baseline_option_passes_when_the_failure_is_old(matrix_project):
    """The case failed the same way in the baseline: no new failure, the session exits 0."""
    _baseline_run(matrix_project, "asserts_rank_under_compile").assert_outcomes(failed=1)
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "now.json", "--scaledmm-baseline", "baseline.json"
    )
    result.assert_outcomes(failed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["gate passed: no new failure*", "*exit status 0: every failing case failed the same way*"]
    )


def test_unusable_baseline_is_a_usage_error_naming_the_file(matrix_project):
    matrix_project.write_matrix(_one_case())
    (matrix_project.path / "old.json").write_text("[1, 2")
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-baseline", "old.json")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["ERROR: --scaledmm-baseline: old.json: not a report (corrupt JSON at line 1, column 6)"]
    )
    assert "Traceback" not in result.stderr.str()


def test_gate_between_two_runs_of_one_environment(tmp_path, capsys):
    # Same torch, same arch, no tox env: the labels collide and the file names tell them apart.
    before = write(tmp_path / "runner-a-before.json", report([case("c1", "PASS"), case("c2", "PASS")]))
    after = write(
        tmp_path / "runner-a-after.json", report([case("c1", "PASS"), case("c2", "MISMATCH", "MISMATCH: compiled")])
    )
    assert main(["gate", "--baseline", str(before), "--candidate", str(after)]) == 1
    err = capsys.readouterr().out
    assert "runner-a-after" in err and "PASS -> MISMATCH" in err


# -- the gate's own interface ----------------------------------------------------------------------


def test_run_gate_takes_the_looser_slack_flag_that_the_cli_and_the_plugin_pass():
    """`scaledmm gate` and `pytest --scaledmm-baseline` both call run_gate(allow_looser_slack=...):
    a TypeError on every gate."""
    import inspect

    from pytest_scaledmm.reports.gate import run_gate

    assert "allow_looser_slack" in inspect.signature(run_gate).parameters


@pytest.mark.parametrize("garbage", ["1000", [1000], 7])
def test_the_gate_never_raises_on_a_kernel_slack_that_is_not_an_object(garbage):
    from reports_factory import case, report

    from pytest_scaledmm.reports.gate import check

    base = report([case("k.1", "PASS")])
    candidate = report([case("k.1", "PASS")])
    candidate["cases"][0].setdefault("extra", {})["kernel_slack"] = garbage
    result = check((Path("base.json"), base), (Path("cand.json"), candidate))  # AttributeError: 'str' ... 'get'
    assert not result.passed
