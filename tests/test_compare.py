"""`scaledmm compare`: alignment by case id, transition kinds, Markdown/HTML output, report errors,
output paths that never replace a report, and report names that are not UTF-8."""

import json
import os
import re
import subprocess
import sys

import pytest
from reports_factory import DATA, case, report, write

from pytest_scaledmm.cli import main
from pytest_scaledmm.reports import compare as cmp
from pytest_scaledmm.reports.compare import classify, compare_reports, load_reports
from pytest_scaledmm.reports.render import render_html, render_markdown

LOWERING = "InductorError <- AssertionError: LoweringException"


@pytest.mark.parametrize(
    "before, after, kind",
    [
        ("PASS", "COMPILE_ONLY_ERROR", cmp.REGRESSION),
        ("PASS", "MISMATCH", cmp.REGRESSION),
        ("FIXED_UPSTREAM", "FALLBACK", cmp.REGRESSION),
        ("MISMATCH", "PASS", cmp.FIX),
        ("XFAIL", "FIXED_UPSTREAM", cmp.FIX),
        ("PASS", "XFAIL", cmp.KNOWN_FAILURE),
        ("UNSUPPORTED", "PASS", cmp.CAPABILITY_GAINED),
        ("UNSUPPORTED", "ERROR_PARITY", cmp.CAPABILITY_GAINED),  # runs now, fails: still not a regression
        ("SKIPPED", "PASS", cmp.CAPABILITY_GAINED),
        ("PASS", "UNSUPPORTED", cmp.CAPABILITY_LOST),
        ("COMPILE_ONLY_ERROR", "SKIPPED", cmp.CAPABILITY_LOST),
        ("PASS", "PASS", None),
        ("UNSUPPORTED", "SKIPPED", None),
        (None, "PASS", cmp.CASE_ADDED),
        ("MISMATCH", None, cmp.CASE_REMOVED),
    ],
)
def test_classify_outcome_changes(before, after, kind):
    b = case("c", before, "sig" if before not in (None, "PASS", "FIXED_UPSTREAM") else None) if before else None
    a = case("c", after, "sig" if after not in (None, "PASS", "FIXED_UPSTREAM") else None) if after else None
    assert classify(b, a) == kind


def test_classify_signature_changes():
    old = case("c", "COMPILE_ONLY_ERROR", LOWERING)
    assert classify(old, case("c", "COMPILE_ONLY_ERROR", LOWERING)) is None
    assert classify(old, case("c", "COMPILE_ONLY_ERROR", "InductorError <- RuntimeError: x")) == cmp.SIGNATURE_CHANGED
    assert classify(old, case("c", "MISMATCH", LOWERING)) == cmp.SIGNATURE_CHANGED
    # A failure that became a known failure is the same failure, not news.
    xfail = {**case("c", "XFAIL", LOWERING), "known_failure": {"original_outcome": "COMPILE_ONLY_ERROR"}}
    assert classify(old, xfail) is None


def test_three_reports_align_by_id_and_classify_each_kind(tmp_path):
    """Columns are environments; every kind of transition between neighbours is found."""
    r1 = report(
        [
            case("a", "PASS"),
            case("b", "MISMATCH", "MISMATCH: compiled values off the reference"),
            case(
                "c",
                "UNSUPPORTED",
                "NotImplementedError: Could not run 'aten::_scaled_mm' with arguments from the 'CPU' backend",
            ),
            case("d", "COMPILE_ONLY_ERROR", LOWERING),
            case("e", "PASS"),
            case("gone", "PASS"),
        ],
        torch="2.3.1+cu121",
    )
    r2 = report(
        [
            case("a", "COMPILE_ONLY_ERROR", LOWERING),
            case("b", "PASS"),
            case("c", "PASS"),
            case("d", "COMPILE_ONLY_ERROR", "InductorError <- RuntimeError: other"),
            case("e", "UNSUPPORTED", "ValueError: no"),
            case("new", "PASS"),
        ],
        torch="2.9.1+cu128",
    )
    r3 = report(
        [case("a", "COMPILE_ONLY_ERROR", LOWERING), case("b", "PASS"), case("c", "PASS"), case("new", "PASS")],
        torch="2.13.0+cpu",
    )
    paths = [write(tmp_path / f"r{i}.json", r) for i, r in enumerate((r1, r2, r3))]
    comparison = compare_reports(load_reports(paths))

    assert [c.label for c in comparison.columns] == [
        "torch2.3.1+cu121/cpu",
        "torch2.9.1+cu128/cpu",
        "torch2.13.0+cpu/cpu",
    ]
    assert comparison.case_ids == ["a", "b", "c", "d", "e", "gone", "new"]
    assert [r["outcome"] if r else None for r in comparison.grid["d"]] == [
        "COMPILE_ONLY_ERROR",
        "COMPILE_ONLY_ERROR",
        None,
    ]
    first = {(t.case_id, t.kind) for t in comparison.transitions if t.after_label == "torch2.9.1+cu128/cpu"}
    assert first == {
        ("a", cmp.REGRESSION),
        ("b", cmp.FIX),
        ("c", cmp.CAPABILITY_GAINED),
        ("d", cmp.SIGNATURE_CHANGED),
        ("e", cmp.CAPABILITY_LOST),
        ("gone", cmp.CASE_REMOVED),
        ("new", cmp.CASE_ADDED),
    }
    second = {(t.case_id, t.kind) for t in comparison.transitions if t.after_label == "torch2.13.0+cpu/cpu"}
    assert second == {("d", cmp.CASE_REMOVED), ("e", cmp.CASE_REMOVED)}  # a fails the same way: no change


def test_directory_is_ordered_by_torch_version_not_string(tmp_path):
    for name, torch in (("a-newest", "2.13.0+cpu"), ("b-oldest", "2.3.1+cu121"), ("c-middle", "2.9.1")):
        write(tmp_path / f"{name}.json", report([case("x", "PASS")], torch=torch, tox_env=name))
    comparison = compare_reports(load_reports([tmp_path]))
    assert [c.label for c in comparison.columns] == ["b-oldest", "c-middle", "a-newest"]


def test_same_label_on_two_archs_is_told_apart(tmp_path):
    cpu = write(tmp_path / "cpu.json", report([case("x", "PASS")], torch="2.11.0", tox_env="torch211", arch="cpu"))
    gpu = write(
        tmp_path / "gpu.json",
        report([case("x", "COMPILE_ONLY_ERROR", LOWERING)], torch="2.11.0", tox_env="torch211", arch="sm90"),
    )
    comparison = compare_reports(load_reports([cpu, gpu]))
    assert [c.label for c in comparison.columns] == ["torch211/cpu", "torch211/sm90"]
    assert [t.kind for t in comparison.transitions] == [cmp.REGRESSION]


def test_real_cpu_reports_fp8_support_is_capability_gained_not_regression():
    """Trimmed from real tox runs: torch 2.3.1 refuses fp8 _scaled_mm and _int_mm on CPU, 2.13 runs them."""
    comparison = compare_reports(load_reports([DATA / "cpu-torch23.json", DATA / "cpu-torch213.json"]))
    kinds = comparison.kind_counts()
    assert kinds[cmp.REGRESSION] == 0
    assert kinds[cmp.CAPABILITY_GAINED] == len(comparison.case_ids) > 0
    before = {t.before_outcome for t in comparison.transitions}
    assert before == {"UNSUPPORTED"}
    assert any("aten::_scaled_mm" in (t.before.get("signature") or "") for t in comparison.transitions)


def test_cli_compare_prints_table_and_writes_markdown_and_html(tmp_path, capsys):
    md, html = tmp_path / "out" / "summary.md", tmp_path / "matrix.html"
    code = main(
        [
            "compare",
            str(DATA / "gate" / "baseline-torch211.json"),
            str(DATA / "gate" / "candidate-torch213-regression.json"),
            "--markdown",
            str(md),
            "--html",
            str(html),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"torch211 -> torch213: regression 2", out)
    assert "COMPILE_ONLY_ERROR" in out
    text = md.read_text()
    assert "| torch211 → torch213 | 2 | 0 |" in text  # regression column first
    assert "### regression: 2" in text
    assert "w8a8-row\\_x\\_row-m33k64n32-fp16-inductor-5e0f55" in text  # `_` escaped: no emphasis
    # The command names the candidate's environment (its report's torch and device).
    assert re.search(
        r"pytest \./matrix\.yaml::\S+ --scaledmm-matrix --scaledmm-recorded-on torch=2\.13\S* "
        r"--scaledmm-profile smoke",
        text,
    ), text
    assert re.search(r"replay: pytest \./matrix\.yaml::\S+ --scaledmm-matrix ", out), out  # and the terminal table
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<link" not in page and "src=" not in page  # one file
    assert "matrix.yaml::fp8e4m3-row_x_row-m64k64n32-bf16-max-autotune-no-cudagraphs-4d0e44 " in page


def test_exception_text_is_escaped_in_html_and_markdown(tmp_path):
    evil = "RuntimeError: <script>alert('x')</script> & <img src=x onerror=alert(1)> | col"
    reports = [
        (tmp_path / "a.json", report([case("a", "PASS")], torch="2.11.0")),
        (tmp_path / "b.json", report([case("a", "COMPILE_ONLY_ERROR", evil)], torch="2.13.0")),
    ]
    comparison = compare_reports(reports)
    page = render_html(comparison)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count("<script>") == 1  # the page's own script only
    text = render_markdown(comparison)
    assert "<script>" not in text and "&lt;script&gt;" in text
    # The regression's row: cases, pair, outcome, root cause, example.
    row = next(line for line in text.splitlines() if line.startswith("| 1 |") and "COMPILE" in line)
    assert row.count(" | ") == 4 and "\\| col" in row  # the pipe does not open a column


def test_heatmap_groups_cells_and_marks_regressions():
    comparison = compare_reports(
        load_reports([DATA / "gate" / "baseline-torch211.json", DATA / "gate" / "candidate-torch213-regression.json"])
    )
    page = render_html(comparison, group_by=["kernel", "scale_a", "scale_b"])
    assert re.search(r"<td class=\"group\">fp8 · row×row <span class=\"size\">\(1\)</span>", page)
    assert re.search(r"<td class=\"group\">w8a8 · row×row", page)
    assert page.count('class="mark regression"') == 2
    assert "1/1" in page  # failing / total in the regressed cells


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{not json", "not a report (corrupt JSON at line 1, column 2)"),
        (
            json.dumps({"schema": "pytest-scaledmm/report", "schema_version": 99, "environment": {}, "cases": []}),
            "key 'schema_version' is 99",
        ),
        (json.dumps({"schema": "something-else"}), "not a pytest-scaledmm report"),
    ],
)
def test_unusable_report_is_one_line_naming_the_file_exit_2(tmp_path, capsys, content, expected):
    good = DATA / "gate" / "baseline-torch211.json"
    bad = tmp_path / "bad-report.json"
    bad.write_text(content)
    assert main(["compare", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and expected in err and "Traceback" not in err


def test_python_dash_m_gives_the_same_one_line_error(tmp_path):
    bad = tmp_path / "torch99.json"
    bad.write_text('{"schema": "pytest-scaledmm/report", "schema_version": 5}')
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm", "gate", "--baseline", str(bad), "--candidate", str(bad)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"scaledmm gate: error: {bad}: key 'schema_version' is 5; this pytest-scaledmm reads versions 1, 2, 3 and 4 only"
    ]
    assert proc.stdout == ""


def test_missing_report_and_empty_directory(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "nope.json")]) == 2
    assert "nope.json: no such report" in capsys.readouterr().err
    assert main(["compare", str(tmp_path)]) == 2
    assert "directory holds no *.json report" in capsys.readouterr().err


# -- output paths: never a report, one line when unusable ------------------------------------------


BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")
BAND = "MISMATCH: compiled values off the reference in a band of rows"


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


def test_compare_refuses_one_file_for_html_and_markdown(tmp_path, capsys):
    b, c = _two_reports(tmp_path)
    out = tmp_path / "both"
    assert main(["compare", str(b), str(c), "--html", str(out), "--markdown", str(out)]) == 2
    assert "same file" in capsys.readouterr().err and not out.exists()


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


def test_replay_commands_in_markdown_and_html_carry_what_makes_the_case_fail_alone(tmp_path):
    """A case that fails after another (ORDER_DEPENDENT) or only within a shrunk call sequence
    replays with --scaledmm-after / --scaledmm-sequence wherever compare prints its command."""
    shrunk = case("k.sequence", "MISMATCH", "MISMATCH: later calls off the reference")
    shrunk["extra"] = {"sequence": {"shrunk": {"keep": [1, 3], "from": [0, 1, 2, 3]}}}
    ordered = case("k.ordered", "ORDER_DEPENDENT", "ORDER_DEPENDENT: fails after k.first")
    ordered["extra"] = {"replayed_alone": {"after": ["k.first"]}}
    reports = [
        (tmp_path / "a.json", report([case("k.sequence", "PASS"), case("k.ordered", "PASS")], torch="2.11.0")),
        (tmp_path / "b.json", report([shrunk, ordered], torch="2.13.0")),
    ]
    comparison = compare_reports(reports)
    for text in (render_markdown(comparison), render_html(comparison)):
        assert "k.sequence --scaledmm-matrix" in text
        assert re.search(r"k\.sequence --scaledmm-matrix[^\n<]*--scaledmm-sequence 1,3", text), text[-3000:]
        assert re.search(r"k\.ordered --scaledmm-matrix[^\n<]*--scaledmm-after k\.first", text), text[-3000:]
