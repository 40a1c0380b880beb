"""What a run leaves for CI: the step summary (appended, never truncated, a warning when it
cannot be written or is not a file), strict JSON, JSON-valued JUnit properties, file modes,
ISO 8601 times and the schema version, the default report directory and --scaledmm-keep, and what
each failure signature's cases share with the command that replays it. No output is ever
appended to a report."""

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest
from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.reports import report_dir  # before any in-process run: the runs use this module

# 2 kernels x 2 output dtypes: the failing kernel's two cases share kernel, not out_dtype.
MATRIX = matrix_text([planted("correct"), planted("ignores_scale_b")], {"out_dtype": ["bf16", "fp16"]})


def _run(project, *args):
    project.write_matrix(MATRIX)
    return project.run(*IN_PROCESS, "--scaledmm-matrix", *args)


# -- the step summary ------------------------------------------------------------------------------


def test_the_summary_is_appended_to_the_step_summary(matrix_project, monkeypatch):
    summary = matrix_project.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = _run(matrix_project, "--scaledmm-report", "r.json")
    assert result.ret == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, never truncated
    assert "## scaled-mm compatibility matrix" in text and "ignores\\_scale\\_b" in text
    assert "kernel=ignores\\_scale\\_b" in text  # what the signature's cases share
    assert "matrix.yaml::ignores\\_scale\\_b" in text and "--scaledmm-matrix" in text  # its replay command
    _run(matrix_project, "--scaledmm-report", "r2.json")
    assert summary.read_text().startswith(text)


@pytest.mark.parametrize("kernels, expected", [(["correct"], 0), (["correct", "ignores_scale_b"], 1)])
def test_an_unwritable_step_summary_is_one_warning_and_changes_no_verdict(
    matrix_project, monkeypatch, kernels, expected
):
    blocker = matrix_project.path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(blocker / "summary.md"))  # its parent is a file
    matrix_project.write_matrix(matrix_text([planted(k) for k in kernels]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == expected
    warnings = [line for line in result.outlines if "GITHUB_STEP_SUMMARY" in line]
    assert warnings == [f"warning: $GITHUB_STEP_SUMMARY: cannot append to {blocker / 'summary.md'}: Not a directory"]
    assert matrix_project.report("r.json")["session"]["complete"] is True


def test_compare_and_gate_append_to_the_step_summary(tmp_path, monkeypatch, capsys):
    baseline = write(tmp_path / "b.json", report([case("c1", "PASS"), case("c2", "PASS")], torch="2.11.0"))
    candidate = write(tmp_path / "c.json", report([case("c1", "PASS"), case("c2", "MISMATCH", "bad")], torch="2.13.0"))
    summary = tmp_path / "summary.md"
    summary.write_text("kept\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    # --markdown naming the step summary appends too: it never truncates it.
    assert main(["compare", str(baseline), str(candidate), "--markdown", str(summary)]) == 0
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(candidate), "--markdown", str(summary)]) == 1
    text = summary.read_text()
    assert text.startswith("kept\n") and text.count("## scaled-mm compatibility matrix") == 1
    assert text.count("**gate FAILED: 1 case\\(s\\) newly fail") == 1
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "nowhere" / "x" / "summary.md"))
    (tmp_path / "nowhere").write_text("")
    capsys.readouterr()
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 1
    out, err = capsys.readouterr()
    assert "scaledmm gate: warning: $GITHUB_STEP_SUMMARY: cannot append to" in err and "gate FAILED" in out


# -- JUnit XML -------------------------------------------------------------------------------------


def test_junit_properties_are_json(matrix_project):
    result = _run(matrix_project, "--scaledmm-report", "r.json", "--junitxml", "junit.xml")
    assert result.ret == 1
    cases = ET.parse(matrix_project.path / "junit.xml").getroot().iter("testcase")
    seen = {}
    for testcase in cases:
        properties = {p.get("name"): json.loads(p.get("value")) for p in testcase.iter("property")}  # every value JSON
        seen[testcase.get("name")] = properties
        assert isinstance(properties["scaledmm"], dict) and properties["scaledmm"]["id"] == testcase.get("name")
        assert properties["scaledmm.torch"] and properties["scaledmm.arch"] == "cpu"
        assert properties["scaledmm.mode"] == "aot_eager" and properties["scaledmm.kernel"] in (
            "correct",
            "ignores_scale_b",
        )
        assert isinstance(properties["scaledmm.eager_error_ratio"], float)
    outcomes = {p["scaledmm.kernel"]: p["scaledmm.outcome"] for p in seen.values()}
    assert outcomes == {"correct": "PASS", "ignores_scale_b": "MISMATCH"}
    assert any("scaledmm_env" in p and p["scaledmm_env"]["arch"] == "cpu" for p in seen.values())


# -- file modes, times, schema versions --------------------------------------------------------------


def test_every_file_written_is_0644_or_a_script_0755_under_a_group_writable_umask(matrix_project, tmp_path):
    old = os.umask(0o002)
    try:
        result = _run(matrix_project, "--scaledmm-report", "r.json", "--scaledmm-repro-dir", "repros")
        assert result.ret == 1
        out = tmp_path / "out"
        assert (
            main(
                [
                    "compare",
                    str(matrix_project.path / "r.json"),
                    "--markdown",
                    str(out / "s.md"),
                    "--html",
                    str(out / "m.html"),
                ]
            )
            == 0
        )
        assert main(["merge", str(out / "merged.json"), str(matrix_project.path / "r.json")]) == 1
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)  # noqa: E731
    scripts = list((matrix_project.path / "repros").glob("*.py"))
    assert scripts and all(mode(p) == 0o755 for p in scripts)
    data = [
        matrix_project.path / "r.json",
        matrix_project.path / "repros" / "index.json",
        out / "s.md",
        out / "m.html",
        out / "merged.json",
    ]
    assert {str(p): mode(p) for p in data} == {str(p): 0o644 for p in data}


def test_times_are_iso_8601_and_a_version_1_report_is_read(tmp_path, capsys):
    data = report([case("c1", "PASS")])
    assert datetime.fromisoformat(data["session"]["started"]).utcoffset() is not None
    old = dict(data, schema_version=1, session={**data["session"], "started": 1700000000.5})
    write(tmp_path / "v1.json", old)
    write(tmp_path / "v2.json", report([case("c1", "PASS")], torch="2.13.1"))
    from pytest_scaledmm.reports.report import load_report

    loaded = load_report(tmp_path / "v1.json")
    assert loaded["session"]["started"] == "2023-11-14T22:13:20.500000+00:00" and loaded["upgraded_from"] == 1
    assert main(["gate", "--baseline", str(tmp_path / "v1.json"), "--candidate", str(tmp_path / "v2.json")]) == 0
    for version in (0, 5, "2"):
        write(tmp_path / "other.json", dict(data, schema_version=version))
        assert main(["gate", "--baseline", str(tmp_path / "other.json"), "--candidate", str(tmp_path / "v2.json")]) == 2
        err = capsys.readouterr().err
        assert (
            err.count("\n") == 1
            and f"key 'schema_version' is {version!r}; this pytest-scaledmm reads versions 1, 2, 3 and 4 only" in err
        )


def test_a_run_report_has_an_iso_start(matrix_project):
    _run(matrix_project, "--scaledmm-report", "r.json")
    started = matrix_project.report("r.json")["session"]["started"]
    assert datetime.fromisoformat(started).utcoffset().total_seconds() == 0


# -- where reports go, and keeping N ---------------------------------------------------------------


def test_the_default_report_directory_is_the_matrix_project_wherever_pytest_starts(matrix_project, pytester):
    project = matrix_project.path / "proj"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (project / "matrices" / "m.yaml").write_text(MATRIX)
    elsewhere = matrix_project.path / "elsewhere"
    elsewhere.mkdir()
    for start in (elsewhere, project / "matrices"):
        os.chdir(start)
        result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", str(project / "matrices" / "m.yaml"))
        assert result.ret == 1
    reports = sorted((project / ".scaledmm" / "reports").glob("report-*.json"))
    assert (
        len(reports) == 2
        and not (elsewhere / ".scaledmm").exists()
        and not (project / "matrices" / ".scaledmm").exists()
    )
    assert any(line.startswith(f"report: {project / '.scaledmm' / 'reports'}") for line in result.outlines)
    # Without a project file above it, the matrix's own directory.
    loose = matrix_project.path / "loose"
    loose.mkdir()
    (loose / "matrix.yaml").write_text(MATRIX)
    os.chdir(elsewhere)
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", str(loose / "matrix.yaml"))
    assert len(list((loose / ".scaledmm" / "reports").glob("report-*.json"))) == 1


def _old_reports(directory, template, stamps):
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for stamp in stamps:
        path = directory / f"report-{stamp}-000001-1.json"
        shutil.copy(template, path)
        paths.append(path)
    return paths


def test_keep_prunes_only_old_reports_it_wrote(matrix_project):
    matrix_project.write_matrix(MATRIX)
    first = _run(matrix_project)
    directory = matrix_project.path / ".scaledmm" / "reports"
    template = next(directory.glob("report-*.json"))
    old = _old_reports(
        directory, template, ["20200101-000000", "20200102-000000", "20200103-000000", "20200104-000000"]
    )
    baseline = old[0]
    foreign = directory / "report-20190101-000000-000001-1.json"  # our name, not our content
    foreign.write_text('{"mine": true}')
    notes = directory / "notes.json"
    notes.write_text("{}")
    locked = _old_reports(directory, template, ["20200105-000000"])[0]
    (directory / f"{locked.name}.lock").write_text("99999999\n")  # a run still writing it
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-keep", "2", "--scaledmm-baseline", str(baseline)
    )
    left = sorted(p.name for p in directory.iterdir())
    newest = sorted(p.name for p in directory.glob("report-2*.json"))[-1]
    # Kept: the two newest (this run's and the first run's), the baseline, the locked one, and
    # every file this plugin did not write.
    assert left == sorted(
        [baseline.name, foreign.name, locked.name, f"{locked.name}.lock", template.name, newest, "notes.json"]
    )
    assert any(line.startswith("--scaledmm-keep 2: removed 3 older report(s) from") for line in result.outlines)
    assert first.ret == 1


def test_keep_must_keep_one_and_a_failed_removal_is_a_warning(matrix_project, monkeypatch):
    result = _run(matrix_project, "--scaledmm-keep", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        "ERROR: --scaledmm-keep: keeps at least one report (the run's own): N must be a whole number >= 1, got 0"
    ]
    _run(matrix_project)
    directory = matrix_project.path / ".scaledmm" / "reports"
    _old_reports(directory, next(directory.glob("report-*.json")), ["20200101-000000"])

    def refuse(path):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(report_dir, "_remove", refuse)
    result = _run(matrix_project, "--scaledmm-keep", "1")
    assert result.ret == 1  # the verdict of the run, not of the pruning
    warnings = [line for line in result.outlines if line.startswith("warning: --scaledmm-keep")]
    assert len(warnings) == 1 and warnings[0].startswith(
        f"warning: --scaledmm-keep: cannot remove {directory / 'report-'}"
    )
    assert warnings[0].endswith(": Permission denied (and 1 more)")
    assert len(list(directory.glob("report-*.json"))) == 3


# -- what a signature's cases share, and its replay command -------------------------------------------


def test_each_signature_shows_what_its_cases_share_and_how_to_replay_it(matrix_project, tmp_path):
    result = _run(matrix_project, "--scaledmm-report", "r.json")
    text = result.stdout.str()
    example = matrix_project.report("r.json")["signatures"][0]["example"]
    assert "         all: kernel=ignores_scale_b" in text
    replay = [line for line in result.outlines if line.startswith("         replay: pytest ")]
    assert replay and f"matrix.yaml::{example} --scaledmm-matrix " in replay[0]
    group = matrix_project.report("r.json")["signatures"][0]
    assert group["shared"] == {"kernel": "ignores_scale_b"} and group["count"] == 2
    html = tmp_path / "m.html"
    assert main(["compare", str(matrix_project.path / "r.json"), "--html", str(html)]) == 0
    page = html.read_text()
    assert (
        '<td class="detail">kernel=ignores_scale_b</td>' in page
        and f"matrix.yaml::{example} --scaledmm-matrix " in page
    )


# -- a step summary that is not a file -------------------------------------------------------------


@contextlib.contextmanager
def _no_hang(seconds=60):
    """Fails the test instead of hanging it (a FIFO without a reader blocks its writer)."""

    def hung(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_fifo_as_step_summary_is_one_warning_not_a_hung_run(matrix_project, monkeypatch):
    fifo = matrix_project.path / "summary.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    with _no_hang():
        result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == 0
    warnings = [line for line in result.outlines if "GITHUB_STEP_SUMMARY" in line]
    assert warnings == [
        f"warning: $GITHUB_STEP_SUMMARY: cannot append to {fifo}: it is a FIFO, not a file to append to"
    ]
    assert matrix_project.report("r.json")["session"]["complete"] is True


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_gate_and_merge_warn_once_on_a_step_summary_that_is_not_a_file(tmp_path, monkeypatch, capsys, kind):
    from reports_factory import case, report, write

    target = tmp_path / "summary"
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    baseline = write(tmp_path / "b.json", report([case("k-1", "PASS")], torch="2.12.0"))
    candidate = write(tmp_path / "c.json", report([case("k-1", "PASS")]))
    with _no_hang():
        assert (
            main(["gate", "--baseline", str(baseline), "--candidate", str(candidate), "--markdown", str(target)]) == 0
        )
        assert main(["compare", str(baseline), str(candidate)]) == 0
    err = capsys.readouterr().err.splitlines()
    expected = f"$GITHUB_STEP_SUMMARY: cannot append to {target}: it is a {'FIFO' if kind == 'fifo' else 'directory'}, not a file to append to"
    assert err == [
        f"scaledmm gate: warning: --markdown: cannot append to {target}: it is a {'FIFO' if kind == 'fifo' else 'directory'}, not a file to append to",
        f"scaledmm compare: warning: {expected}",
    ]


# -- --scaledmm-keep spares what is not this job's -------------------------------------------------


def test_keep_prunes_only_this_matrix_profile_and_shard(matrix_project, pytester):
    from pytest_scaledmm.reports.report import write_atomic

    matrix_project.write_matrix(MATRIX)
    matrix_project.write_matrix(MATRIX, "other.yaml")
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix")
    directory = pytester.path / ".scaledmm" / "reports"
    template = json.loads(next(directory.glob("report-*.json")).read_text())

    def old(stamp, **changes):
        data = json.loads(json.dumps(template))
        for key, value in changes.items():
            block, field = key.split("__")
            data.setdefault(block, {})[field] = value
        path = directory / f"report-{stamp}-000001-1.json"
        write_atomic(path, data)  # as the plugin writes it: only what it names and wrote is ever pruned
        return path.name

    same = [old("20200101-000000"), old("20200102-000000")]
    kept = [
        old("20200103-000000", matrix__path=str(pytester.path / "other.yaml")),  # another matrix of the project
        old("20200104-000000", matrix__profile="full"),  # another profile
        old("20200105-000000", shard__index=1),  # a shard waiting to be merged
    ]
    mine = directory / "report-20200106-000000-000001-1.json"
    mine.write_text('{"mine": true}')
    previous = directory / "report.previous.json"
    previous.write_text(json.dumps(template))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-keep", "1")
    left = {p.name for p in directory.iterdir()}
    assert not left & set(same)
    assert set(kept) | {mine.name, previous.name} <= left
    assert (
        len([name for name in left if name.startswith("report-2") and name not in kept and name != mine.name]) == 1
    )  # this run's
    assert any(line.startswith("--scaledmm-keep 1: removed 3 older report(s)") for line in result.outlines)


# -- every JSON file is strict JSON ----------------------------------------------------------------


def _strict(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity, as jq and most parsers do."""

    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_reports_are_strict_json_and_non_finite_numbers_round_trip(matrix_project, pytester, tmp_path, capsys):
    from pytest_scaledmm.reports.report import load_report, write_atomic

    # returns_none fails with an infinite error ratio on both sides.
    matrix_project.write_matrix(matrix_text([planted("correct"), planted("returns_none")]))
    result = matrix_project.run(
        *IN_PROCESS,
        "--scaledmm-matrix",
        "--scaledmm-report",
        "r.json",
        "--scaledmm-shard",
        "1/1",
        "--junitxml",
        "junit.xml",
        "--scaledmm-repro-dir",
        "repros",
    )
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
    from reports_factory import case, report

    from pytest_scaledmm.reports.gate import _bound_difference
    from pytest_scaledmm.reports.report import load_report, write_atomic

    record = case("k-1", "MISMATCH", "MISMATCH: wrong")
    record["errors"] = {
        side: {"ok": False, "ratio": float("inf"), "bound": {"slack": float("nan")}} for side in ("eager", "compiled")
    }
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


# -- a step summary or --markdown that names a report ----------------------------------------------


BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")


def _two_reports(tmp_path):
    b = write(tmp_path / "baseline.json", report([case("c1", "PASS")], **BASE))
    c = write(tmp_path / "candidate.json", report([case("c1", "PASS")], **CAND))
    return b, c


def test_gate_markdown_never_appends_to_a_report(tmp_path, capsys):
    b, c = _two_reports(tmp_path)
    before = c.read_bytes()
    assert main(["gate", "--baseline", str(b), "--candidate", str(c), "--markdown", str(c)]) == 2
    assert c.read_bytes() == before and "never overwritten" in capsys.readouterr().err


def test_gate_markdown_appends_only_to_a_file_it_may_take(tmp_path, monkeypatch, capsys):
    """The step summary, a new file, or Markdown that the gate or compare began; anything else
    (a matrix.yaml named by a slip, notes that quote a verdict) is one error line, untouched."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    b, c = _two_reports(tmp_path)
    gate = ["gate", "--baseline", str(b), "--candidate", str(c), "--markdown"]
    matrix = tmp_path / "matrix.yaml"
    notes = tmp_path / "notes.md"
    matrix.write_text("version: 1\nkernels: []\n")
    notes.write_text("# CI\n**gate passed: no new failure** is what a green run says\n")
    for theirs in (matrix, notes):
        before = theirs.read_bytes()
        assert main([*gate, str(theirs)]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == (
            "",
            f"scaledmm gate: error: --markdown {theirs}: it is there and was not written by scaledmm gate or"
            " compare: it is never appended to\n",
        )
        assert theirs.read_bytes() == before
    # A new file, then the same file again: both verdicts, one after the other.
    verdicts = tmp_path / "gate.md"
    assert main([*gate, str(verdicts)]) == 0 and main([*gate, str(verdicts)]) == 0
    assert verdicts.read_text().count("**gate passed: no new failure") == 2
    # Markdown compare wrote (the GitLab example's flow): the verdict goes after it.
    summary = tmp_path / "summary.md"
    assert main(["compare", str(b), str(c), "--markdown", str(summary)]) == 0
    assert main([*gate, str(summary)]) == 0
    text = summary.read_text()
    assert text.startswith("## scaled-mm compatibility matrix") and "**gate passed: no new failure" in text
    # Whatever file $GITHUB_STEP_SUMMARY names takes it: the runner made it for this.
    step = tmp_path / "step_summary_x"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    assert main([*gate, str(step)]) == 0
    text = step.read_text()
    assert text.startswith("earlier step\n") and text.count("**gate passed") == 1


def test_a_step_summary_that_names_a_report_is_never_appended_to(tmp_path, monkeypatch, capsys):
    b, c = _two_reports(tmp_path)
    before = b.read_bytes()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(b))
    assert main(["gate", "--baseline", str(b), "--candidate", str(c)]) == 0
    assert b.read_bytes() == before
    assert "never appended to" in capsys.readouterr().err


def test_gate_markdown_dash_prints_the_verdict_as_compare_does(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    b, c = _two_reports(tmp_path)
    assert main(["gate", "--baseline", str(b), "--candidate", str(c), "--markdown", "-"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gate passed: ") and f"**{out[0]}**" in out  # the verdict, then its Markdown
    assert not (tmp_path / "-").exists()


def test_gate_markdown_to_a_device_or_this_commands_output_and_never_to_a_fifo(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    b, c = _two_reports(tmp_path)
    gate = ["gate", "--baseline", str(b), "--candidate", str(c), "--markdown"]
    assert main([*gate, "/dev/null"]) == 0
    assert capsys.readouterr().err == "" and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # A FIFO that holds a verdict: reading it for one would wait for a writer where it holds none.
    fifo = tmp_path / "verdict.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(fd, b"**gate passed: earlier**\n")
        with _no_hang():
            assert main([*gate, str(fifo)]) == 2
        assert (
            capsys.readouterr().err == f"scaledmm gate: error: --markdown {fifo}: it is a FIFO; name a regular file\n"
        )
        assert os.read(fd, 4096) == b"**gate passed: earlier**\n"  # unread, untouched
    finally:
        os.close(fd)
    # /dev/stdout of a step whose log is a file: the verdict, then its Markdown, after the log.
    log = tmp_path / "step.log"
    log.write_text("earlier step\n")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    with open(log, "a") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_scaledmm", *gate, "/dev/stdout"],
            stdout=handle,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=300,  # a guard, not a measure
        )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier step" and lines[1].startswith("gate passed: ") and f"**{lines[1]}**" in lines
