"""What pytest's own terminal lines say in a matrix run: the progress line is left whole, the
`tested:` line's skipped count is pytest's, and a baseline gate's exit 1 is named in the last line;
kernel text in the summary is printable; the root causes are the last lines above pytest's last."""

import re

from matrices import IN_PROCESS, matrix_text, planted


def test_new_signatures_wait_for_the_summary_and_leave_the_progress_line_whole(matrix_project):
    matrix_project.write_matrix(
        matrix_text([planted("correct"), planted("ignores_scale_b")], {"mode": ["eager", "aot_eager"]})
    )
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS)
    assert result.ret == 1
    progress = [line for line in result.outlines if line.startswith("matrix.yaml ")]
    # One line: the four results, then the percentage; no line written into the middle of it.
    assert len(progress) == 1 and re.fullmatch(r"matrix\.yaml [.F]{4} +\[100%\]", progress[0]), result.outlines
    section = next(i for i, line in enumerate(result.outlines) if "scaled-mm signatures, as they appeared" in line)
    ticks = [i for i, line in enumerate(result.outlines) if "new signature: MISMATCH" in line]
    assert len(ticks) == 1 and ticks[0] == section + 1  # one signature, once, in its section
    assert re.match(r"\[scaledmm \+\d+\.\ds\] new signature: MISMATCH", result.outlines[ticks[0]])


def test_the_tested_line_counts_the_skipped_cases_pytest_counts(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("refuses_m1", min_m=2)], {"m": [1, 4]}))
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS)
    result.assert_outcomes(passed=1, skipped=1)  # M = 1 is UNSUPPORTED: pytest skips it
    tested = next(line for line in result.outlines if line.startswith("tested: "))
    assert tested.endswith(", 1 skipped (UNSUPPORTED 1)"), tested


def test_a_failed_baseline_gate_is_named_in_pytests_last_line(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")], {"out_dtype": ["bf16", "fp16"]}))
    matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "baseline.json", *IN_PROCESS).assert_outcomes(passed=2)
    # A subset of the baseline's cases: the gate fails on the missing ones.
    result = matrix_project.run(
        "--scaledmm-matrix",
        "--scaledmm-baseline",
        "baseline.json",
        "-k",
        "bf16",
        "--scaledmm-report",
        "subset.json",
        *IN_PROCESS,
    )
    assert result.ret == 1
    last = result.outlines[-1]
    assert re.fullmatch(r"=+ 1 passed, 1 deselected, 1 baseline gate failed in [\d.]+s.* =+", last), last
    passing = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-baseline", "baseline.json", "--scaledmm-report", "again.json", *IN_PROCESS
    )
    assert passing.ret == 0 and "baseline gate failed" not in passing.outlines[-1]


def test_the_tested_line_and_pytests_last_line_count_the_same_cases(matrix_project):
    # One kernel passes, one is off the reference, one refuses M = 1: passed, failed and skipped.
    matrix_project.write_matrix(
        matrix_text([planted("correct"), planted("ignores_scale_b"), planted("refuses_m1", min_m=2)], {"m": [1, 4]})
    )
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped)", result.outlines[-1])}
    assert counts == {"passed": 3, "failed": 2, "skipped": 1}, result.outlines[-1]
    tested = next(line for line in result.outlines if line.startswith("tested: "))
    run, skipped = re.match(r"tested: (\d+) case\(s\) run, .*, (\d+) skipped", tested).groups()
    # pytest skips the UNSUPPORTED case, which ran (and was refused): every case is counted once.
    assert int(skipped) == counts["skipped"] and int(run) == sum(counts.values()), tested
    assert len(matrix_project.report()["cases"]) == sum(counts.values())


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


# The lines of the root-cause part of the summary (reports/summary.py, root_cause_lines).
ROOT_CAUSE_LINE = re.compile(r" tier \d+, .*:| +\d+ x [A-Z_]+.*| {9}(in user code:|met:|all:|e\.g\.|replay:) .*")


def test_the_root_causes_are_the_last_lines_above_pytests_last_line(matrix_project):
    matrix_project.write_matrix(
        matrix_text([planted("correct"), planted("ignores_scale_b"), planted("refuses_only_in_eager")], {"m": [1, 4]})
    )
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    assert result.ret == 1
    lines = [line for line in result.outlines if line.strip()]
    assert re.fullmatch(r"=+ 4 failed, 2 passed in .* =+", lines[-1]), lines[-1]
    start = max(i for i, line in enumerate(lines) if re.fullmatch(r"\d+ failing root cause\(s\), by tier:", line))
    # After pytest's short test summary and everything else a plugin printed.
    assert start > max(i for i, line in enumerate(lines) if "short test summary info" in line)
    block = lines[start + 1 : -1]
    assert block and not [line for line in block if not ROOT_CAUSE_LINE.fullmatch(line)], block
    failing = [g for g in matrix_project.report()["signatures"] if g["outcome"] != "PASS"]
    assert [line for line in block if re.match(r" +\d+ x ", line)] == [
        line for line in block if any(f"{g['count']:4d} x {g['outcome']}" in line for g in failing)
    ]
    assert len([line for line in block if re.match(r" +\d+ x ", line)]) == len(failing) == 2
