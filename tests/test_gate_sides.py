"""The gate's failure key per side and per count: a case that fails in both releases with one
class and signature is still news when a side does worse (a compiled side that passed now raises
behind an old eager mismatch) or when it is off by more (one NaN now all NaN, one element off now
every element). Real runs of planted kernels (tests/planted_gate_kernels.py), gated by the CLI and
by --scaledmm-baseline."""

import pytest

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
    assert main(["compare", str(matrix_project.path / "old.json"), str(matrix_project.path / "new.json")]) == 0
    assert "regression" in capsys.readouterr().out
    # The same inside pytest: the candidate's own run against the baseline fails.
    result = matrix_project.run(
        *IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "again.json", "--scaledmm-baseline", "old.json"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(["gate FAILED: 1 case(s) newly fail in *", "*compiled: passed -> raised *"])


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
