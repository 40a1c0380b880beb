"""Matrix edits that would let a wrong answer pass are refused: a second key that silently
overrides the first, and a slack so large that the bound accepts anything."""

import pytest

from pytest_scaledmm.matrix.spec import MAX_SLACK

SMALL = """\
version: 1
kernels: [aten_scaled_mm]
axes:
  mode: [eager]
  m: [4]
  k: [32]
  n: [16]
profiles:
  default: {cases: 1}
"""


def _one_error_line(result):
    err = [line for line in result.stderr.lines if line.strip()]
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    assert len(err) == 1, err
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    return err[0]


def _run(matrix_project, text):
    path = matrix_project.write_matrix(text)
    return matrix_project.run("--scaledmm-matrix", str(path), "--scaledmm-isolate=no", "--no-scaledmm-triage")


def test_a_duplicate_key_is_refused_naming_both_lines(matrix_project):
    text = SMALL + "tolerance: {slack: 1}\nnotes: x\ntolerance: {slack: 4}\n"
    result = _run(matrix_project, text)
    line = _one_error_line(result)
    assert "matrix.yaml" in line and "duplicate key 'tolerance'" in line, line
    assert "first at line 10" in line and "line 12" in line, line


def test_a_merge_key_may_still_be_overridden(matrix_project):
    text = SMALL + "x-base: &base {slack: 2}\ntolerance:\n  <<: *base\n  slack: 1\n"
    result = _run(matrix_project, text)
    assert "duplicate key" not in result.stderr.str()


@pytest.mark.parametrize("slack, refused", [(MAX_SLACK, False), (MAX_SLACK * 1.01, True), (1.0e30, True)])
def test_slack_above_the_cap_is_refused(matrix_project, slack, refused):
    result = _run(matrix_project, SMALL + f"tolerance: {{slack: {slack:.6e}}}\n")
    if refused:
        line = _one_error_line(result)
        assert "tolerance.slack" in line and "at most" in line, line
    else:
        assert result.ret in (0, 1), result.stderr.str()
        assert "tolerance.slack" not in result.stderr.str()


def test_user_code_under_a_built_in_name_is_refused(matrix_project):
    text = SMALL.replace(
        "kernels: [aten_scaled_mm]", 'kernels:\n  - {name: aten_scaled_mm, impl: "planted_kernels:correct"}'
    )
    line = _one_error_line(_run(matrix_project, text))
    assert "kernels[0].name" in line and "built-in kernel's name" in line, line
