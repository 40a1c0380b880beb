"""The gate's failure key per side and per count: a case that fails in both releases with one
class and signature is still news when a side does worse (a compiled side that passed now raises
behind an old eager mismatch) or when it is off by more (one NaN now all NaN, one element off now
every element). Real runs of planted kernels (tests/planted_gate_kernels.py), gated by the CLI and
by --scaledmm-baseline."""

import pytest
from reports_factory import BASE, CAND, case, gate, report

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main

# 16 x 32 = 512 output elements.
AXES = {"m": [16], "n": [32]}


def _run(matrix_project, impl, report):
    """One case of kernel `k` (one id, whatever it runs) run by `impl`; the record."""
    matrix_project.write_matrix(matrix_text([planted("k", impl, module="planted_gate_kernels")], AXES))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", report)
    result.assert_outcomes(failed=1)
    return matrix_project.report(report)["cases"][0]


def _gate(matrix_project, capsys, *extra) -> tuple[int, str]:
    path = matrix_project.path
    code = main(["gate", "--baseline", str(path / "old.json"), "--candidate", str(path / "new.json"), *extra])
    return code, capsys.readouterr().out


def test_compiled_side_raising_behind_an_old_eager_mismatch_is_a_regression(matrix_project, capsys):
    old = _run(matrix_project, "eager_off", "old.json")
    new = _run(matrix_project, "eager_off_compile_raises", "new.json")
    # What the combined key saw: the same class and signature.
    assert (old["outcome"], old["signature"]) == (new["outcome"], new["signature"])
    code, out = _gate(matrix_project, capsys)
    assert code == 1, out
    assert "regression: 1 case MISMATCH -> MISMATCH (compiled: passed -> raised " in out
    reports = [str(matrix_project.path / "old.json"), str(matrix_project.path / "new.json")]
    markdown, html = matrix_project.path / "changes.md", matrix_project.path / "changes.html"
    assert main(["compare", *reports, "--markdown", str(markdown), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "MISMATCH -> MISMATCH (compiled: passed -> raised " in out
    for written in (markdown, html):
        assert "MISMATCH → MISMATCH \\(compiled: passed -&gt; raised " in written.read_text() or (
            "MISMATCH → MISMATCH (compiled: passed -&gt; raised " in written.read_text()
        ), written
    # The same inside pytest: the candidate's own run against the baseline fails.
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "again.json", "--scaledmm-baseline", "old.json"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(["gate FAILED: 1 case(s) newly fail in *", "*compiled: passed -> raised *"])


def test_a_side_raising_another_message_is_a_changed_failure(matrix_project, capsys):
    _run(matrix_project, "eager_off_compile_raises", "old.json")
    _run(matrix_project, "eager_off_compile_raises_otherwise", "new.json")
    code, out = _gate(matrix_project, capsys)
    assert code == 1, out
    assert "signature changed: 1 case MISMATCH -> MISMATCH (compiled: raised " in out
    assert "illegal memory access" in out


def test_later_calls_failing_behind_a_wrong_first_call_are_a_regression(matrix_project, capsys):
    # The first eager call is off in both; in the candidate the serving loop's later calls raise.
    _run(matrix_project, "eager_off", "old.json")
    new = _run(matrix_project, "eager_off_later_calls_raise", "new.json")
    assert new["errors"]["eager"]["later"]["ok"] is False
    code, out = _gate(matrix_project, capsys)
    assert code == 1, out
    # eager_off's later calls are off as its first is; the candidate's raise.
    assert "(eager later calls: off -> raised RuntimeError)" in out


def test_a_side_that_raises_behind_a_crash_is_a_regression(matrix_project, capsys):
    # A CRASH record keeps no checks: a compiled side not known to fail before raises now.
    old = _run(matrix_project, "eager_exits", "old.json")
    new = _run(matrix_project, "eager_exits_compile_raises", "new.json")
    assert old["outcome"] == new["outcome"] == "CRASH"
    code, out = _gate(matrix_project, capsys)
    assert code == 1, out
    assert "compiled: not checked -> raised " in out


def test_a_side_that_gets_better_is_no_regression(matrix_project, capsys):
    _run(matrix_project, "eager_off_compile_raises", "old.json")
    _run(matrix_project, "eager_off", "new.json")
    code, out = _gate(matrix_project, capsys)
    assert code == 0 and "gate passed" in out


@pytest.mark.parametrize(
    "before, after, grown",
    [
        ("one_nan", "all_nan", "eager non-finite elements 1 -> 512 (x512)"),
        ("one_off", "all_off", "eager off elements 1 -> 512 (x512)"),
    ],
)
def test_the_same_failure_on_many_more_elements_is_worse(matrix_project, capsys, before, after, grown):
    old = _run(matrix_project, before, "old.json")
    new = _run(matrix_project, after, "new.json")
    assert (old["outcome"], old["signature"]) == (new["outcome"], new["signature"])
    check = old["errors"]["eager"]
    assert check["elements"] == 512 and check["off_elements"] == 1
    assert (check["off_rows"], check["off_columns"]) == (1, 1)
    assert check["nonfinite"] == (1 if before == "one_nan" else 0)
    assert new["errors"]["compiled"]["off_elements"] == 512
    code, out = _gate(matrix_project, capsys)
    assert code == 1, out
    assert "gate FAILED: 1 case(s) newly fail or fail worse" in out and grown in out
    assert "compiled off rows 1 -> 16 (x16)" in out
    code, out = _gate(matrix_project, capsys, "--allow-worse")
    assert code == 0 and "note: accepted (--allow-worse): worse: 1 case" in out


def test_the_same_failure_on_fewer_elements_is_not_worse(matrix_project, capsys):
    _run(matrix_project, "all_nan", "old.json")
    _run(matrix_project, "one_nan", "new.json")
    code, out = _gate(matrix_project, capsys)
    assert code == 0, out


# -- crafted records: the same failure read off each side ----------------------------------------


def _mismatch(cid, compiled_error=None, **eager_check):
    record = case(cid, "MISMATCH", "MISMATCH: eager values off the reference by one constant factor")
    record["errors"] = {"eager": {"ok": False, "ratio": 20.0, **eager_check}, "compiled": None}
    record["compiled_error"] = compiled_error
    return record


def _raised(root_type, message="raised exception RuntimeError('x')"):
    return {"type": "torch._dynamo.exc.Unsupported", "message": "m", "root_type": root_type, "root_message": message}


def test_dynamo_renaming_a_traced_error_is_the_same_error(tmp_path, capsys):
    # Older Dynamo: ObservedRuntimeError; newer: ObservedRuntimeErrorError. The same RuntimeError.
    baseline = report([_mismatch("c1", _raised("torch._dynamo.exc.ObservedRuntimeError"))], **BASE)
    candidate = report([_mismatch("c1", _raised("torch._dynamo.exc.ObservedRuntimeErrorError"))], **CAND)
    assert gate(tmp_path, baseline, candidate) == 0, capsys.readouterr().out


@pytest.mark.parametrize(
    "counts, reason",
    [
        ({"elements": 512, "off_elements": 10**400}, "eager off elements cannot be read in the candidate"),
        ({"elements": 512, "off_elements": -1}, "eager off elements cannot be read in the candidate"),
        ({"elements": 512, "off_elements": 600}, "eager off elements cannot be read in the candidate"),
        ({"elements": 512}, "eager off elements 1 in the baseline, not recorded in the candidate"),
    ],
)
def test_counts_that_cannot_be_read_are_not_proven(tmp_path, capsys, counts, reason):
    baseline = report([_mismatch("c1", None, elements=512, off_elements=1)], **BASE)
    candidate = report([_mismatch("c1", None, **counts)], **CAND)
    code = gate(tmp_path, baseline, candidate)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    # Refused at load (one line naming the field) or gated as not shown to be no worse.
    assert (code == 2 and captured.err.count("\n") == 1 and "off_elements" in captured.err) or (
        code == 1 and reason in captured.out
    ), captured


@pytest.mark.parametrize("shape", [(4, 0), (0, 16), (0, 0), (2, 0, 16)])
def test_an_empty_output_is_checked_and_counted(shape):
    # M or N of 0 (an idle expert, an empty batch): an output of no elements is still checked.
    import torch  # noqa: PLC0415  torch: only this test needs it

    from pytest_scaledmm.verdict.reference import Reference, compare  # noqa: PLC0415  imports torch

    value = torch.zeros(shape, dtype=torch.float64)
    check = compare(torch.zeros(shape, dtype=torch.bfloat16), Reference(value, value + 1, {}), shape, torch.bfloat16)
    assert check["ok"] is True
    assert {k: check[k] for k in ("elements", "off_elements", "off_rows", "off_columns", "nonfinite")} == dict.fromkeys(
        ("elements", "off_elements", "off_rows", "off_columns", "nonfinite"), 0
    )


def test_an_axis_of_empty_sizes_only_is_no_crash(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")], {"m": [0]}))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "r.json")
    assert result.ret in (0, 5) and "Traceback" not in result.stderr.str() + result.stdout.str()
