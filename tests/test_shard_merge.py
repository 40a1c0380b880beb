"""--scaledmm-shard I/N and `scaledmm merge`: the shards of a run, merged, are the unsharded run;
a missing or duplicated shard makes an incomplete report that the gate fails on; a shard gated
alone is told to merge first, a shard may hold no case, and a merge never writes over its inputs."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from case_factory import case_record
from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.matrix.compile_modes import MODES
from pytest_scaledmm.plugin.cost import case_cost
from pytest_scaledmm.plugin.shard import assign, parse_shard

# Each compile mode's expected seconds: the cost model sharding deals cases out by.
MODE_COST = {mode.name: case_cost(case_record(mode=mode.name)) for mode in MODES}

# 2 kernels x 2 modes x 2 output dtypes x 2 M: 16 cases, one kernel failing (MISMATCH).
MATRIX = matrix_text(
    [planted("correct"), planted("ignores_scale_b")],
    {"mode": ["eager", "aot_eager"], "out_dtype": ["bf16", "fp16"], "m": [4, 8]},
)


def _outcomes(report):
    return {c["id"]: c["outcome"] for c in report["cases"]}


def _run(root, *args):
    """pytest on `root`/matrix.yaml in a fresh process (xdist workers find the planted kernels
    through PYTHONPATH)."""
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
    env.pop("GITHUB_STEP_SUMMARY", None)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-W",
        "ignore",
        "--scaledmm-matrix",
        "matrix.yaml",
        *IN_PROCESS,
    ]
    return subprocess.run([*command, *args], cwd=root, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One unsharded run and shards 1/2 and 2/2 of the same matrix, run once for this module."""
    root = tmp_path_factory.mktemp("shards")
    (root / "matrix.yaml").write_text(MATRIX)
    done = {}
    for name, extra in (("full", []), ("s1", ["--scaledmm-shard", "1/2"]), ("s2", ["--scaledmm-shard", "2/2"])):
        proc = _run(root, *extra, "--scaledmm-report", f"{name}.json")
        assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # the planted MISMATCH fails the run
        done[name] = json.loads((root / f"{name}.json").read_text())
    return root, done


def test_shard_values_are_checked():
    assert parse_shard("2/4") == (2, 4) and parse_shard(" 1 / 1 ") == (1, 1) and parse_shard(None) is None
    for bad in ("0/2", "3/2", "1/0", "2", "a/b", "-1/2", "1/2/3", ""):
        with pytest.raises(pytest.UsageError, match="--scaledmm-shard: .* is not I/N"):
            parse_shard(bad)


def test_a_bad_shard_is_one_usage_error(matrix_project):
    matrix_project.write_matrix(MATRIX)
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-shard", "3/2", "--scaledmm-report", "r.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [
        "ERROR: --scaledmm-shard: '3/2' is not I/N with whole numbers 1 <= I <= N (e.g. 2/4 for the second of four shards)"
    ]


def test_assignment_is_deterministic_balanced_and_order_free():
    costs = [(f"case-{i:03d}-{mode}", MODE_COST[mode]) for i, mode in enumerate(list(MODE_COST) * 12)]
    owner = assign(costs, 3)
    assert owner == assign(list(reversed(costs)), 3)[::-1]  # the input's order does not matter
    loads = Counter()
    for (_cid, cost), shard in zip(costs, owner):
        loads[shard] += cost
    assert set(owner) == {0, 1, 2}
    # Longest processing time first: the spread is at most one case's cost.
    assert max(loads.values()) - min(loads.values()) <= max(MODE_COST.values())
    expensive = [shard for (cid, cost), shard in zip(costs, owner) if cost == max(MODE_COST.values())]
    assert len(set(expensive)) == 3  # the most expensive cases are spread, not stacked


@pytest.mark.slow
def test_two_shards_merged_equal_one_unsharded_run(runs, tmp_path, capsys):
    root, done = runs
    full, s1, s2 = done["full"], done["s1"], done["s2"]
    ids1, ids2 = set(_outcomes(s1)), set(_outcomes(s2))
    assert ids1 and ids2 and not ids1 & ids2 and ids1 | ids2 == set(_outcomes(full))
    assert s1["shard"]["index"] == 1 and s2["shard"]["index"] == 2 and s1["shard"]["count"] == 2
    assert s1["shard"]["total_cases"] == len(full["cases"]) == 16
    assert s1["shard"]["total_ids_sha256"] == s2["shard"]["total_ids_sha256"]
    assert s1["session"]["complete"] and s1["session"]["generated"] == len(ids1)

    merged = tmp_path / "merged.json"
    assert main(["merge", str(merged), str(root / "s2.json"), str(root / "s1.json")]) == 0
    assert capsys.readouterr().out.strip() == f"merged 2 shard(s) into {merged}: 16 case(s), complete"
    report = json.loads(merged.read_text())
    assert _outcomes(report) == _outcomes(full)  # same ids, same outcomes
    assert report["summary"] == full["summary"] and report["summary"]["MISMATCH"] == 8
    assert (
        report["session"]["complete"] is True and report["session"]["generated"] == report["session"]["recorded"] == 16
    )
    assert report["matrix"]["cases"] == 16 and report["coverage"]["pairwise"] == full["coverage"]["pairwise"]
    assert [m["index"] for m in report["shard"]["merged"]] == [1, 2]
    # The gate takes the merged report for the unsharded one: no new failure.
    assert main(["gate", "--baseline", str(root / "full.json"), "--candidate", str(merged)]) == 0


@pytest.mark.parametrize(
    "shards, reason",
    [
        (["s1"], "shard(s) 2/2 missing: 1 of 2 not given"),
        (["s1", "s1", "s2"], "shard 1/2 is duplicated: given 2 times"),
    ],
)
def test_a_missing_or_duplicated_shard_is_incomplete_and_the_gate_fails(runs, tmp_path, capsys, shards, reason):
    root, done = runs
    merged = tmp_path / "merged.json"
    assert main(["merge", str(merged), *(str(root / f"{name}.json") for name in shards)]) == 1
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and err.startswith(f"scaledmm merge: merged report {merged} is INCOMPLETE: ")
        and reason in err
    )
    report = json.loads(merged.read_text())
    assert report["session"]["complete"] is False and any(reason in r for r in report["session"]["incomplete_reasons"])
    assert main(["gate", "--baseline", str(root / "full.json"), "--candidate", str(merged)]) == 1
    assert "the candidate run is incomplete" in capsys.readouterr().out


def test_shards_of_different_runs_or_unsharded_reports_do_not_merge(runs, tmp_path, capsys):
    root, done = runs
    other = json.loads((root / "s2.json").read_text())
    other["matrix"]["seed"] = 7
    (tmp_path / "other.json").write_text(json.dumps(other))
    merged = tmp_path / "merged.json"
    assert main(["merge", str(merged), str(root / "s1.json"), str(tmp_path / "other.json")]) == 1
    assert "key 'matrix.seed' differs" in capsys.readouterr().err
    assert main(["merge", str(merged), str(root / "s1.json"), str(root / "full.json")]) == 1
    assert "full.json: not a shard report" in capsys.readouterr().err
    (tmp_path / "corrupt.json").write_text("{")
    assert (
        main(["merge", str(merged), str(root / "s1.json"), str(root / "s2.json"), str(tmp_path / "corrupt.json")]) == 1
    )
    assert "corrupt.json: not a report (corrupt JSON" in capsys.readouterr().err
    assert json.loads(merged.read_text())["session"]["complete"] is False


def test_a_shard_that_lost_a_case_makes_the_merge_incomplete(runs, tmp_path, capsys):
    root, done = runs
    cut = json.loads((root / "s2.json").read_text())
    cut["cases"] = cut["cases"][1:]
    cut["session"]["recorded"] -= 1
    cut["summary"] = dict(Counter(c["outcome"] for c in cut["cases"]))
    (tmp_path / "cut.json").write_text(json.dumps(cut))
    assert main(["merge", str(tmp_path / "m.json"), str(root / "s1.json"), str(tmp_path / "cut.json")]) == 1
    assert "cut.json: shard 2/2 is incomplete" in capsys.readouterr().err


def test_merge_never_overwrites_a_file_that_is_not_a_report(runs, tmp_path, capsys):
    root, done = runs
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}')
    assert main(["merge", str(notes), str(root / "s1.json"), str(root / "s2.json")]) == 2
    assert "is there and is not a pytest-scaledmm report: it is never overwritten" in capsys.readouterr().err
    assert notes.read_text() == '{"mine": true}'


@pytest.mark.slow
def test_shards_under_xdist_run_the_same_cases(runs):
    """Each runner may use xdist inside its shard: the workers collect the shard's slice, and the
    controller's report is that shard's (each worker still takes its own GPU by its number)."""
    root, done = runs
    proc = _run(root, "-n", "2", "--scaledmm-shard", "1/2", "--scaledmm-report", "x.json")
    assert proc.returncode == 1, proc.stdout[-2000:]
    report = json.loads((root / "x.json").read_text())
    assert _outcomes(report) == _outcomes(done["s1"]) and report["session"]["complete"] is True
    assert report["shard"] == done["s1"]["shard"]


# -- a shard's report gated or compared alone ------------------------------------------------------


TWO_KERNELS = matrix_text([planted("correct"), planted("ignores_scale_b")], {"out_dtype": ["bf16", "fp16"]})


def _usage_lines(result):
    return [line for line in result.stderr.lines if line.strip()]


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


def test_shard_1_of_1_is_the_whole_run_and_gates_as_one(tmp_path, capsys):
    from reports_factory import case, report, write

    cases = [case(f"k-{i}", "PASS") for i in range(2)]
    full = write(tmp_path / "full.json", report(cases))
    whole = write(tmp_path / "s1.json", _shard_report(cases, 1, 1, [c["id"] for c in cases], torch="2.14.0"))
    assert main(["gate", "--baseline", str(full), "--candidate", str(whole)]) == 0
    assert "merge the shards first" not in capsys.readouterr().out


# -- a shard that gets no case, and explore --------------------------------------------------------


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
    matrix_project.write_matrix(TWO_KERNELS)
    monkeypatch.setenv("SCALEDMM_SHARD", "1/2")
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-explore", "--scaledmm-report", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _usage_lines(result) == [
        "ERROR: SCALEDMM_SHARD=1/2: --scaledmm-explore searches the axes; it is not split into shards"
    ]


# -- scaledmm merge never loses an input or a run's report -----------------------------------------


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


def test_merge_keeps_an_earlier_merged_report_of_another_run_aside(tmp_path, capsys):
    """The published baseline is a merged report: one shard of a later run merged onto it by a
    slip leaves it at OUT.previous.json, as a run's --scaledmm-report leaves the earlier one."""
    cases = [case(f"k-{i}", "PASS") for i in range(2)]
    ids = [c["id"] for c in cases]

    def shards(run, started):
        return [
            write(
                tmp_path / f"{run}-s{i}.json", _shard_report(cases[i - 1 : i], i, 2, ids, session={"started": started})
            )
            for i in (1, 2)
        ]

    main_run = shards("main", "2026-01-01T00:00:00.000001+00:00")
    baseline = tmp_path / "baseline.json"
    assert main(["merge", str(baseline), *map(str, main_run)]) == 0
    complete = baseline.read_bytes()
    capsys.readouterr()
    # The same run merged again replaces it: nothing is lost, nothing kept aside.
    assert main(["merge", str(baseline), *map(str, main_run)]) == 0
    assert baseline.read_bytes() == complete and not (tmp_path / "baseline.previous.json").exists()
    assert "kept as" not in capsys.readouterr().out

    later = shards("pr", "2026-02-01T00:00:00.000001+00:00")
    assert main(["merge", str(baseline), str(later[0])]) == 1
    out, err = capsys.readouterr()
    kept = tmp_path / "baseline.previous.json"
    assert out.splitlines()[0] == f"the earlier merged report at {baseline} (another run) is kept as {kept}"
    assert "is INCOMPLETE: shard(s) 2/2 missing" in err
    assert kept.read_bytes() == complete  # the complete baseline, byte for byte
    assert json.loads(baseline.read_text())["session"]["complete"] is False
    # The rest of that run merged in: the incomplete merge of the same run is replaced.
    assert main(["merge", str(baseline), *map(str, later)]) == 0
    assert "kept as" not in capsys.readouterr().out and kept.read_bytes() == complete


CAND = dict(torch="2.13.0")


def test_merge_names_a_shard_given_twice_as_duplicated(tmp_path, capsys):
    shard = report([case("c1", "PASS")], **CAND)
    shard["shard"] = {"index": 1, "count": 2, "total_cases": 2, "total_ids_sha256": "0"}
    s1 = write(tmp_path / "s1.json", shard)
    assert main(["merge", str(tmp_path / "out.json"), str(s1), str(s1)]) == 1
    err = capsys.readouterr().err
    assert "shard 1/2 is duplicated: given 2 times" in err.splitlines()[0], err


def test_a_partial_merge_of_a_run_never_replaces_its_complete_merge(tmp_path, capsys):
    """The same run's key (first start, whole run's hash) matches a subset of its shards: one
    shard merged onto the complete merge keeps that merge aside."""
    cases = [case(f"k-{i}", "PASS") for i in range(4)]
    ids = [c["id"] for c in cases]
    started = {"started": "2026-01-01T00:00:00.000001+00:00"}
    s1, s2 = (
        write(tmp_path / f"s{i}.json", _shard_report(cases[i - 1 :: 2], i, 2, ids, session=started)) for i in (1, 2)
    )
    out, kept = tmp_path / "out.json", tmp_path / "out.previous.json"
    assert main(["merge", str(out), str(s1), str(s2)]) == 0
    complete = out.read_bytes()
    capsys.readouterr()
    assert main(["merge", str(out), str(s1)]) == 1
    printed, err = capsys.readouterr()
    assert printed.splitlines()[0] == f"the earlier merged report at {out} (more shards of this run) is kept as {kept}"
    assert "is INCOMPLETE: shard(s) 2/2 missing" in err
    assert kept.read_bytes() == complete
    # Merged whole again: the partial merge is replaced, the kept one stays.
    assert main(["merge", str(out), str(s1), str(s2)]) == 0
    assert "kept as" not in capsys.readouterr().out and kept.read_bytes() == complete
    assert json.loads(out.read_text())["session"]["complete"] is True


def test_a_shard_count_from_a_crafted_file_is_counted_not_listed(tmp_path, capsys):
    """N is the file's word: a huge N makes an incomplete merge naming the first missing shards
    and how many more, without a list of every one (which would exhaust memory)."""
    shard = report([case("c1", "PASS")], **CAND)
    shard["shard"] = {"index": 1, "count": 10**30, "total_cases": 1, "total_ids_sha256": "0"}
    out = tmp_path / "out.json"
    assert main(["merge", str(out), str(write(tmp_path / "s1.json", shard))]) == 1
    err = capsys.readouterr().err
    more = 10**30 - 1 - 20
    assert f"shard(s) 2/{10**30}, 3/{10**30}" in err and f" and {more} more missing: {10**30 - 1} of {10**30}" in err
    assert len(out.read_bytes()) < 100_000


def _index_a_list(data):
    data["shard"]["merged"][0]["index"] = []


def _id_an_object(data):
    data["cases"][0]["id"] = {"a": 1}


def _blocks_of_other_types(data):
    data.update(session=[1], matrix="x", environment=7)


@pytest.mark.parametrize("craft", [_index_a_list, _id_an_object, _blocks_of_other_types])
def test_a_crafted_earlier_merge_at_out_is_moved_aside_not_a_traceback(tmp_path, capsys, craft):
    """OUT is read as plain JSON before the merge: whatever the fields of the earlier merge there
    hold, the merge is made and the earlier file kept aside."""
    cases = [case(f"k-{i}", "PASS") for i in range(2)]
    ids = [c["id"] for c in cases]
    s1, s2 = (write(tmp_path / f"s{i}.json", _shard_report(cases[i - 1 :: 2], i, 2, ids)) for i in (1, 2))
    out = tmp_path / "out.json"
    assert main(["merge", str(out), str(s1), str(s2)]) == 0
    earlier = json.loads(out.read_text())
    craft(earlier)
    out.write_text(json.dumps(earlier))
    capsys.readouterr()
    assert main(["merge", str(out), str(s1), str(s2)]) == 0
    printed = capsys.readouterr().out
    assert f"is kept as {tmp_path / 'out.previous.json'}" in printed, printed
    assert json.loads((tmp_path / "out.previous.json").read_text()) == earlier
