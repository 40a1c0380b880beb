"""The gate fails closed: it passes only on proof, two complete runs of the same cases held to the
same bounds, records that agree with themselves and their counts, two reports and not one twice.
Anything less is a failed gate."""

import json
import math

import pytest
from reports_factory import BASE, CAND, case, gate, report, three, write

from pytest_scaledmm.cli import main
from pytest_scaledmm.reports.gate import check
from pytest_scaledmm.reports.report import load_report

# -- incomplete candidates and baselines -----------------------------------------------------------


def test_candidate_lacking_baseline_cases_fails(tmp_path, capsys):
    # A one-case report against a three-case baseline used to pass: removed cases were a note.
    code = gate(tmp_path, report(three(), **BASE), report([case("c1", "PASS")], **CAND))
    err = capsys.readouterr().out
    assert code == 1
    assert "2 case(s) of the baseline are missing from the candidate (2 of them passed there), e.g. c2" in err


def test_allow_missing_accepts_a_partial_candidate_and_says_what_it_skipped(tmp_path, capsys):
    code = gate(tmp_path, report(three(), **BASE), report([case("c1", "PASS")], **CAND), "--allow-missing")
    out = capsys.readouterr().out
    assert code == 0
    assert "note: skipped (--allow-missing): 2 case(s) of the baseline are missing from the candidate" in out


def test_allow_missing_still_fails_a_new_failure(tmp_path, capsys):
    candidate = report(
        [case("c1", "MISMATCH", "MISMATCH: off")], session={"complete": False, "incomplete_reasons": ["-k"]}, **CAND
    )
    assert gate(tmp_path, report(three(), **BASE), candidate, "--allow-missing") == 1
    assert "regression: 1 case PASS -> MISMATCH" in capsys.readouterr().out


def test_incomplete_candidate_fails_with_its_reason(tmp_path, capsys):
    # Every baseline id is there, but the run says it did not finish (a -k subset rerun, Ctrl-C).
    candidate = report(
        three(), session={"complete": False, "incomplete_reasons": ["interrupted (KeyboardInterrupt)"]}, **CAND
    )
    code = gate(tmp_path, report(three(), **BASE), candidate)
    err = capsys.readouterr().out
    assert code == 1
    assert "the candidate run is incomplete: interrupted (KeyboardInterrupt)" in err


def test_candidate_with_fewer_records_than_generated_is_incomplete(tmp_path, capsys):
    # A report that says complete but holds fewer records than it generated is not complete.
    candidate = report(three(), session={"generated": 5}, **CAND)
    assert gate(tmp_path, report(three(), **BASE), candidate) == 1
    assert "the candidate run is incomplete: 3 of 5 generated case(s) have a record" in capsys.readouterr().out


def test_incomplete_baseline_fails_unless_allowed(tmp_path, capsys):
    baseline = report(
        three(),
        session={"complete": False, "incomplete_reasons": ["stopped early: stopping after 1 failures"]},
        **BASE,
    )
    assert gate(tmp_path, baseline, report(three(), **CAND)) == 1
    assert "the baseline run is incomplete: stopped early" in capsys.readouterr().out
    assert gate(tmp_path, baseline, report(three(), **CAND), "--allow-missing") == 0


def test_candidate_without_cases_fails_even_with_allow_missing(tmp_path, capsys):
    assert gate(tmp_path, report(three(), **BASE), report([], **CAND), "--allow-missing") == 1
    assert "the candidate has no cases" in capsys.readouterr().out


# -- nothing checked in common ---------------------------------------------------------------------


def _load(path):
    return (path, load_report(path))


def test_reports_without_a_common_case_fail_the_gate(tmp_path):
    a = write(tmp_path / "a.json", report([case("x-1", "PASS")], torch="2.11.0"))
    b = write(tmp_path / "b.json", report([case("x-2", "PASS")], torch="2.13.0"))
    result = check(_load(a), _load(b))
    assert not result.passed and "no case in common" in result.reasons[0]


def test_nothing_run_and_checked_in_common_is_not_proven(tmp_path, capsys):
    cases = [case("c1", "UNSUPPORTED", "ValueError: no"), case("c2", "SKIPPED")]
    assert gate(tmp_path, report(cases, **BASE), report(cases, **CAND)) == 1
    assert "not proven: no case in common was run and checked" in capsys.readouterr().out


# -- runs held to different bounds -----------------------------------------------------------------


def _bounded(record, slack):
    record["errors"] = {side: {"ok": True, "ratio": 0.01, "bound": {"slack": slack}} for side in ("eager", "compiled")}
    return record


def test_runs_held_to_different_record_bounds_are_not_proven(tmp_path, capsys):
    # slack 1e30 lets an all-zeros kernel pass; the records say which bound each was held to.
    baseline = report([_bounded(case("c1", "PASS"), 1.0), _bounded(case("c2", "PASS"), 1.0)], **BASE)
    candidate = report([_bounded(case("c1", "PASS"), 1.0e30), _bounded(case("c2", "PASS"), 1.0e30)], **CAND)
    assert gate(tmp_path, baseline, candidate) == 1
    err = capsys.readouterr().out
    assert "not proven: the two runs were held to different bounds" in err and "2 case(s)" in err


def test_runs_with_different_matrix_tolerance_are_not_proven(tmp_path, capsys):
    baseline = report([case("c1", "PASS")], **BASE)
    candidate = report([case("c1", "PASS")], **CAND)
    baseline["matrix"]["tolerance"] = {"slack": 1.0}
    candidate["matrix"]["tolerance"] = {"slack": 1000.0}
    assert gate(tmp_path, baseline, candidate) == 1
    assert "not proven: the two runs were held to different bounds" in capsys.readouterr().out


def test_same_bounds_pass(tmp_path):
    baseline = report([_bounded(case("c1", "PASS"), 1.0)], **BASE)
    candidate = report([_bounded(case("c1", "PASS"), 1.0)], **CAND)
    assert gate(tmp_path, baseline, candidate) == 0


# -- records that contradict themselves ------------------------------------------------------------


def _failing_pair():
    return [case("c1", "PASS"), case("c2", "ERROR_PARITY", "eager ValueError <> compiled RuntimeError")]


def test_failure_edited_to_pass_fails_the_gate(tmp_path, capsys):
    edited = _failing_pair()
    edited[1]["outcome"] = "PASS"  # signature and error left: the record contradicts itself
    edited[1]["eager_error"] = {"type": "builtins.ValueError", "message": "bad", "root_type": "builtins.ValueError"}
    assert gate(tmp_path, report(_failing_pair(), **BASE), report(edited, **CAND)) == 1
    assert "candidate: 1 passing record(s) carry a failure's signature or error, e.g. c2" in capsys.readouterr().out


def test_pass_with_only_an_error_fails_the_gate(tmp_path, capsys):
    edited = [case("c1", "PASS"), case("c2", "PASS")]
    edited[1]["compiled_error"] = {
        "type": "builtins.RuntimeError",
        "message": "x",
        "root_type": "builtins.RuntimeError",
    }
    assert gate(tmp_path, report(_failing_pair(), **BASE), report(edited, **CAND)) == 1
    assert "passing record(s) carry a failure's signature or error, e.g. c2" in capsys.readouterr().out


def test_summary_that_disagrees_with_the_records_fails_the_gate(tmp_path, capsys):
    candidate = report([case("c1", "PASS"), case("c2", "PASS")], **CAND)
    candidate["summary"] = {"ERROR_PARITY": 1, "PASS": 1}  # the summary of the run before the edit
    assert gate(tmp_path, report(_failing_pair(), **BASE), candidate) == 1
    assert "candidate: its summary does not match its records" in capsys.readouterr().out


def test_fixed_upstream_without_its_known_failure_fails_the_gate(tmp_path, capsys):
    # It used to be read as a PASS.
    candidate = report([case("c1", "PASS"), case("c2", "FIXED_UPSTREAM")], **CAND)
    assert gate(tmp_path, report(_failing_pair(), **BASE), candidate) == 1
    assert "candidate: 1 case(s) FIXED_UPSTREAM without its original outcome, e.g. c2" in capsys.readouterr().out


def test_xfail_without_its_original_outcome_fails(tmp_path, capsys):
    bare = case("c3", "XFAIL", "MISMATCH: x")
    candidate = report([case("c1", "PASS"), case("c2", "PASS"), bare], **CAND)
    assert gate(tmp_path, report(three(), **BASE), candidate) == 1
    assert "candidate: 1 case(s) XFAIL without its original outcome, e.g. c3" in capsys.readouterr().out


# -- a PASS record without proof -------------------------------------------------------------------


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


@pytest.mark.parametrize("ratio", [6.7, math.nan])
def test_a_pass_with_a_ratio_over_one_fails_the_gate(tmp_path, capsys, ratio):
    code, err = _edited_pass(tmp_path, lambda r: r["errors"]["compiled"].update(ratio=ratio), capsys)
    assert code == 1 and "lack a passing check" in err, err


@pytest.mark.parametrize("counts", [{"off_elements": 3}, {"nonfinite": 1}])
def test_a_pass_whose_check_counts_elements_off_fails_the_gate(tmp_path, capsys, counts):
    # ok true, ratio 0.5, and yet elements off the bound or non-finite: an edited record.
    code, err = _edited_pass(tmp_path, lambda r: r["errors"]["eager"].update(elements=512, **counts), capsys)
    assert code == 1 and "1 passing record(s) lack a passing check" in err, err


@pytest.mark.parametrize("ratio", ["0.5", None, [0.5]])
def test_a_ratio_that_is_not_a_number_is_refused_when_read(tmp_path, capsys, ratio):
    base = report([case("a", "PASS"), case("b", "PASS")], **BASE)
    cand = report([case("a", "PASS"), case("b", "PASS")], **CAND)
    cand["cases"][1]["errors"]["compiled"]["ratio"] = ratio
    assert gate(tmp_path, base, cand) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "candidate.json: key 'cases[1].errors.compiled.ratio'" in err, err


def test_unedited_passes_still_pass(tmp_path, capsys):
    code, err = _edited_pass(tmp_path, lambda r: None, capsys)
    assert code == 0, err


# -- counts ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("generated", [float("nan"), True, 6.0, "6", 2.0])
def test_generated_that_is_not_a_whole_number_is_refused(tmp_path, capsys, generated):
    one = report([case("c1", "PASS")], session={"generated": generated}, **CAND)
    code = gate(tmp_path, report([case("c1", "PASS")], **BASE), one)
    err = capsys.readouterr().err
    assert code == 2 and "session.generated" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "session, expected",
    [
        ({"generated": None}, "does not say how many cases it generated"),
        ({"recorded": 3}, "the counts disagree"),
        ({"generated": 1, "recorded": 0}, "the counts disagree"),
    ],
)
def test_counts_must_agree_with_the_records(tmp_path, capsys, session, expected):
    one = report([case("c1", "PASS")], **CAND)
    for key, value in session.items():
        if value is None:
            del one["session"][key]
        else:
            one["session"][key] = value
    assert gate(tmp_path, report([case("c1", "PASS")], **BASE), one) == 1
    assert expected in capsys.readouterr().out


# -- duplicate ids ---------------------------------------------------------------------------------


def test_duplicate_ids_fail_the_gate(tmp_path, capsys):
    # The failing record first, the passing one last: the last used to win.
    candidate = report(three() + [case("c2", "MISMATCH", "MISMATCH: off")], **CAND)
    candidate["cases"].sort(key=lambda c: (c["id"], c["outcome"] == "PASS"))
    code = gate(tmp_path, report(three(), **BASE), candidate)
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


# -- the same report twice -------------------------------------------------------------------------


def test_same_report_path_twice_fails(tmp_path, capsys):
    path = write(tmp_path / "r.json", report([case("c1", "PASS")]))
    assert main(["gate", "--baseline", str(path), "--candidate", str(tmp_path / "." / "r.json")]) == 1
    assert "baseline and candidate are the same report" in capsys.readouterr().out


def test_byte_identical_copies_fail(tmp_path, capsys):
    path = write(tmp_path / "r.json", report([case("c1", "PASS")]))
    copy = tmp_path / "copy.json"
    copy.write_bytes(path.read_bytes())
    assert main(["gate", "--baseline", str(path), "--candidate", str(copy)]) == 1
    assert "baseline and candidate are the same report" in capsys.readouterr().out


def test_same_report_reason_comes_from_the_gate_itself(tmp_path):
    data = report([case("c1", "PASS")])
    result = check((tmp_path / "a.json", data), (tmp_path / "b.json", json.loads(json.dumps(data))))
    assert not result.passed and any("the same report" in r for r in result.reasons)
