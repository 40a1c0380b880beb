"""Routes by which a run, its report or the gate said more than they could show, found by a
hostile review: a catch-all known failure, a failing case the baseline never had, a stale report
left by a killed or refused rerun, runs held to other bounds, nothing checked, edited or malformed
reports, a report path that is not a file or stops being writable, a report gated against itself.

Report-only routes call the console script's `main` on reports built by reports_factory; routes
through a run use pytester on one- or two-case matrices, in-process without triage.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import textwrap

import pytest
from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.known_failures import Catalogue
from pytest_scaledmm.matrix.spec import load_spec
from pytest_scaledmm.reports import report as report_module
from pytest_scaledmm.reports.gate import check

BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")
OFF = "MISMATCH: compiled LoweringException: AssertionError: target"
IN_PROGRESS = "run in progress or killed before it wrote its report"


def _gate(tmp_path, baseline, candidate, *extra):
    b = write(tmp_path / "baseline.json", baseline)
    c = write(tmp_path / "candidate.json", candidate)
    return main(["gate", "--baseline", str(b), "--candidate", str(c), *extra])


def _matrix(tmp_path, entries, name="matrix.yaml"):
    path = tmp_path / name
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            kernels: [aten_scaled_mm]
            axes: {mode: [inductor]}
            profiles: {default: {cases: 1}}
            """
        )
        + "known_failures:\n"
        + "".join(f"  - {json.dumps(entry)}\n" for entry in entries)
    )
    return path


def _xfail(cid, original="MISMATCH", signature=OFF, entry=0):
    record = case(cid, "XFAIL", signature)
    record["known_failure"] = {
        "entry": entry,
        "signature": "LoweringException: AssertionError",
        "original_outcome": original,
    }
    return record


# -- A. catch-all known failures ---------------------------------------------------------------


@pytest.mark.parametrize("signature", [" ", "M", "MISM", "dim()=2"])
def test_catch_all_signature_is_a_matrix_error_naming_file_and_key(tmp_path, signature):
    # Each normalises to fewer than 8 characters and matched every failure of its kind.
    path = _matrix(tmp_path, [{"match": {"mode": "aot_eager"}, "signature": signature}])
    with pytest.raises(MatrixError) as excinfo:
        Catalogue.from_spec(load_spec(path))
    assert excinfo.value.key == "known_failures[0].signature"
    assert str(path) in str(excinfo.value)


def test_meaningful_signature_is_accepted(tmp_path):
    path = _matrix(tmp_path, [{"match": {"mode": "aot_eager"}, "signature": "LoweringException: AssertionError"}])
    assert len(Catalogue.from_spec(load_spec(path)).entries) == 1


@pytest.mark.parametrize("signature", ["MISMATCH", "ERROR_PARITY:", "  COMPILE_ONLY_ERROR :  x"])
def test_a_signature_that_names_only_its_outcome_class_is_refused(tmp_path, signature):
    # "MISMATCH" is in every MISMATCH signature: as an entry it excused any wrong result.
    path = _matrix(tmp_path, [{"match": {"mode": "aot_eager"}, "signature": signature}])
    with pytest.raises(MatrixError, match=r"known_failures\[0\]\.signature"):
        Catalogue.from_spec(load_spec(path))


def test_catch_all_signature_stops_the_run_before_any_case(matrix_project):
    # It used to turn the MISMATCH into XFAIL: pytest exited 0.
    entry = {"match": {"mode": "aot_eager"}, "signature": "M"}
    matrix_project.write_matrix(matrix_text([planted("ignores_scale_b")], known_failures=[entry]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "matrix.yaml" in errors[0] and "known_failures[0].signature" in errors[0], errors
    assert "xfailed" not in result.stdout.str() and "Traceback" not in result.stderr.str()


def test_catch_all_signature_given_to_the_gate_is_exit_2(tmp_path, capsys):
    matrix = _matrix(tmp_path, [{"match": {"kernel": "aten_scaled_mm"}, "signature": " "}])
    code = _gate(
        tmp_path,
        report([case("c1", "PASS")], **BASE),
        report([case("c1", "MISMATCH", OFF)], **CAND),
        "--matrix",
        str(matrix),
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "known_failures[0].signature" in err


@pytest.mark.parametrize("torch, passes", [(">=2.13", False), (">=2.11", True)])
def test_pass_becoming_a_known_failure_is_a_regression_unless_the_entry_covered_the_baseline(
    tmp_path, capsys, torch, passes
):
    # The entry's range leaves out the baseline's torch: the baseline passed and nothing said it
    # might fail there, so PASS -> XFAIL is a new failure (it used to be a note). An entry that
    # covered the baseline too (its pass there was "fixed upstream") keeps it a known failure.
    matrix = _matrix(
        tmp_path,
        [{"match": {"kernel": "aten_scaled_mm"}, "torch": torch, "signature": "LoweringException: AssertionError"}],
    )
    code = _gate(
        tmp_path,
        report([case("c1", "PASS")], **BASE),
        report([case("c1", "MISMATCH", OFF)], **CAND),
        "--matrix",
        str(matrix),
    )
    captured = capsys.readouterr()
    if passes:
        assert code == 0 and "1 case(s) known failure" in captured.out
    else:
        assert code == 1
        assert "regression: 1 case PASS -> XFAIL" in captured.out


def test_candidate_cannot_choose_its_catalogue_by_naming_another_matrix(tmp_path, capsys):
    # The candidate names a lenient matrix (path and matching hash) that the baseline never ran.
    lenient = _matrix(
        tmp_path,
        [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}],
        "lenient.yaml",
    )
    digest = load_spec(lenient).digest
    baseline = report(
        [case("c1", "PASS"), case("c2", "PASS")],
        matrix_path=str(tmp_path / "strict.yaml"),
        matrix_hash="a" * 16,
        **BASE,
    )
    candidate = report([case("c1", "PASS"), _xfail("c2")], matrix_path=str(lenient), matrix_hash=digest, **CAND)
    code = _gate(tmp_path, baseline, candidate)
    err = capsys.readouterr().out
    assert code == 1
    assert "regression: 1 case PASS -> MISMATCH" in err
    assert "note: no known-failure catalogue:" in err and "the baseline" in err


def test_candidate_matrix_named_by_both_reports_is_the_catalogue(tmp_path, capsys):
    matrix = _matrix(
        tmp_path, [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}]
    )
    digest = load_spec(matrix).digest
    same = dict(matrix_path=str(matrix), matrix_hash=digest)
    baseline = report([case("c1", "PASS"), case("c2", "PASS")], **same, **BASE)
    candidate = report([case("c1", "PASS"), _xfail("c2")], **same, **CAND)
    assert _gate(tmp_path, baseline, candidate) == 0
    assert "1 case(s) known failure" in capsys.readouterr().out


# -- B. a failing case the baseline never had -----------------------------------------------------


def test_failing_case_missing_from_the_baseline_fails_the_gate(tmp_path, capsys):
    # It used to be a note: "only in the candidate fail (not gated: no baseline)".
    code = _gate(
        tmp_path,
        report([case("c1", "PASS")], **BASE),
        report([case("c1", "PASS"), case("c2", "MISMATCH", OFF)], **CAND),
    )
    err = capsys.readouterr().out
    assert code == 1
    assert "1 case(s) fail in the candidate and have no record in the baseline, e.g. c2" in err


def test_case_failing_where_the_baseline_did_not_run_it_fails_the_gate(tmp_path, capsys):
    # UNSUPPORTED in the baseline, MISMATCH now: a failure the baseline did not have.
    code = _gate(
        tmp_path,
        report([case("c1", "PASS"), case("c2", "UNSUPPORTED", "ValueError: no")], **BASE),
        report([case("c1", "PASS"), case("c2", "MISMATCH", OFF)], **CAND),
    )
    err = capsys.readouterr().out
    assert code == 1
    assert "1 case(s) ran for the first time and fail" in err and "c2" in err


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


# -- C. a stale report at the path -----------------------------------------------------------------

ONE_CASE = matrix_text([planted("correct")])


def _complete_run(matrix_project) -> bytes:
    matrix_project.write_matrix(ONE_CASE)
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json").assert_outcomes(passed=1)
    first = matrix_project.path / "report.json"
    assert json.loads(first.read_text())["session"]["complete"] is True
    return first.read_bytes()


def _assert_not_complete_and_previous_kept(matrix_project, old: bytes, reason=None):
    session = matrix_project.report()["session"]
    assert session["complete"] is False, session
    if reason:
        assert session["incomplete_reasons"] == [reason]
    assert (matrix_project.path / "report.previous.json").read_bytes() == old


def test_killed_rerun_leaves_no_complete_looking_report(matrix_project, pytester, capsys):
    # SIGKILL in the first case of a rerun: the earlier complete report used to stay, byte for
    # byte, and the gate passed on it.
    old = _complete_run(matrix_project)
    pytester.makeconftest(
        """
        import os, signal
        def pytest_runtest_call(item):
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", timeout=300
    )
    assert result.ret == -signal.SIGKILL
    _assert_not_complete_and_previous_kept(matrix_project, old, IN_PROGRESS)
    capsys.readouterr()
    path = str(matrix_project.path / "report.json")
    previous = str(matrix_project.path / "report.previous.json")
    assert main(["gate", "--baseline", previous, "--candidate", path]) == 1
    assert "the candidate run is incomplete: " + IN_PROGRESS in capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ["--scaledmm-profile", "no-such-profile"],  # a matrix error, after the options are read
        ["--scaledmm-timeout=nan"],  # an option error, before the report path is resolved
    ],
)
def test_usage_error_leaves_no_complete_looking_report(matrix_project, args):
    old = _complete_run(matrix_project)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _assert_not_complete_and_previous_kept(matrix_project, old)


def test_an_unfinished_report_never_replaces_the_previous_one(matrix_project):
    old = _complete_run(matrix_project)
    for _ in range(2):  # the second refused run finds the first one's unfinished report
        result = matrix_project.run(
            *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", "--scaledmm-profile", "nope"
        )
        assert result.ret == pytest.ExitCode.USAGE_ERROR
    _assert_not_complete_and_previous_kept(matrix_project, old)


def test_baseline_at_the_report_path_is_read_before_the_path_is_claimed(matrix_project):
    # `--scaledmm-baseline report.json --scaledmm-report report.json`: gate against the last run.
    old = _complete_run(matrix_project)
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json", "--scaledmm-baseline", "report.json"
    )
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gate passed*"])
    assert (matrix_project.path / "report.previous.json").read_bytes() == old
    assert matrix_project.report()["session"]["complete"] is True


# -- D. runs held to different bounds --------------------------------------------------------------


def _bounded(record, slack):
    record["errors"] = {side: {"ok": True, "ratio": 0.01, "bound": {"slack": slack}} for side in ("eager", "compiled")}
    return record


def test_runs_held_to_different_record_bounds_are_not_proven(tmp_path, capsys):
    # slack 1e30 lets an all-zeros kernel pass; the records say which bound each was held to.
    baseline = report([_bounded(case("c1", "PASS"), 1.0), _bounded(case("c2", "PASS"), 1.0)], **BASE)
    candidate = report([_bounded(case("c1", "PASS"), 1.0e30), _bounded(case("c2", "PASS"), 1.0e30)], **CAND)
    assert _gate(tmp_path, baseline, candidate) == 1
    err = capsys.readouterr().out
    assert "not proven: the two runs were held to different bounds" in err and "2 case(s)" in err


def test_runs_with_different_matrix_tolerance_are_not_proven(tmp_path, capsys):
    baseline = report([case("c1", "PASS")], **BASE)
    candidate = report([case("c1", "PASS")], **CAND)
    baseline["matrix"]["tolerance"] = {"slack": 1.0}
    candidate["matrix"]["tolerance"] = {"slack": 1000.0}
    assert _gate(tmp_path, baseline, candidate) == 1
    assert "not proven: the two runs were held to different bounds" in capsys.readouterr().out


def test_same_bounds_pass(tmp_path):
    baseline = report([_bounded(case("c1", "PASS"), 1.0)], **BASE)
    candidate = report([_bounded(case("c1", "PASS"), 1.0)], **CAND)
    assert _gate(tmp_path, baseline, candidate) == 0


# -- E. nothing checked ---------------------------------------------------------------------------------


def test_nothing_run_and_checked_in_common_is_not_proven(tmp_path, capsys):
    cases = [case("c1", "UNSUPPORTED", "ValueError: no"), case("c2", "SKIPPED")]
    assert _gate(tmp_path, report(cases, **BASE), report(cases, **CAND)) == 1
    assert "not proven: no case in common was run and checked" in capsys.readouterr().out


# -- F. records edited against themselves ------------------------------------------------------------


def _failing_pair():
    return [case("c1", "PASS"), case("c2", "ERROR_PARITY", "eager ValueError <> compiled RuntimeError")]


def test_failure_edited_to_pass_fails_the_gate(tmp_path, capsys):
    edited = _failing_pair()
    edited[1]["outcome"] = "PASS"  # signature and error left: the record contradicts itself
    edited[1]["eager_error"] = {"type": "builtins.ValueError", "message": "bad", "root_type": "builtins.ValueError"}
    assert _gate(tmp_path, report(_failing_pair(), **BASE), report(edited, **CAND)) == 1
    assert "candidate: 1 passing record(s) carry a failure's signature or error, e.g. c2" in capsys.readouterr().out


def test_pass_with_only_an_error_fails_the_gate(tmp_path, capsys):
    edited = [case("c1", "PASS"), case("c2", "PASS")]
    edited[1]["compiled_error"] = {
        "type": "builtins.RuntimeError",
        "message": "x",
        "root_type": "builtins.RuntimeError",
    }
    assert _gate(tmp_path, report(_failing_pair(), **BASE), report(edited, **CAND)) == 1
    assert "passing record(s) carry a failure's signature or error, e.g. c2" in capsys.readouterr().out


def test_summary_that_disagrees_with_the_records_fails_the_gate(tmp_path, capsys):
    candidate = report([case("c1", "PASS"), case("c2", "PASS")], **CAND)
    candidate["summary"] = {"ERROR_PARITY": 1, "PASS": 1}  # the summary of the run before the edit
    assert _gate(tmp_path, report(_failing_pair(), **BASE), candidate) == 1
    assert "candidate: its summary does not match its records" in capsys.readouterr().out


def test_fixed_upstream_without_its_known_failure_fails_the_gate(tmp_path, capsys):
    # It used to be read as a PASS.
    candidate = report([case("c1", "PASS"), case("c2", "FIXED_UPSTREAM")], **CAND)
    assert _gate(tmp_path, report(_failing_pair(), **BASE), candidate) == 1
    assert "candidate: 1 case(s) FIXED_UPSTREAM without its original outcome, e.g. c2" in capsys.readouterr().out


# -- G. counts ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("generated", [float("nan"), True, 6.0, "6", 2.0])
def test_generated_that_is_not_a_whole_number_is_refused(tmp_path, capsys, generated):
    one = report([case("c1", "PASS")], session={"generated": generated}, **CAND)
    code = _gate(tmp_path, report([case("c1", "PASS")], **BASE), one)
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
    assert _gate(tmp_path, report([case("c1", "PASS")], **BASE), one) == 1
    assert expected in capsys.readouterr().out


# -- H. malformed reports --------------------------------------------------------------------------------


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


@pytest.mark.parametrize("params", [[1, 2], None, "x"])
def test_malformed_params_with_a_catalogue_is_exit_2(tmp_path, capsys, params):
    matrix = _matrix(
        tmp_path, [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}]
    )
    bad = report([case("c1", "MISMATCH", OFF)], **CAND)
    bad["cases"][0]["params"] = params
    assert _gate(tmp_path, report([case("c1", "MISMATCH", OFF)], **BASE), bad, "--matrix", str(matrix)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cases[0].params" in err


def test_signature_that_is_not_text_with_a_catalogue_is_exit_2(tmp_path, capsys):
    matrix = _matrix(
        tmp_path, [{"match": {"kernel": "aten_scaled_mm"}, "signature": "LoweringException: AssertionError"}]
    )
    bad = report([case("c1", "MISMATCH", OFF)], **CAND)
    bad["cases"][0]["signature"] = 5
    assert _gate(tmp_path, report([case("c1", "MISMATCH", OFF)], **BASE), bad, "--matrix", str(matrix)) == 2
    assert "cases[0].signature" in capsys.readouterr().err


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


# -- I. the report path ------------------------------------------------------------------------------------


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


# -- J. the same report twice ------------------------------------------------------------------------------


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
