"""The matrix file: profiles bound the cases; a malformed matrix, an unknown profile or device is
one usage error naming the key; edits that would let a wrong answer pass are refused (a duplicate
key, a slack over the cap, user code under a built-in kernel's name)."""

import pytest

from matrices import WITHOUT_M65536_YAML, matrix_text, planted
from pytest_scaledmm.matrix.spec import MAX_SLACK


def torch_has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_profile_bounds_the_number_of_cases(matrix_project):
    axes = {"scale_a": ["tensor_0d", "tensor_1d"], "scale_b": ["tensor_0d", "tensor_1d"]}
    matrix_project.write_matrix(
        matrix_text([planted("correct")], axes, profiles={"default": {"cases": 3}, "small": {"cases": 2}})
    )
    assert len(matrix_project.collect()) == 3
    assert len(matrix_project.collect("--scaledmm-profile", "small")) == 2


@pytest.mark.parametrize(
    "text, key",
    [
        (
            "version: 1\nkernels: [aten_scaled_mm]\naxes: {mode: [warp-speed]}\nprofiles: {default: {cases: 1}}\n",
            "axes.mode[0]",
        ),
        (
            "version: 1\nkernels: [aten_scaled_mm]\naxes: {}\nprofiles: {default: {cases: 1}}\nshapes: []\n",
            "(top level)",
        ),
        ("version: 1\nkernels: [nope]\naxes: {}\nprofiles: {default: {cases: 1}}\n", "kernels[0]"),
        (
            "version: 1\nkernels: [aten_scaled_mm]\naxes: {m: {min: 9, max: 2}}\nprofiles: {default: {cases: 1}}\n",
            "axes.m",
        ),
        (
            "version: 1\nkernels: [{name: k, impl: 'no_such_module:fn'}]\naxes: {}\nprofiles: {default: {cases: 1}}\n",
            "kernels[0].impl",
        ),
        ("version: 1\nkernels: [aten_scaled_mm\naxes: {}\n", ""),
    ],
)
def test_malformed_matrix_is_one_clear_usage_error(matrix_project, text, key):
    matrix_project.write_matrix(text)
    result = matrix_project.run("--scaledmm-matrix")
    assert result.ret == 4
    err = result.stderr.str()
    assert "matrix.yaml" in err and f"key '{key}'" in err if key else "not valid YAML" in err
    assert "Traceback" not in err + result.stdout.str()


def test_unknown_profile_and_device_are_usage_errors(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-profile", "huge")
    assert result.ret == 4 and "key 'profiles.huge'" in result.stderr.str()
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-device", "tpu")
    assert result.ret == 4 and "--scaledmm-device" in result.stderr.str()
    if not torch_has_gpu():
        result = matrix_project.run("--scaledmm-matrix", "--scaledmm-device", "cuda")
        assert result.ret == 4 and "torch.cuda.is_available() is False" in result.stderr.str()
        assert "Traceback" not in result.stderr.str() + result.stdout.str()


# -- edits that would let a wrong answer pass ------------------------------------------------------


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
    path = matrix_project.write_matrix(text + WITHOUT_M65536_YAML)
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
