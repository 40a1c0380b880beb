"""`scaledmm gate` and `pytest --scaledmm-baseline`: what is a new failure (a regression, a changed
signature, a failure grown worse, capability lost, a failing case the baseline never had) and what
is not (capability gained, an old failure), and which known-failure catalogue applies."""

import textwrap
from pathlib import Path

import pytest
from reports_factory import BASE, CAND, DATA, case, gate, report, three, write

from matrices import IN_PROCESS, catalogue_matrix, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.known_failures import Catalogue
from pytest_scaledmm.matrix.spec import load_spec
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
        "regression: 1 case PASS -> MISMATCH: kernel int8_w8a8: values off the reference, error 4-1000x the bound"
        " (e.g. compiled: max |err|/tol = 310 (max abs 41.5) (case w8a8-row_x_row-m33k64n32-fp16-inductor-5e0f55))"
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
    assert "signature changed: 1 case COMPILE_ONLY_ERROR -> COMPILE_ONLY_ERROR (compiled: raised InductorError" in err
    assert "-> raised InductorError (InductorError <- RuntimeError: Expected scale_a" in err


def test_gate_raises_its_own_exception_type():
    result = check(_load(BASELINE), _load(GATE / "candidate-torch213-regression.json"))
    assert not result.passed and result.exit_code == 1 and len(result.failures) == 2
    with pytest.raises(GateFailure) as excinfo:
        result.raise_for_failure()
    assert excinfo.value.reasons == result.reasons and len(result.reasons) == 2
    check(_load(BASELINE), _load(GATE / "candidate-torch213-capability.json")).raise_for_failure()


def test_gate_markdown_is_appended(tmp_path):
    summary = tmp_path / "gate.md"
    for candidate in (BASELINE, GATE / "candidate-torch213-regression.json"):
        main(["gate", "--baseline", str(BASELINE), "--candidate", str(candidate), "--markdown", str(summary)])
    text = summary.read_text()
    assert (
        text.startswith("\n**gate FAILED: ")  # the first verdict (not proven) stays; the second follows it
        and text.count("**gate FAILED: ") == 2
        and "**gate FAILED: 2 case\\(s\\) newly fail in torch213 against torch211**" in text
    )
    assert "&lt;script&gt;" in text and "<script>" not in text


def test_gate_between_two_runs_of_one_environment(tmp_path, capsys):
    # Same torch, same arch, no tox env: the labels collide and the file names tell them apart.
    before = write(tmp_path / "runner-a-before.json", report([case("c1", "PASS"), case("c2", "PASS")]))
    after = write(
        tmp_path / "runner-a-after.json", report([case("c1", "PASS"), case("c2", "MISMATCH", "MISMATCH: compiled")])
    )
    assert main(["gate", "--baseline", str(before), "--candidate", str(after)]) == 1
    err = capsys.readouterr().out
    assert "runner-a-after" in err and "PASS -> MISMATCH" in err


# -- failures grown worse, and strict against lax --------------------------------------------------


BAND = "MISMATCH: compiled values off the reference in a band of rows"


def _off(cid, ratio, rows, signature=BAND):
    record = case(cid, "MISMATCH", signature)
    check = {
        "ok": False,
        "ratio": ratio,
        "max_abs": 1.0,
        "pattern": "in a band of rows",
        "where": f"rows {rows} of 16",
        "bound": {"slack": 1.0},
    }
    record["errors"] = {"eager": {"ok": True, "ratio": 0.5, "bound": {"slack": 1.0}}, "compiled": check}
    record["layer"] = "compiled"
    return record


def test_a_failure_grown_worse_is_a_regression_saying_by_how_much(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), _off("c2", 1e4, "3-3")], **BASE)
    candidate = report([case("c1", "PASS"), _off("c2", 6e6, "1-15")], **CAND)
    assert gate(tmp_path, baseline, candidate) == 1
    out = capsys.readouterr().out
    assert "gate FAILED: 1 case(s) newly fail or fail worse" in out, out
    assert "worse: 1 case MISMATCH -> MISMATCH" in out
    assert "error/bound 1e+04 -> 6e+06 (x600)" in out and "off rows 1 -> 15 (x15)" in out, out
    # The opt-in turns it into a note that still says it.
    assert gate(tmp_path, baseline, candidate, "--allow-worse") == 0
    out = capsys.readouterr().out
    assert "gate passed" in out and "note: accepted (--allow-worse): worse: 1 case" in out


def test_a_failure_about_as_bad_stays_no_news(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), _off("c2", 1e4, "3-4")], **BASE)
    candidate = report([case("c1", "PASS"), _off("c2", 5e4, "3-6")], **CAND)
    assert gate(tmp_path, baseline, candidate) == 0, capsys.readouterr()


def test_a_failure_whose_measures_were_edited_out_is_not_no_news(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), _off("c2", 1e4, "3-3")], **BASE)
    stripped = _off("c2", float("nan"), "3-3")
    stripped["errors"]["compiled"].pop("where")
    stripped["errors"]["compiled"]["ratio"] = "nan"
    assert gate(tmp_path, baseline, report([case("c1", "PASS"), stripped], **CAND)) == 1
    out = capsys.readouterr().out
    assert "error/bound 1e+04 in the baseline, not recorded in the candidate" in out, out


def test_a_strict_baseline_judges_a_lax_candidate_strictly(tmp_path, capsys):
    boundary = case("c2", "PASS", m=0, purpose="boundary")
    parity = case("c2", "BOUNDARY_PARITY", "eager ValueError: M <> compiled InductorError: M", m=0, purpose="boundary")
    baseline = report([case("c1", "PASS"), boundary], session={"strict_errors": True}, **BASE)
    candidate = report([case("c1", "PASS"), parity], session={"strict_errors": False}, **CAND)
    assert gate(tmp_path, baseline, candidate) == 1
    out = capsys.readouterr().out
    assert "regression: 1 case PASS -> BOUNDARY_PARITY" in out, out
    assert "judged strictly" in out and "capability gained" not in out
    # Both lax: tolerated, as before.
    lax = report([case("c1", "PASS"), boundary], session={"strict_errors": False}, **BASE)
    assert gate(tmp_path, lax, candidate) == 0, capsys.readouterr()


# -- a failing case the baseline never had ---------------------------------------------------------


OFF = "MISMATCH: compiled LoweringException: AssertionError: target"
# The same bug as OFF, worded as another release words it.
OLD_WORDS = "MISMATCH: compiled LoweringException: AssertionError: target of an older release"


def test_failing_case_missing_from_the_baseline_fails_the_gate(tmp_path, capsys):
    # It used to be a note: "only in the candidate fail (not gated: no baseline)".
    code = gate(
        tmp_path,
        report([case("c1", "PASS")], **BASE),
        report([case("c1", "PASS"), case("c2", "MISMATCH", OFF)], **CAND),
    )
    err = capsys.readouterr().out
    assert code == 1
    assert "1 case(s) fail in the candidate and have no record in the baseline, e.g. c2" in err


def test_case_failing_where_the_baseline_did_not_run_it_fails_the_gate(tmp_path, capsys):
    # UNSUPPORTED in the baseline, MISMATCH now: a failure the baseline did not have.
    code = gate(
        tmp_path,
        report([case("c1", "PASS"), case("c2", "UNSUPPORTED", "ValueError: no")], **BASE),
        report([case("c1", "PASS"), case("c2", "MISMATCH", OFF)], **CAND),
    )
    err = capsys.readouterr().out
    assert code == 1
    assert "1 case(s) ran for the first time and fail" in err and "c2" in err


# -- capability lost -------------------------------------------------------------------------------


def test_pass_becoming_unsupported_or_skipped_fails(tmp_path, capsys):
    candidate = report([case("c1", "PASS"), case("c2", "UNSUPPORTED", "ValueError: no"), case("c3", "SKIPPED")], **CAND)
    code = gate(tmp_path, report(three(), **BASE), candidate)
    err = capsys.readouterr().out
    assert code == 1
    assert (
        "capability lost: 2 case(s) ran in the baseline and are UNSUPPORTED or SKIPPED in the candidate (2 passed there), e.g. c2"
        in err
    )


def test_allow_capability_loss_turns_it_into_a_note(tmp_path, capsys):
    candidate = report([case("c1", "PASS"), case("c2", "SKIPPED"), case("c3", "PASS")], **CAND)
    assert gate(tmp_path, report(three(), **BASE), candidate, "--allow-capability-loss") == 0
    assert "note: accepted (--allow-capability-loss): capability lost: 1 case(s)" in capsys.readouterr().out


# -- the known-failure catalogue: recomputed, never trusted ----------------------------------------


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
    # that pass contradicts the entry, so its failure on 2.13 is a regression like the MISMATCH
    # no entry covers.
    args = ["gate", "--baseline", str(BASELINE), "--candidate", str(GATE / "candidate-torch213-regression.json")]
    assert main(args + ["--matrix", str(matrix)]) == 1
    out = capsys.readouterr().out
    assert "gate FAILED: 2 case(s)" in out and "w8a8-row_x_row" in out
    assert "regression: 1 case FIXED_UPSTREAM -> XFAIL" in out and "4d0e44" in out
    assert "the baseline's pass contradicts the entry" in out

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


def _self_declared_xfail(**extra):
    record = case("c3", "XFAIL", "MISMATCH: compiled LoweringException: AssertionError")
    record["known_failure"] = {"entry": 0, "signature": "MISMATCH", "original_outcome": "MISMATCH", **extra}
    return record


def test_candidate_labelling_its_own_failure_xfail_fails(tmp_path, capsys):
    # No catalogue anywhere says c3 is expected to fail: it is the regression it is.
    candidate = report(
        [case("c1", "PASS"), case("c2", "PASS"), _self_declared_xfail()],
        matrix_path=str(tmp_path / "gone.yaml"),
        **CAND,
    )
    code = gate(tmp_path, report(three(), **BASE), candidate)
    captured = capsys.readouterr()
    assert code == 1
    assert "regression: 1 case PASS -> MISMATCH" in captured.out
    assert "note: no known-failure catalogue:" in captured.out


# Expects c3's LoweringException from torch 2.11 on.
CATALOGUE = [
    {"match": {"kernel": "aten_scaled_mm"}, "torch": ">=2.11", "signature": "LoweringException: AssertionError"}
]


def test_catalogue_of_the_named_matrix_applies_only_when_its_hash_matches(tmp_path, capsys):
    matrix = catalogue_matrix(tmp_path / "matrix.yaml", CATALOGUE)
    digest = load_spec(matrix).digest
    candidate_cases = [case("c1", "PASS"), case("c2", "PASS"), _self_declared_xfail()]
    # The matrix the candidate ran, unchanged: the catalogue makes c3's failure, in the baseline's
    # words and the candidate's, the one known failure.
    same = report(candidate_cases, matrix_path=str(matrix), matrix_hash=digest, **CAND)
    base = three("MISMATCH", "MISMATCH: compiled LoweringException: AssertionError")
    expected = "note: 1 case(s) fail as in the baseline, as known-failure entries expect, e.g. c3"
    assert gate(tmp_path, report(base, matrix_path=str(matrix), matrix_hash=digest, **BASE), same) == 0
    assert expected in capsys.readouterr().out
    # Another matrix file under that name (its hash differs): no catalogue; c3 fails as before.
    other = report(candidate_cases, matrix_path=str(matrix), matrix_hash="ffffffffffffffff", **CAND)
    assert gate(tmp_path, report(base, **BASE), other) == 0
    out = capsys.readouterr().out
    assert expected not in out
    assert f"note: no known-failure catalogue: {matrix} has changed since the candidate ran" in out
    # Given explicitly with --matrix, it applies: the user chose it.
    assert gate(tmp_path, report(base, **BASE), other, "--matrix", str(matrix)) == 0
    assert expected in capsys.readouterr().out


def test_catalogue_is_reapplied_to_the_baseline_too(tmp_path, capsys):
    # The baseline's XFAIL is restored to its MISMATCH: the same MISMATCH now is no news, and a
    # candidate that passes is a fix, not a regression from "XFAIL".
    base_xfail = _self_declared_xfail()
    baseline = report([case("c1", "PASS"), case("c2", "PASS"), base_xfail], **BASE)
    candidate = report(three("MISMATCH", "MISMATCH: compiled LoweringException: AssertionError"), **CAND)
    assert gate(tmp_path, baseline, candidate) == 0


def _xfail(cid, original="MISMATCH", signature=OFF, entry=0):
    record = case(cid, "XFAIL", signature)
    record["known_failure"] = {
        "entry": entry,
        "signature": "LoweringException: AssertionError",
        "original_outcome": original,
    }
    return record


def _pass_then_off(tmp_path, matrix) -> int:
    """The gate on c1 passing in the baseline and failing with OFF in the candidate, with the
    catalogue of `matrix`."""
    return gate(
        tmp_path,
        report([case("c1", "PASS")], **BASE),
        report([case("c1", "MISMATCH", OFF)], **CAND),
        "--matrix",
        str(matrix),
    )


def test_catch_all_signature_given_to_the_gate_is_exit_2(tmp_path, capsys):
    matrix = catalogue_matrix(tmp_path / "matrix.yaml", [{"match": {"kernel": "aten_scaled_mm"}, "signature": " "}])
    code = _pass_then_off(tmp_path, matrix)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "known_failures[0].signature" in err


@pytest.mark.parametrize("torch, before", [(">=2.13", "PASS"), (">=2.11", "FIXED_UPSTREAM"), (None, "FIXED_UPSTREAM")])
def test_pass_becoming_a_known_failure_is_a_regression_whatever_the_entry_covers(tmp_path, capsys, torch, before):
    # The baseline passed: whether the entry's range leaves its torch out (PASS there) or covers it
    # (its pass read "fixed upstream"), that pass contradicts the entry, and a new bug of the
    # candidate's release with the entry's signature would otherwise be gated green.
    entry = {"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}
    matrix = catalogue_matrix(tmp_path / "matrix.yaml", [{**entry, "torch": torch} if torch else entry])
    code = _pass_then_off(tmp_path, matrix)
    out = capsys.readouterr().out
    assert code == 1 and f"regression: 1 case {before} -> XFAIL" in out
    assert "known failure" not in out.split("note:")[0].splitlines()[0]


def test_a_known_failure_the_baseline_had_too_is_excused(tmp_path, capsys):
    matrix = catalogue_matrix(
        tmp_path / "matrix.yaml",
        [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}],
    )
    code = gate(
        tmp_path,
        report([case("c1", "MISMATCH", OFF), case("c2", "PASS")], **BASE),
        report([case("c1", "MISMATCH", OFF), case("c2", "PASS")], **CAND),
        "--matrix",
        str(matrix),
    )
    assert code == 0 and "gate passed" in capsys.readouterr().out


def test_candidate_cannot_choose_its_catalogue_by_naming_another_matrix(tmp_path, capsys):
    # The candidate names a lenient matrix (path and matching hash) that the baseline never ran.
    lenient = catalogue_matrix(
        tmp_path / "lenient.yaml",
        [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}],
    )
    digest = load_spec(lenient).digest
    baseline = report(
        [case("c1", "PASS"), case("c2", "PASS")],
        matrix_path=str(tmp_path / "strict.yaml"),
        matrix_hash="a" * 16,
        **BASE,
    )
    candidate = report([case("c1", "PASS"), _xfail("c2")], matrix_path=str(lenient), matrix_hash=digest, **CAND)
    code = gate(tmp_path, baseline, candidate)
    err = capsys.readouterr().out
    assert code == 1
    assert "regression: 1 case PASS -> MISMATCH" in err
    assert "note: no known-failure catalogue:" in err and "the baseline" in err


def test_candidate_matrix_named_by_both_reports_is_the_catalogue(tmp_path, capsys):
    matrix = catalogue_matrix(
        tmp_path / "matrix.yaml",
        [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}],
    )
    digest = load_spec(matrix).digest
    same = dict(matrix_path=str(matrix), matrix_hash=digest)
    # The baseline failed as the entry predicts: the candidate's failure is the known one.
    baseline = report([case("c1", "PASS"), case("c2", "MISMATCH", OFF)], **same, **BASE)
    candidate = report([case("c1", "PASS"), _xfail("c2")], **same, **CAND)
    assert gate(tmp_path, baseline, candidate) == 0
    out = capsys.readouterr().out
    assert "gate passed" in out and "1 case(s) fail as in the baseline, as known-failure entries expect" in out
    # The same failure worded anew is another failure, catalogue or not.
    reworded = report([case("c1", "PASS"), case("c2", "MISMATCH", OLD_WORDS)], **same, **BASE)
    assert gate(tmp_path, reworded, candidate) == 1
    assert "signature changed: 1 case" in capsys.readouterr().out


@pytest.mark.parametrize("params", [[1, 2], None, "x"])
def test_malformed_params_with_a_catalogue_is_exit_2(tmp_path, capsys, params):
    matrix = catalogue_matrix(
        tmp_path / "matrix.yaml",
        [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}],
    )
    bad = report([case("c1", "MISMATCH", OFF)], **CAND)
    bad["cases"][0]["params"] = params
    assert gate(tmp_path, report([case("c1", "MISMATCH", OFF)], **BASE), bad, "--matrix", str(matrix)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cases[0].params" in err


def test_signature_that_is_not_text_with_a_catalogue_is_exit_2(tmp_path, capsys):
    matrix = catalogue_matrix(
        tmp_path / "matrix.yaml",
        [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}],
    )
    bad = report([case("c1", "MISMATCH", OFF)], **CAND)
    bad["cases"][0]["signature"] = 5
    assert gate(tmp_path, report([case("c1", "MISMATCH", OFF)], **BASE), bad, "--matrix", str(matrix)) == 2
    assert "cases[0].signature" in capsys.readouterr().err


@pytest.mark.parametrize(
    "signature",
    [
        "values off the reference",
        "eager+compiled",
        "InductorError",
        "MISMATCH: eager+compiled values off the reference by one constant factor",
    ],
)
def test_a_known_failure_made_of_harness_words_is_a_usage_error(tmp_path, capsys, signature):
    with pytest.raises(MatrixError, match=r"known_failures\[0\]\.signature.*(names no root cause|the harness writes)"):
        Catalogue.from_entries([{"match": {"kernel": "my_fp8"}, "signature": signature}], tmp_path / "matrix.yaml")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        matrix_text(
            ["aten_scaled_mm"], known_failures=[{"match": {"kernel": "aten_scaled_mm"}, "signature": signature}]
        )
    )
    baseline = report([case("c1", "PASS")], **BASE)
    candidate = report([case("c1", "MISMATCH", BAND)], **CAND)
    assert gate(tmp_path, baseline, candidate, "--matrix", str(matrix)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "known_failures[0].signature" in err and "matrix.yaml" in err


def test_a_pass_that_fails_under_the_same_torch_release_is_never_known(tmp_path, capsys):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        matrix_text(
            ["aten_scaled_mm"],
            known_failures=[
                {"match": {"kernel": "aten_scaled_mm"}, "signature": "RuntimeError: scale must be contiguous"}
            ],
        )
    )
    signature = "COMPILE_ONLY_ERROR: RuntimeError: scale must be contiguous"
    baseline = report([case("c1", "PASS"), case("c2", "PASS")], torch="2.13.0")
    candidate = report([case("c1", "PASS"), case("c2", "COMPILE_ONLY_ERROR", signature)], torch="2.13.0+cu128")
    assert gate(tmp_path, baseline, candidate, "--matrix", str(matrix)) == 1
    out = capsys.readouterr().out
    assert "regression: 1 case" in out and "(case c2))" in out and "same torch release (2.13.0)" in out, out
    # Another release: the baseline's pass contradicts the entry all the same.
    assert (
        gate(
            tmp_path,
            report([case("c1", "PASS"), case("c2", "PASS")], **BASE),
            report([case("c1", "PASS"), case("c2", "COMPILE_ONLY_ERROR", signature)], **CAND),
            "--matrix",
            str(matrix),
        )
        == 1
    )
    assert "the baseline's pass contradicts the entry" in capsys.readouterr().out


# -- the same gate inside pytest -------------------------------------------------------------------


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


def test_baseline_option_keeps_exit_1_for_a_failure_the_baseline_lacks(matrix_project):
    # The baseline ran one kernel; the candidate adds a failing one. pytest used to exit 0 and
    # say "every failing case failed the same way in the baseline".
    matrix_project.write_matrix(matrix_text([planted("a", "correct")]))
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "baseline.json").assert_outcomes(passed=1)
    matrix_project.write_matrix(matrix_text([planted("a", "correct"), planted("b", "ignores_scale_b")]))
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "now.json", "--scaledmm-baseline", "baseline.json"
    )
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "every failing case failed the same way" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["gate FAILED*", "*1 case(s) fail in the candidate and have no record in the baseline*"]
    )


def test_baseline_option_keeps_exit_1_for_a_case_the_baseline_refused(matrix_project):
    # UNSUPPORTED in the baseline (the kernel declared M >= 8), MISMATCH now: it used to exit 0.
    matrix_project.write_matrix(matrix_text([planted("k", "refuses_everywhere", min_m=8)]))
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "baseline.json").assert_outcomes(
        skipped=1
    )
    matrix_project.write_matrix(matrix_text([planted("k", "ignores_scale_b")]))
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "now.json", "--scaledmm-baseline", "baseline.json"
    )
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "every failing case failed the same way" not in result.stdout.str()


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
