"""User kernels import like tests do: `impl: module:function` finds a module beside the matrix
file or in the rootdir without PYTHONPATH, in the pytest process, in the isolated child and in
xdist workers; the replay command a failure prints works from any directory."""

import os
import shlex
import textwrap

import pytest
import yaml

KERNELS = '''
import torch


def right(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = (a.float() @ b.float()) * scale_a.float() * scale_b.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


def doubled(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return (2 * right(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype).float()).to(out_dtype)
'''

AXES = {"scale_a": ["tensor_0d"], "scale_b": ["tensor_0d"], "mode": ["aot_eager"], "m": [4, 8], "k": [32], "n": [16]}


def matrix(*kernels) -> str:
    return yaml.safe_dump({"version": 1, "kernels": list(kernels), "axes": AXES,
                           "profiles": {"default": {"cases": 2 * len(kernels)}}}, sort_keys=False)


@pytest.fixture
def clean_path(monkeypatch):
    """No PYTHONPATH: the kernels must be found the way tests are."""
    monkeypatch.delenv("PYTHONPATH", raising=False)


def run(pytester, *args):
    return pytester.runpytest("-p", "no:cacheprovider", "-W", "ignore", *args)


@pytest.mark.parametrize("isolate", ["yes", "no"])
def test_a_module_beside_the_matrix_is_found(pytester, clean_path, isolate):
    project = pytester.mkdir("kernels_beside")
    (project / "beside_mod.py").write_text(KERNELS)
    (project / "matrix.yaml").write_text(matrix({"name": "mine", "impl": "beside_mod:right"}))
    result = run(pytester, "--scaledmm-matrix", str(project / "matrix.yaml"), f"--scaledmm-isolate={isolate}",
                 "--no-scaledmm-triage")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)


def test_a_module_in_the_rootdir_is_found_for_a_matrix_elsewhere(pytester, clean_path):
    pytester.makeini("[pytest]\n")  # the rootdir
    (pytester.path / "rootdir_mod.py").write_text(KERNELS)
    sub = pytester.mkdir("matrices")
    (sub / "m.yaml").write_text(matrix({"name": "mine", "impl": "rootdir_mod:right"}))
    result = run(pytester, "--scaledmm-matrix", "matrices/m.yaml", "--no-scaledmm-triage")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)


def test_xdist_workers_and_their_children_find_it(pytester, clean_path):
    project = pytester.mkdir("kernels_xdist")
    (project / "xdist_mod.py").write_text(KERNELS)
    (project / "matrix.yaml").write_text(matrix({"name": "mine", "impl": "xdist_mod:right"}))
    result = run(pytester, "--scaledmm-matrix", str(project / "matrix.yaml"), "-n", "2", "--no-scaledmm-triage")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)


CONFTEST = '''
import hooked_mod
from pytest_scaledmm.matrix.kernels import Kernel


def pytest_scaledmm_kernels(config):
    return [Kernel("hooked", hooked_mod.right)]
'''


def _replay_line(result) -> str:
    lines = [line for line in result.outlines if line.startswith("replay: ")]
    assert lines, result.stdout.str()
    return lines[0][len("replay: "):]


def test_the_printed_replay_command_works_from_another_directory(pytester, clean_path, monkeypatch):
    project = pytester.mkdir("proj")
    (project / "hooked_mod.py").write_text(KERNELS)
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "matrix.yaml").write_text(matrix({"name": "wrong", "impl": "hooked_mod:doubled"}))
    monkeypatch.chdir(project)
    first = run(pytester, "--scaledmm-matrix", "--no-scaledmm-triage", "--scaledmm-isolate=no")
    first.assert_outcomes(failed=1, passed=1)  # the hook's kernel ran too
    command = _replay_line(first)
    words = shlex.split(command)
    assert words[0] == "pytest" and os.path.isabs(words[1])

    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    replayed = run(pytester, *words[1:], "--no-scaledmm-triage", "--scaledmm-isolate=no")
    replayed.assert_outcomes(failed=1)
    assert f"replay: {command}" in replayed.outlines  # the same case, the same command


def test_a_matrix_whose_conftest_was_not_loaded_is_a_usage_error(pytester, clean_path, monkeypatch):
    """Run from elsewhere without the matrix as a path, the conftest beside it (which may declare
    kernels) is not loaded: one usage error that says how, never a run without its kernels."""
    project = pytester.mkdir("proj")
    (project / "hooked_mod.py").write_text(KERNELS)
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "matrix.yaml").write_text(matrix({"name": "mine", "impl": "hooked_mod:right"}))
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    result = run(pytester, "--scaledmm-matrix=" + str(project / "matrix.yaml"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "conftest.py was not loaded" in result.stderr.str()
    assert f"pytest {project / 'matrix.yaml'} --scaledmm-matrix {project / 'matrix.yaml'}" in result.stderr.str()
