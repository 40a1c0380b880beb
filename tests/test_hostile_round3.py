"""Routes found by a third hostile review: a gate talked into green (a failure grown worse, a
catch-all known failure, a strict baseline against a lax candidate, report text that repaints
the terminal or speaks to the CI runner), artifacts that bite (replay commands, repro imports,
outputs written over reports), and runs that end badly (signals, duplicate shards, settings).
"""

import json
import os
import signal
import subprocess
import sys

import pytest
from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.known_failures import Catalogue

BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")
BAND = "MISMATCH: compiled values off the reference in a band of rows"


def _gate(tmp_path, baseline, candidate, *extra):
    b = write(tmp_path / "baseline.json", baseline)
    c = write(tmp_path / "candidate.json", candidate)
    return main(["gate", "--baseline", str(b), "--candidate", str(c), *extra])


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


# -- the gate --------------------------------------------------------------------------------------


def test_a_failure_grown_worse_is_a_regression_saying_by_how_much(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), _off("c2", 1e4, "3-3")], **BASE)
    candidate = report([case("c1", "PASS"), _off("c2", 6e6, "1-15")], **CAND)
    assert _gate(tmp_path, baseline, candidate) == 1
    out = capsys.readouterr().out
    assert "gate FAILED: 1 case(s) newly fail or fail worse" in out, out
    assert "worse: 1 case MISMATCH -> MISMATCH" in out
    assert "error/bound 1e+04 -> 6e+06 (x600)" in out and "off rows 1 -> 15 (x15)" in out, out
    # The opt-in turns it into a note that still says it.
    assert _gate(tmp_path, baseline, candidate, "--allow-worse") == 0
    out = capsys.readouterr().out
    assert "gate passed" in out and "note: accepted (--allow-worse): worse: 1 case" in out


def test_a_failure_about_as_bad_stays_no_news(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), _off("c2", 1e4, "3-4")], **BASE)
    candidate = report([case("c1", "PASS"), _off("c2", 5e4, "3-6")], **CAND)
    assert _gate(tmp_path, baseline, candidate) == 0, capsys.readouterr()


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
    with pytest.raises(MatrixError, match=r"known_failures\[0\]\.signature.*names no root cause"):
        Catalogue.from_entries([{"match": {"kernel": "my_fp8"}, "signature": signature}], tmp_path / "matrix.yaml")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        matrix_text(
            ["aten_scaled_mm"], known_failures=[{"match": {"kernel": "aten_scaled_mm"}, "signature": signature}]
        )
    )
    baseline = report([case("c1", "PASS")], **BASE)
    candidate = report([case("c1", "MISMATCH", BAND)], **CAND)
    assert _gate(tmp_path, baseline, candidate, "--matrix", str(matrix)) == 2
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
    assert _gate(tmp_path, baseline, candidate, "--matrix", str(matrix)) == 1
    out = capsys.readouterr().out
    assert "regression: 1 case" in out and "(case c2))" in out and "same torch release (2.13.0)" in out, out
    # Another release: the entry covers both runs, so the failure is the known one.
    assert (
        _gate(
            tmp_path,
            report([case("c1", "PASS"), case("c2", "PASS")], **BASE),
            report([case("c1", "PASS"), case("c2", "COMPILE_ONLY_ERROR", signature)], **CAND),
            "--matrix",
            str(matrix),
        )
        == 0
    ), capsys.readouterr()


def test_a_strict_baseline_judges_a_lax_candidate_strictly(tmp_path, capsys):
    boundary = case("c2", "PASS", m=0, purpose="boundary")
    parity = case("c2", "BOUNDARY_PARITY", "eager ValueError: M <> compiled InductorError: M", m=0, purpose="boundary")
    baseline = report([case("c1", "PASS"), boundary], session={"strict_errors": True}, **BASE)
    candidate = report([case("c1", "PASS"), parity], session={"strict_errors": False}, **CAND)
    assert _gate(tmp_path, baseline, candidate) == 1
    out = capsys.readouterr().out
    assert "regression: 1 case PASS -> BOUNDARY_PARITY" in out, out
    assert "judged strictly" in out and "capability gained" not in out
    # Both lax: tolerated, as before.
    lax = report([case("c1", "PASS"), boundary], session={"strict_errors": False}, **BASE)
    assert _gate(tmp_path, lax, candidate) == 0, capsys.readouterr()


CRAFTED = "x\r\x1b[32mgate passed\x1b[0m\n::notice title=ok::all green\n::stop-commands::tok\u202e"


def _no_command_lines(text):
    for line in text.splitlines():
        stripped = line.lstrip()
        assert not stripped.startswith("::") and not stripped.startswith("##["), line
    assert "\r" not in text and "\x1b" not in text and "\u202e" not in text


def test_gate_and_merge_lines_are_printable_whatever_the_report_holds(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), case("c2", "PASS")], **BASE)
    candidate = report(
        [case("c1", "PASS"), case("c2", "MISMATCH", CRAFTED)],
        session={"complete": False, "incomplete_reasons": [CRAFTED]},
        **CAND,
    )
    assert _gate(tmp_path, baseline, candidate) == 1
    out, err = capsys.readouterr()
    assert "gate FAILED" in out and err == ""
    _no_command_lines(out)
    assert "\\r" in out and "\\x1b" in out and "\\n" in out
    shard = report([case("c1", "PASS")], session={"complete": False, "incomplete_reasons": [CRAFTED]}, **CAND)
    shard["shard"] = {"index": 1, "count": 1, "total_cases": 1, "total_ids_sha256": "0"}
    write(tmp_path / "s1.json", shard)
    assert main(["merge", str(tmp_path / "out.json"), str(tmp_path / "s1.json")]) == 1
    out, err = capsys.readouterr()
    assert "INCOMPLETE" in out + err
    _no_command_lines(out + err)


# -- artifacts -------------------------------------------------------------------------------------


def test_a_replay_command_never_carries_an_option_from_the_report(tmp_path):
    from pytest_scaledmm.matrix.replay_command import replay_command
    from pytest_scaledmm.reports.compare import compare_reports
    from pytest_scaledmm.reports.render import render_html, render_markdown

    command = replay_command("--debug=FILE", "c1")
    assert " --debug" not in command and "./--debug=FILE" in command
    for crafted in ("--debug=x", "c1; touch y", "-k", "c1\nrm"):
        assert replay_command("/m/matrix.yaml", crafted).startswith("(no replay command")
    assert replay_command("/m/matrix.yaml", "c1", profile="--debug").startswith("(no replay command")
    candidate = report([case("c1", "PASS"), case("--debug=FILE", "MISMATCH", BAND)], matrix_path="--debug=FILE", **CAND)
    comparison = compare_reports(
        [(tmp_path / "b.json", report([case("c1", "PASS")], **BASE)), (tmp_path / "c.json", candidate)]
    )
    for text in (render_markdown(comparison), render_html(comparison, None, ["kernel"])):
        assert "pytest --debug" not in text and "--scaledmm-matrix --debug" not in text
        assert "--scaledmm-case --debug" not in text and "--scaledmm-case &#x27;--debug" not in text
        assert "no replay command" in text


def _artifact(tmp_path):
    """An unpacked CI artifact: a report naming a matrix beside it whose kernel module, imported,
    leaves a marker file."""
    art = tmp_path / "artifact"
    art.mkdir()
    marker = tmp_path / "imported"
    (art / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef mm(*a, **k):\n    raise RuntimeError('x')\n")
    (art / "matrix.yaml").write_text(matrix_text([planted("mine", "mm", module="evil")]))
    record = case(
        "mine-s0d_x_s1d-m16k32n16-bf16-inductor-000000", "COMPILE_ONLY_ERROR", "RuntimeError: x", kernel="mine"
    )
    data = report([record], matrix_path="matrix.yaml", **CAND)
    write(art / "report.json", data)
    return art, marker


def test_repro_imports_nothing_a_report_names_without_matrix(tmp_path, capsys, monkeypatch):
    art, marker = _artifact(tmp_path)
    monkeypatch.chdir(art)
    before = list(sys.path)
    assert main(["repro", "report.json", "--out", str(tmp_path / "out")]) == 0
    assert not marker.exists(), "the artifact's Python ran"
    assert sys.path == before
    scripts = list((tmp_path / "out").glob("repro_*.py"))
    assert scripts and "sys.path.insert(0" not in scripts[0].read_text()
    assert "--matrix" in capsys.readouterr().err
    # Confirmed with --matrix: its kernels are the user's to import, and the script appends their
    # directories after the standard ones.
    try:
        assert main(["repro", "report.json", "--out", str(tmp_path / "out2"), "--matrix", "matrix.yaml"]) == 0
    finally:
        sys.path[:] = before
        sys.modules.pop("evil", None)
    text = next((tmp_path / "out2").glob("repro_*.py")).read_text()
    assert "sys.path.append(repro_directory)" in text and "sys.path.insert(0" not in text


def _two_reports(tmp_path):
    b = write(tmp_path / "baseline.json", report([case("c1", "PASS")], **BASE))
    c = write(tmp_path / "candidate.json", report([case("c1", "PASS")], **CAND))
    return b, c


@pytest.mark.parametrize("flag", ["--html", "--markdown"])
def test_compare_never_writes_over_a_report(tmp_path, capsys, flag):
    b, c = _two_reports(tmp_path)
    before = b.read_bytes()
    # `compare --html reports/*.json`: the shell made the first report the HTML's name.
    assert main(["compare", flag, str(b), str(c)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(b) in err and "never overwritten" in err, err
    assert b.read_bytes() == before
    # A file of the user's that compare did not write is not replaced either; its own output is.
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    assert main(["compare", str(b), str(c), flag, str(mine)]) == 2
    assert mine.read_text() == "mine"
    out = tmp_path / "out.html"
    assert main(["compare", str(b), str(c), flag, str(out)]) == 0
    assert main(["compare", str(b), str(c), flag, str(out)]) == 0, capsys.readouterr()


def test_gate_markdown_never_appends_to_a_report(tmp_path, capsys):
    b, c = _two_reports(tmp_path)
    before = c.read_bytes()
    assert main(["gate", "--baseline", str(b), "--candidate", str(c), "--markdown", str(c)]) == 2
    assert c.read_bytes() == before and "never overwritten" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "{b}", "--html", "{dir}"],
        ["repro", "{b}", "--out", "{b}"],
        ["compare", "{b}", "--markdown", "{dir}"],
    ],
)
def test_path_errors_of_the_cli_are_one_line_exit_2(tmp_path, capsys, args):
    b, _ = _two_reports(tmp_path)
    (tmp_path / "d").mkdir()
    before = b.read_bytes()
    assert main([a.format(b=b, dir=tmp_path / "d") for a in args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert b.read_bytes() == before


def test_a_report_name_that_is_not_utf8_is_shown_escaped(tmp_path):
    b, _ = _two_reports(tmp_path)
    odd = tmp_path / os.fsdecode(b"r\xff.json")
    write(odd, report([case("c1", "PASS"), case("c2", "MISMATCH", BAND)], **CAND))
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    same = write(tmp_path / "same-env.json", report([case("c1", "PASS")], **CAND))  # labels from the file names
    for args in (
        ["compare", str(same), str(odd)],
        ["gate", "--baseline", str(b), "--candidate", str(odd)],
        ["merge", str(tmp_path / "m.json"), str(odd)],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pytest_scaledmm", *args], capture_output=True, env=env, timeout=120
        )
        assert b"Traceback" not in done.stderr and done.returncode in (0, 1), (args, done.stderr[-500:])
        if args[0] != "gate":
            assert b"\\udcff" in done.stdout + done.stderr, args


def test_a_report_path_that_is_also_a_pytest_output_is_a_usage_error(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    for flag in ("--junitxml", "--debug"):
        result = matrix_project.run(
            *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "out.json", f"{flag}=out.json"
        )
        assert result.ret == pytest.ExitCode.USAGE_ERROR, flag
        assert f"is also {flag}'s file" in result.stderr.str()
        assert (
            not (matrix_project.path / "out.json").exists()
            or "testsuite" not in (matrix_project.path / "out.json").read_text()
        )


def _mismatch_record(kernel, cid):
    from test_artifact_safety import BASE_PARAMS

    return {
        "id": cid,
        "params": {**BASE_PARAMS, "kernel": kernel},
        "outcome": "MISMATCH",
        "signature": "MISMATCH: compiled values off the reference",
        "layer": "compiled",
    }


def test_repro_scripts_are_named_per_root_cause_and_never_replace_another(tmp_path):
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
    from pytest_scaledmm.reports import repro

    code = repro.kernel_code("aten_scaled_mm", BUILTIN_IMPLS["aten_scaled_mm"], None)
    one = repro.write_script(tmp_path, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    two = repro.write_script(tmp_path, _mismatch_record("aten_scaled_mm_other", "b-1"), {}, 1, code, 10.0)
    assert one != two and one.exists() and two.exists()
    index = json.loads((tmp_path / "index.json").read_text())
    assert {e["case"] for e in index.values()} == {"a-1", "b-1"}
    # An index that claims the second cause's name for the first: the first gets a name of its own.
    index[one.name] = {**index[one.name], "kernel": "someone_else"}
    (tmp_path / "index.json").write_text(json.dumps(index))
    again = repro.write_script(tmp_path, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    assert again != one and again.name.endswith("_2.py")
    # A file there that pytest-scaledmm did not write, or an index that is not one, is never replaced.
    other = tmp_path / "foreign"
    other.mkdir()
    (other / one.name).write_text("print('mine')\n")
    with pytest.raises(repro.ReproError, match="never replaced"):
        repro.write_script(other, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    assert (other / one.name).read_text() == "print('mine')\n"
    (other / one.name).unlink()
    (other / "index.json").write_text('{"schema": "something else"}')
    with pytest.raises(repro.ReproError, match="never overwritten"):
        repro.write_script(other, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    assert json.loads((other / "index.json").read_text()) == {"schema": "something else"}


# -- runs ------------------------------------------------------------------------------------------

HERE = os.path.dirname(__file__)


def _signalled_run(tmp_path, wait_s, name="SIGINT", count=2):
    """pytest on a matrix whose kernel hangs, sent `count` signals 0.3 s apart (the first to
    pytest, the others to its process group, as `timeout -s INT` and a CI cancel do), `wait_s`
    after it claimed its report path."""
    import shutil
    import time

    shutil.copy(os.path.join(HERE, "planted_crash.py"), tmp_path)
    (tmp_path / "matrix.yaml").write_text(matrix_text([planted("hangs", module="planted_crash")], {"m": [4, 8]}))
    report_path = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--scaledmm-matrix",
            "matrix.yaml",
            "--scaledmm-report",
            "r.json",
            "--no-scaledmm-triage",
            "--scaledmm-timeout",
            "120",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not report_path.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(wait_s)
    number = getattr(signal, name)
    os.kill(proc.pid, number)
    for _ in range(count - 1):
        time.sleep(0.3)
        try:
            os.killpg(proc.pid, number)
        except ProcessLookupError:
            break
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out.decode(errors="replace"), json.loads(report_path.read_text())["session"]


@pytest.mark.parametrize("wait_s, name", [(0.0, "SIGINT"), (1.0, "SIGINT"), (4.0, "SIGINT"), (4.0, "SIGTERM")])
def test_repeated_signals_end_the_run_with_exit_2_and_no_traceback(tmp_path, wait_s, name):
    code, out, session = _signalled_run(tmp_path, wait_s, name)
    assert code == 2, out[-3000:]
    assert "Traceback (most recent call last)" not in out and len(out.splitlines()) < 40, out[-3000:]
    assert session["complete"] is False
    reasons = " ".join(session["incomplete_reasons"])
    assert ("interrupted" if name == "SIGINT" else "terminated") in reasons, reasons


def test_merge_names_a_shard_given_twice_as_duplicated(tmp_path, capsys):
    shard = report([case("c1", "PASS")], **CAND)
    shard["shard"] = {"index": 1, "count": 2, "total_cases": 2, "total_ids_sha256": "0"}
    s1 = write(tmp_path / "s1.json", shard)
    assert main(["merge", str(tmp_path / "out.json"), str(s1), str(s1)]) == 1
    err = capsys.readouterr().err
    assert "shard 1/2 is duplicated: given 2 times" in err.splitlines()[0], err


def test_coverage_counts_only_cases_checked_against_the_reference():
    from pytest_scaledmm.reports.coverage import coverage_block, coverage_lines

    records = [case("c1", "UNSUPPORTED", "ValueError: no"), case("c2", "ERROR_PARITY", "eager A <> compiled B")]
    for r in records:
        r["params"]["purpose"] = "valid"
    possible = {"aten_scaled_mm": {"scale_pair_mode": [["tensor_0d", "tensor_1d", "inductor"]], "form_class": []}}
    block = coverage_block(records, possible, "cpu")
    assert block["cases"]["reference_checked_valid"] == 0
    assert block["pairwise"]["scale_pair x mode"]["covered"] == 0
    assert "scale_pair x mode 0/1 (0 %)" in coverage_lines(block)[1]
    checked = case("c3", "PASS")
    checked["params"]["purpose"] = "valid"
    assert coverage_block(records + [checked], possible, "cpu")["pairwise"]["scale_pair x mode"]["covered"] == 1


@pytest.mark.parametrize(
    "variable, value",
    [
        ("SCALEDMM_MAX_AUTOTUNE_CONFIGS", "-1"),
        ("SCALEDMM_SEED", "-1"),
        ("SCALEDMM_SEED", "\u0663"),
        ("SCALEDMM_EXPLORE_EXAMPLES", "0"),
    ],
)
def test_numeric_settings_out_of_range_are_one_usage_error(matrix_project, monkeypatch, variable, value):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    monkeypatch.setenv(variable, value)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and variable in errors[0], result.stderr.lines


def test_a_seed_in_other_digits_on_the_command_line_is_refused(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-seed", "\u0663")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize(
    "target, expected",
    [
        ("/etc/passwd", "must be object, not text"),
        ("/dev/zero", "not a regular file"),
        ("/nonexistent", "no such file"),
    ],
)
def test_an_include_that_is_no_corpus_is_one_short_error(tmp_path, target, expected):
    from pytest_scaledmm.matrix.spec import load_spec

    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(matrix_text(["aten_scaled_mm"], include=[target]))
    with pytest.raises(MatrixError) as excinfo:
        load_spec(matrix)
    message = str(excinfo.value)
    assert expected in message and len(message) < 200 and "root:" not in message, message


HOSTILE_KERNEL = """
def shouts(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    raise RuntimeError("bad\\x1b[2K\\r\\u202egate passed ::warning title=x::y")
"""


def test_the_pytest_summary_prints_kernel_text_as_printable_lines(matrix_project, pytester):
    pytester.makepyfile(hostile=HOSTILE_KERNEL)
    pytester.syspathinsert()
    matrix_project.write_matrix(matrix_text([planted("shouts", module="hostile")]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    summary = result.stdout.str().split("scaled-mm matrix", 1)[-1]
    assert "shouts" in summary and "bad\\x1b[2K" in summary, summary
    bad = [line for line in summary.splitlines() if "\x1b" in line or "\r" in line or "\u202e" in line]
    assert not bad, bad


def test_a_failure_whose_measures_were_edited_out_is_not_no_news(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), _off("c2", 1e4, "3-3")], **BASE)
    stripped = _off("c2", float("nan"), "3-3")
    stripped["errors"]["compiled"].pop("where")
    stripped["errors"]["compiled"]["ratio"] = "nan"
    assert _gate(tmp_path, baseline, report([case("c1", "PASS"), stripped], **CAND)) == 1
    out = capsys.readouterr().out
    assert "error/bound 1e+04 in the baseline, not recorded in the candidate" in out, out


def test_compare_refuses_one_file_for_html_and_markdown(tmp_path, capsys):
    b, c = _two_reports(tmp_path)
    out = tmp_path / "both"
    assert main(["compare", str(b), str(c), "--html", str(out), "--markdown", str(out)]) == 2
    assert "same file" in capsys.readouterr().err and not out.exists()


SIGNAL_AT_THE_END = """
import os, signal, pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # After the last case, before the report is written: another plugin's teardown.
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)
"""


def test_signals_after_the_last_case_still_end_the_run_as_interrupted(matrix_project, pytester):
    pytester.makeconftest(SIGNAL_AT_THE_END)
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    before = signal.getsignal(signal.SIGINT)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Traceback (most recent call last)" not in result.stdout.str() + result.stderr.str()
    session = matrix_project.report("r.json")["session"]
    assert session["complete"] is False and "interrupted (SIGINT)" in session["incomplete_reasons"], session
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    signal.signal(signal.SIGINT, before)  # this process's own handler, past the run's grace


def test_a_step_summary_that_names_a_report_is_never_appended_to(tmp_path, monkeypatch, capsys):
    b, c = _two_reports(tmp_path)
    before = b.read_bytes()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(b))
    assert main(["gate", "--baseline", str(b), "--candidate", str(c)]) == 0
    assert b.read_bytes() == before
    assert "never appended to" in capsys.readouterr().err
