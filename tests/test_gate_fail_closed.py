"""The gate fails closed: a comparison that proves less than it seems to is a failed gate.

Each test here is a route by which the gate used to exit 0 without having compared what it
claims (a partial candidate, lost capability, self-declared expected failures, duplicate ids).
"""

import textwrap

from reports_factory import case, report, write

from pytest_scaledmm.cli import main
from pytest_scaledmm.matrix.spec import load_spec
from pytest_scaledmm.reports.gate import check
from pytest_scaledmm.reports.report import load_report


def _gate(tmp_path, baseline, candidate, *extra):
    b = write(tmp_path / "baseline.json", baseline)
    c = write(tmp_path / "candidate.json", candidate)
    return main(["gate", "--baseline", str(b), "--candidate", str(c), *extra])


def _three(outcome_of_c3="PASS", signature=None):
    return [case("c1", "PASS"), case("c2", "PASS"), case("c3", outcome_of_c3, signature)]


BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")


# -- incomplete candidates ------------------------------------------------------------------------


def test_candidate_lacking_baseline_cases_fails(tmp_path, capsys):
    # A one-case report against a three-case baseline used to pass: removed cases were a note.
    code = _gate(tmp_path, report(_three(), **BASE), report([case("c1", "PASS")], **CAND))
    err = capsys.readouterr().out
    assert code == 1
    assert "2 case(s) of the baseline are missing from the candidate (2 of them passed there), e.g. c2" in err


def test_allow_missing_accepts_a_partial_candidate_and_says_what_it_skipped(tmp_path, capsys):
    code = _gate(tmp_path, report(_three(), **BASE), report([case("c1", "PASS")], **CAND), "--allow-missing")
    out = capsys.readouterr().out
    assert code == 0
    assert "note: skipped (--allow-missing): 2 case(s) of the baseline are missing from the candidate" in out


def test_allow_missing_still_fails_a_new_failure(tmp_path, capsys):
    candidate = report(
        [case("c1", "MISMATCH", "MISMATCH: off")], session={"complete": False, "incomplete_reasons": ["-k"]}, **CAND
    )
    assert _gate(tmp_path, report(_three(), **BASE), candidate, "--allow-missing") == 1
    assert "regression: 1 case PASS -> MISMATCH" in capsys.readouterr().out


def test_incomplete_candidate_fails_with_its_reason(tmp_path, capsys):
    # Every baseline id is there, but the run says it did not finish (a -k subset rerun, Ctrl-C).
    candidate = report(
        _three(), session={"complete": False, "incomplete_reasons": ["interrupted (KeyboardInterrupt)"]}, **CAND
    )
    code = _gate(tmp_path, report(_three(), **BASE), candidate)
    err = capsys.readouterr().out
    assert code == 1
    assert "the candidate run is incomplete: interrupted (KeyboardInterrupt)" in err


def test_candidate_with_fewer_records_than_generated_is_incomplete(tmp_path, capsys):
    # A report that says complete but holds fewer records than it generated is not complete.
    candidate = report(_three(), session={"generated": 5}, **CAND)
    assert _gate(tmp_path, report(_three(), **BASE), candidate) == 1
    assert "the candidate run is incomplete: 3 of 5 generated case(s) have a record" in capsys.readouterr().out


def test_incomplete_baseline_fails_unless_allowed(tmp_path, capsys):
    baseline = report(
        _three(),
        session={"complete": False, "incomplete_reasons": ["stopped early: stopping after 1 failures"]},
        **BASE,
    )
    assert _gate(tmp_path, baseline, report(_three(), **CAND)) == 1
    assert "the baseline run is incomplete: stopped early" in capsys.readouterr().out
    assert _gate(tmp_path, baseline, report(_three(), **CAND), "--allow-missing") == 0


def test_candidate_without_cases_fails_even_with_allow_missing(tmp_path, capsys):
    assert _gate(tmp_path, report(_three(), **BASE), report([], **CAND), "--allow-missing") == 1
    assert "the candidate has no cases" in capsys.readouterr().out


# -- capability lost ------------------------------------------------------------------------------


def test_pass_becoming_unsupported_or_skipped_fails(tmp_path, capsys):
    candidate = report([case("c1", "PASS"), case("c2", "UNSUPPORTED", "ValueError: no"), case("c3", "SKIPPED")], **CAND)
    code = _gate(tmp_path, report(_three(), **BASE), candidate)
    err = capsys.readouterr().out
    assert code == 1
    assert (
        "capability lost: 2 case(s) ran in the baseline and are UNSUPPORTED or SKIPPED in the candidate (2 passed there), e.g. c2"
        in err
    )


def test_allow_capability_loss_turns_it_into_a_note(tmp_path, capsys):
    candidate = report([case("c1", "PASS"), case("c2", "SKIPPED"), case("c3", "PASS")], **CAND)
    assert _gate(tmp_path, report(_three(), **BASE), candidate, "--allow-capability-loss") == 0
    assert "note: accepted (--allow-capability-loss): capability lost: 1 case(s)" in capsys.readouterr().out


# -- expected failures are recomputed, never trusted ----------------------------------------------


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
    code = _gate(tmp_path, report(_three(), **BASE), candidate)
    captured = capsys.readouterr()
    assert code == 1
    assert "regression: 1 case PASS -> MISMATCH" in captured.out
    assert "note: no known-failure catalogue:" in captured.out


def test_xfail_without_its_original_outcome_fails(tmp_path, capsys):
    bare = case("c3", "XFAIL", "MISMATCH: x")
    candidate = report([case("c1", "PASS"), case("c2", "PASS"), bare], **CAND)
    assert _gate(tmp_path, report(_three(), **BASE), candidate) == 1
    assert "candidate: 1 case(s) XFAIL without its original outcome, e.g. c3" in capsys.readouterr().out


CATALOGUE_MATRIX = """\
    version: 1
    kernels: [aten_scaled_mm]
    axes: {mode: [inductor]}
    profiles: {default: {cases: 2}}
    known_failures:
      - match: {kernel: aten_scaled_mm}
        torch: ">=2.11"
        signature: "LoweringException: AssertionError"
    """


def test_catalogue_of_the_named_matrix_applies_only_when_its_hash_matches(tmp_path, capsys):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(textwrap.dedent(CATALOGUE_MATRIX))
    digest = load_spec(matrix).digest
    candidate_cases = [case("c1", "PASS"), case("c2", "PASS"), _self_declared_xfail()]
    # The matrix the candidate ran, unchanged: the catalogue makes c3 expected.
    same = report(candidate_cases, matrix_path=str(matrix), matrix_hash=digest, **CAND)
    assert _gate(tmp_path, report(_three(), matrix_path=str(matrix), matrix_hash=digest, **BASE), same) == 0
    assert "1 case(s) known failure" in capsys.readouterr().out
    # Another matrix file under that name (its hash differs): no catalogue, c3 regresses.
    other = report(candidate_cases, matrix_path=str(matrix), matrix_hash="ffffffffffffffff", **CAND)
    assert _gate(tmp_path, report(_three(), **BASE), other) == 1
    err = capsys.readouterr().out
    assert "regression: 1 case PASS -> MISMATCH" in err
    assert f"note: no known-failure catalogue: {matrix} has changed since the candidate ran" in err
    # Given explicitly with --matrix, it applies: the user chose it.
    assert _gate(tmp_path, report(_three(), **BASE), other, "--matrix", str(matrix)) == 0


def test_catalogue_is_reapplied_to_the_baseline_too(tmp_path, capsys):
    # The baseline's XFAIL is restored to its MISMATCH: the same MISMATCH now is no news, and a
    # candidate that passes is a fix, not a regression from "XFAIL".
    base_xfail = _self_declared_xfail()
    baseline = report([case("c1", "PASS"), case("c2", "PASS"), base_xfail], **BASE)
    candidate = report(_three("MISMATCH", "MISMATCH: compiled LoweringException: AssertionError"), **CAND)
    assert _gate(tmp_path, baseline, candidate) == 0


# -- duplicate ids --------------------------------------------------------------------------------


def test_duplicate_ids_fail_the_gate(tmp_path, capsys):
    # The failing record first, the passing one last: the last used to win.
    candidate = report(_three() + [case("c2", "MISMATCH", "MISMATCH: off")], **CAND)
    candidate["cases"].sort(key=lambda c: (c["id"], c["outcome"] == "PASS"))
    code = _gate(tmp_path, report(_three(), **BASE), candidate)
    err = capsys.readouterr().out
    assert code == 1
    assert "candidate: 1 case id(s) appear more than once, e.g. c2 (2 records)" in err


def test_load_report_keeps_duplicates_for_the_gate(tmp_path):
    path = write(tmp_path / "r.json", report([case("c1", "PASS"), case("c1", "MISMATCH", "MISMATCH: x")]))
    data = load_report(path)
    assert [c["outcome"] for c in data["cases"]] == ["PASS", "MISMATCH"]
    result = check((path, data), (path, load_report(path)))
    assert any("baseline: 1 case id(s) appear more than once" in r for r in result.reasons)
    assert any("candidate: 1 case id(s) appear more than once" in r for r in result.reasons)
