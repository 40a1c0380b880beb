"""The CI-fit features under hostile use: bad values from the environment and ini files named
where they came from, strict JSON, shard reports gated alone, step summaries that are not files,
pruning that spares what it did not write for this matrix, merges that would lose an input, and
a shard that gets no case."""

import contextlib
import json
import os
import signal

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main

MATRIX = matrix_text([planted("correct"), planted("ignores_scale_b")], {"out_dtype": ["bf16", "fp16"]})


def _usage_lines(result):
    return [line for line in result.stderr.lines if line.strip()]


# -- a bad value names its real source ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("SCALEDMM_SHARD", "3/2", "ERROR: SCALEDMM_SHARD=3/2: '3/2' is not I/N with whole numbers 1 <= I <= N"),
        ("SCALEDMM_SHARD", "a/b", "ERROR: SCALEDMM_SHARD=a/b: 'a/b' is not I/N"),
        ("SCALEDMM_SHARD", "1/0", "ERROR: SCALEDMM_SHARD=1/0: '1/0' is not I/N"),
        (
            "SCALEDMM_KEEP",
            "-1",
            "ERROR: SCALEDMM_KEEP=-1: keeps at least one report (the run's own): N must be a whole number >= 1, got -1",
        ),
        ("SCALEDMM_KEEP", "two", "ERROR: SCALEDMM_KEEP=two: expected an integer"),
    ],
)
def test_a_bad_shard_or_keep_from_the_environment_names_the_variable(
    matrix_project, monkeypatch, name, value, expected
):
    monkeypatch.setenv(name, value)
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _usage_lines(result)
    assert len(lines) == 1 and lines[0].startswith(expected) and "--scaledmm-" not in lines[0].split(":")[0]
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    "ini, text, expected",
    [
        (
            "tox.ini",
            "[pytest]\nscaledmm_shard = 0/2\n",
            "ERROR: tox.ini [pytest] scaledmm_shard = 0/2: '0/2' is not I/N",
        ),
        (
            "pytest.ini",
            "[pytest]\nscaledmm_keep = 0\n",
            "ERROR: pytest.ini [pytest] scaledmm_keep = 0: keeps at least one report",
        ),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\nscaledmm_shard = 2\n",
            "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_shard = 2: '2' is not I/N",
        ),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\nscaledmm_keep = 2.5\n",
            "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_keep = 2.5: expected an integer",
        ),
    ],
)
def test_a_bad_shard_or_keep_from_an_ini_file_names_the_file(matrix_project, pytester, ini, text, expected):
    (pytester.path / ini).write_text(text)
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _usage_lines(result)
    assert len(lines) == 1 and lines[0].startswith(expected)


def test_the_command_line_still_names_the_flag(matrix_project, monkeypatch):
    monkeypatch.setenv("SCALEDMM_SHARD", "1/2")  # the command line wins, and its value is the bad one
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-shard", "2/1", "--scaledmm-report", "r.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result)[0].startswith("ERROR: --scaledmm-shard: '2/1' is not I/N")


# -- help texts say what the code does ------------------------------------------------------------------


def test_the_report_help_names_the_real_default_directory():
    from pytest_scaledmm.plugin import options as opt
    from pytest_scaledmm.reports.report_dir import PROJECT_MARKERS, REPORTS_SUBDIR, default_report_name

    assert "under the rootdir" not in opt.REPORT.help
    assert f"<project>/{REPORTS_SUBDIR.as_posix()}/report-" in opt.REPORT.help
    assert default_report_name(0).startswith("report-19700101-")
    assert all(marker in opt.REPORT.help for marker in PROJECT_MARKERS if not marker.startswith("."))
    assert "--rootdir" in opt.REPORT.help
    assert "a directory stands for its matrix.yaml" in opt.MATRIX.help
    assert f"<project>/{REPORTS_SUBDIR.as_posix()}" in opt.KEEP.help


# -- every JSON file is strict JSON -------------------------------------------------------------------


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


# -- a shard's report gated or compared alone -------------------------------------------------------------


def _shard_report(cases, index, count, total_ids, **env):
    from reports_factory import report

    from pytest_scaledmm.reports.report import ids_sha256

    data = report(cases, **env)
    data["shard"] = {
        "index": index,
        "count": count,
        "cases": len(cases),
        "total_cases": len(total_ids),
        "total_ids_sha256": ids_sha256(total_ids),
        "ids_sha256": ids_sha256(c["id"] for c in cases),
    }
    return data


def test_a_shard_gated_or_compared_alone_says_to_merge_first(tmp_path, capsys):
    from reports_factory import case, report, write

    cases = [case(f"k-{i}", "PASS") for i in range(4)]
    ids = [c["id"] for c in cases]
    full = write(tmp_path / "full.json", report(cases))
    shard = write(tmp_path / "s1.json", _shard_report(cases[:2], 1, 2, ids, torch="2.14.0"))
    advice = "this is shard 1/2 of a sharded run: merge the shards first (scaledmm merge)"

    assert main(["gate", "--baseline", str(full), "--candidate", str(shard)]) == 1
    err = capsys.readouterr().out
    assert f"the candidate: {advice}, then gate the merged report" in err.splitlines()[1]
    assert main(["gate", "--baseline", str(shard), "--candidate", str(full)]) == 1
    assert f"the baseline: {advice}" in capsys.readouterr().out
    # --allow-missing is the opt-in for a partial comparison: a note then.
    assert main(["gate", "--baseline", str(full), "--candidate", str(shard), "--allow-missing"]) == 0
    assert f"note: skipped (--allow-missing): the candidate: {advice}" in capsys.readouterr().out
    # The same shard of the same cases on both sides is a like-for-like comparison of that slice.
    old_shard = write(tmp_path / "old-s1.json", _shard_report(cases[:2], 1, 2, ids))
    assert main(["gate", "--baseline", str(old_shard), "--candidate", str(shard)]) == 0
    assert "both reports are shard 1/2 of the same cases: only that slice is gated" in capsys.readouterr().out
    other = write(tmp_path / "s1-other.json", _shard_report(cases[:2], 1, 2, ids + ["k-9"], torch="2.14.0"))
    assert main(["gate", "--baseline", str(old_shard), "--candidate", str(other)]) == 1
    capsys.readouterr()

    assert main(["compare", str(full), str(shard)]) == 0
    assert advice in capsys.readouterr().out

    # Merged, the shards are the whole run: no advice.
    second = write(tmp_path / "s2.json", _shard_report(cases[2:], 2, 2, ids, torch="2.14.0"))
    merged = tmp_path / "merged.json"
    assert main(["merge", str(merged), str(shard), str(second)]) == 0
    assert main(["gate", "--baseline", str(full), "--candidate", str(merged)]) == 0
    assert "merge the shards first" not in capsys.readouterr().out


# -- a step summary that is not a file ------------------------------------------------------------------


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


# -- a shard that gets no case --------------------------------------------------------------------------


def test_a_shard_with_no_case_is_a_complete_empty_slice_that_merges(matrix_project, tmp_path, capsys):
    matrix_project.write_matrix(matrix_text([planted("correct")], {"out_dtype": ["bf16", "fp16"]}))  # 2 cases
    for index in (1, 2, 3):
        result = matrix_project.run(
            *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-shard", f"{index}/3", "--scaledmm-report", f"s{index}.json"
        )
        assert result.ret == 0, result.stdout.str()[-2000:]
    assert any(line.startswith("shard 3/3 holds none of the matrix's 2 case(s)") for line in result.outlines)
    empty = matrix_project.report("s3.json")
    assert empty["cases"] == [] and empty["session"]["complete"] is True and empty["shard"]["cases"] == 0
    merged = tmp_path / "merged.json"
    capsys.readouterr()
    assert main(["merge", str(merged), *(str(matrix_project.path / f"s{i}.json") for i in (1, 2, 3))]) == 0
    assert capsys.readouterr().out.strip() == f"merged 3 shard(s) into {merged}: 2 case(s), complete"


def test_an_empty_shard_with_a_baseline_is_still_gated(matrix_project, pytester):
    # Its exit status turned from "no tests collected" to 0: the gate must still judge it.
    matrix_project.write_matrix(matrix_text([planted("correct")], {"out_dtype": ["bf16", "fp16"]}))
    assert matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "full.json").ret == 0
    result = matrix_project.run(
        *IN_PROCESS,
        "--scaledmm-matrix",
        "--scaledmm-shard",
        "3/3",
        "--scaledmm-report",
        "s3.json",
        "--scaledmm-baseline",
        "full.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    assert "gate FAILED" in text and "the candidate: this is shard 3/3 of a sharded run: merge the shards first" in text


def test_explore_is_not_sharded(matrix_project, monkeypatch):
    matrix_project.write_matrix(MATRIX)
    monkeypatch.setenv("SCALEDMM_SHARD", "1/2")
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-explore", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result) == [
        "ERROR: SCALEDMM_SHARD=1/2: --scaledmm-explore searches the axes; it is not split into shards"
    ]


# -- --scaledmm-keep spares what is not this job's ------------------------------------------------------


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


# -- scaledmm merge never loses an input or a run's report ---------------------------------------------------


def test_merge_refuses_to_write_over_a_shard_or_a_run_report(tmp_path, capsys):
    from reports_factory import case, report, write

    cases = [case(f"k-{i}", "PASS") for i in range(2)]
    ids = [c["id"] for c in cases]
    s1 = write(tmp_path / "s1.json", _shard_report(cases[:1], 1, 2, ids))
    s2 = write(tmp_path / "s2.json", _shard_report(cases[1:], 2, 2, ids))
    baseline = write(tmp_path / "baseline.json", report(cases))
    before = {p: p.read_text() for p in (s1, s2, baseline)}
    for out in (s1, baseline):  # an input given as OUT too, or the baseline by a slip
        assert main(["merge", str(out), str(s1), str(s2)]) == 2
        err = capsys.readouterr().err
        assert (
            err
            == f"scaledmm merge: error: {out} is a report of a run, not an earlier merge: it is never overwritten; name another file for the merged report\n"
        )
    assert {p: p.read_text() for p in before} == before
    # An earlier merge is replaced, also inside the directory of shards it was merged from.
    merged = tmp_path / "merged.json"
    assert main(["merge", str(merged), str(s1), str(s2)]) == 0
    assert main(["merge", str(merged), str(tmp_path / "s1.json"), str(tmp_path / "s2.json")]) == 0
    (tmp_path / "baseline.json").unlink()
    assert main(["merge", str(merged), str(tmp_path)]) == 0
    assert json.loads(merged.read_text())["shard"]["count"] == 2
    capsys.readouterr()
    # OUT that cannot be written: one line, usage exit code.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["merge", str(blocker / "merged.json"), str(s1), str(s2)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scaledmm merge: error: cannot write {blocker / 'merged.json'}: ") and err.count("\n") == 1


# -- project files named like standard modules ------------------------------------------------------------


def test_a_project_file_named_like_a_module_torch_imports_does_not_break_the_isolated_child(matrix_project, pytester):
    # queue.py beside the matrix: the child imported torch with the matrix's directory in front of
    # sys.path, so torch's `import queue` took it, and every case was a HARNESS_ERROR.
    pytester.makepyfile(
        queue="raise RuntimeError('not the standard library queue')",
        mykernels="from planted_kernels import correct as mm",
    )
    matrix_project.write_matrix(matrix_text([planted("mine", "mm", module="mykernels")], {"mode": ["eager"]}))
    result = matrix_project.run("--no-scaledmm-triage", "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert [c["outcome"] for c in matrix_project.report("r.json")["cases"]] == ["PASS"]


def test_a_kernel_module_named_like_a_loaded_module_is_one_clear_error(matrix_project, pytester):
    pytester.makepyfile(queue="from planted_kernels import correct as mm")
    matrix_project.write_matrix(matrix_text([planted("mine", "mm", module="queue")]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = _usage_lines(result)
    assert (
        "cannot load 'queue:mm'" in line
        and f"not {pytester.path / 'queue.py'}: give your kernel module a name of its own" in line
    )


# -- ini values of the wrong type, case ids from elsewhere ------------------------------------------------


def test_an_ini_list_that_is_not_all_words_is_one_error_or_the_hint_never_an_internal_error(matrix_project, pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nscaledmm_case = ["a", 1]\n')
    pytester.makepyfile(test_plain="def test_ok(): pass")
    plain = matrix_project.run("test_plain.py")  # the project's own tests, no matrix
    assert plain.ret == 0 and "INTERNALERROR" not in plain.stdout.str() + plain.stderr.str()
    assert any("scaledmm_case = a 1 take(s) effect only with --scaledmm-matrix" in line for line in plain.outlines)
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result) == [
        "ERROR: pyproject.toml [tool.pytest.ini_options] scaledmm_case = a 1: expected a list of words"
    ]


def test_a_case_id_names_its_source_and_the_shard_that_runs_it(matrix_project, monkeypatch):
    matrix_project.write_matrix(MATRIX)
    monkeypatch.setenv("SCALEDMM_CASE", "nope")
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result)[0].startswith("ERROR: SCALEDMM_CASE=nope: unknown case id 'nope' in profile 'default'")
    monkeypatch.delenv("SCALEDMM_CASE")
    in_first = set(matrix_project.collect("--scaledmm-shard", "1/2"))
    other = next(cid for cid in matrix_project.collect() if cid not in in_first)
    result = matrix_project.run(
        *IN_PROCESS,
        "--scaledmm-matrix",
        "--scaledmm-shard",
        "1/2",
        "--scaledmm-case",
        other,
        "--scaledmm-report",
        "r.json",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result) == [
        f"ERROR: --scaledmm-case: case id '{other}' is not in shard 1/2: another shard runs it"
        " (leave out --scaledmm-shard to run it)"
    ]


def test_first_failure_in_a_real_run_reads_the_last_results_not_its_own_placeholder(matrix_project):
    # The run claims its report path (an unfinished placeholder) before collection: that newest
    # file held no case, so the last run's failures were never put first outside --collect-only.
    matrix_project.write_matrix(MATRIX)
    assert matrix_project.run(*IN_PROCESS, "--scaledmm-matrix").ret == 1
    assert matrix_project.collect()[0].startswith("correct.")  # the plain order starts with passes
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-first-failure", "-v")
    ran = [line.split("::", 1)[1].split(" ")[0] for line in result.outlines if line.startswith("matrix.yaml::")]
    assert len(ran) == 4 and all(cid.startswith("ignores_scale_b.") for cid in ran[:2])


def test_shard_1_of_1_is_the_whole_run_and_gates_as_one(tmp_path, capsys):
    from reports_factory import case, report, write

    cases = [case(f"k-{i}", "PASS") for i in range(2)]
    full = write(tmp_path / "full.json", report(cases))
    whole = write(tmp_path / "s1.json", _shard_report(cases, 1, 1, [c["id"] for c in cases], torch="2.14.0"))
    assert main(["gate", "--baseline", str(full), "--candidate", str(whole)]) == 0
    assert "merge the shards first" not in capsys.readouterr().out
