"""A user's own project, outside this repository, puts its kernels through the matrix with the
installed plugin: its own kernel module, matrix.yaml and conftest hook, run by `pytest
--scaledmm-matrix` in a fresh interpreter that finds the plugin through its entry point."""

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

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
