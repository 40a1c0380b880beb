"""End to end, the README's main job: a user's own project, outside this repository, puts its
kernels through the matrix with the installed plugin; and a run of planted kernels classifies each
case (matrix.yaml -> cases -> eager vs compiled vs float64 reference -> outcome class in the report)."""

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from matrices import matrix_text, planted

# -- a user's own project --------------------------------------------------------------------------


REPO = Path(__file__).resolve().parents[1]


KERNELS = '''
"""The user's kernels: a per-tensor fp8 linear in their framework's style, in plain torch."""
import torch


def scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    tokens = a.reshape(-1, a.shape[-1])
    out = (tokens.float() @ b.float()) * scale_a.float().reshape(-1, 1) * scale_b.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype).reshape(*a.shape[:-1], b.shape[-1])


def rowwise_only(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
'''


CONFTEST = """
import mykernels
from pytest_scaledmm.matrix.kernels import Kernel


def pytest_scaledmm_kernels(config):
    return [Kernel("my_rowwise", mykernels.rowwise_only, scale_forms=["rowwise"])]
"""


MATRIX = """
version: 1
kernels:
  - name: my_fp8_linear
    impl: mykernels:scaled_mm
    scale_forms: [tensor_0d, tensor_1d, rowwise]
axes:
  scale_a: [tensor_0d, tensor_1d, rowwise]
  scale_b: [tensor_0d, tensor_1d]
  activation_rank: [2, 3]
  bias: [false, true]
  mode: [aot_eager]
  m: [1, 6]
  k: [32]
  n: [16]
profiles:
  default: {cases: 12}
"""


def _installed_entry_point():
    return [ep for ep in metadata.entry_points(group="pytest11") if ep.value == "pytest_scaledmm.plugin.entry"]


@pytest.mark.slow
@pytest.mark.skipif(not _installed_entry_point(), reason="pytest-scaledmm is not installed in this interpreter")
def test_user_project_runs_its_own_kernels(tmp_path):
    project = tmp_path / "user_project"
    project.mkdir()
    (project / "mykernels.py").write_text(textwrap.dedent(KERNELS))
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "matrix.yaml").write_text(textwrap.dedent(MATRIX))
    assert REPO not in project.parents
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--scaledmm-matrix",
        "--scaledmm-report",
        "out.json",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore",
    ]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "scaledmm-" in output  # the header lists the plugin, loaded through its entry point
    assert "scaled-mm matrix" in output
    report = json.loads((project / "out.json").read_text())
    kernels = {c["params"]["kernel"] for c in report["cases"]}
    assert kernels == {"my_fp8_linear", "my_rowwise"}
    assert {c["outcome"] for c in report["cases"]} == {"PASS"}
    assert {c["params"]["scale_a"] for c in report["cases"] if c["params"]["kernel"] == "my_rowwise"} == {"rowwise"}
    assert {c["params"]["activation_rank"] for c in report["cases"]} == {2, 3}


# -- each outcome class from a planted kernel ------------------------------------------------------


EXPECTED_CLASS = {
    "correct": "PASS",
    "ignores_scale_b": "MISMATCH",
    "asserts_rank_under_compile": "COMPILE_ONLY_ERROR",
    "refuses_only_in_eager": "ERROR_PARITY",
    "refuses_everywhere": "REFUSED",  # a user kernel refusing what it declares to support
    "declares_m_at_least_8": "UNSUPPORTED",  # the same kernel declaring min_m: 8, at M = 4
    "forces_eager": "FALLBACK",
}


# Kernels of EXPECTED_CLASS that run another planted function, with their declarations.
DECLARED = {"declares_m_at_least_8": planted("declares_m_at_least_8", "refuses_everywhere", min_m=8)}
SPINE_MATRIX = matrix_text([DECLARED.get(name) or planted(name) for name in EXPECTED_CLASS])


def test_each_outcome_class_from_a_planted_kernel(matrix_project):
    matrix_project.write_matrix(SPINE_MATRIX)
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    # UNSUPPORTED is a skip; PASS a pass; the five others fail.
    result.assert_outcomes(passed=1, skipped=1, failed=5)
    report = matrix_project.report()
    found = {case["params"]["kernel"]: case["outcome"] for case in report["cases"]}
    assert found == EXPECTED_CLASS
    by_kernel = {case["params"]["kernel"]: case for case in report["cases"]}
    assert by_kernel["ignores_scale_b"]["layer"] == "eager+compiled"
    assert by_kernel["forces_eager"]["extra"]["compiled_graph_calls"] == 0
    assert by_kernel["correct"]["extra"]["compiled_graph_calls"] >= 1
    assert by_kernel["refuses_only_in_eager"]["eager_error"]["type"] == "builtins.ValueError"
    summary = result.stdout.str()
    assert "PASS 1, UNSUPPORTED 1, MISMATCH 1, COMPILE_ONLY_ERROR 1, ERROR_PARITY 1, FALLBACK 1, REFUSED 1" in summary
    assert "min_m: 8" in by_kernel["declares_m_at_least_8"]["detail"]
