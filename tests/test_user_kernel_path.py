"""User kernels import like tests do: `impl: module:function` finds a module beside the matrix
file or in the rootdir without PYTHONPATH, in the pytest process, in the isolated child and in
xdist workers; the replay command a failure prints works from any directory; a project file
named like a standard module does not shadow it, and a kernel module so named is one clear error."""

import os
import re
import shlex
import subprocess
import sys
import textwrap

import pytest
import yaml

from matrices import IN_PROCESS, matrix_text, planted, synthetic

KERNELS = """
import torch


def right(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = (a.float() @ b.float()) * scale_a.float() * scale_b.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


def doubled(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return (2 * right(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype).float()).to(out_dtype)
"""

AXES = synthetic(
    {"scale_a": ["tensor_0d"], "scale_b": ["tensor_0d"], "mode": ["aot_eager"], "m": [4, 8], "k": [32], "n": [16]}
)


def matrix(*kernels) -> str:
    return yaml.safe_dump(
        {"version": 1, "kernels": list(kernels), "axes": AXES, "profiles": {"default": {"cases": 2 * len(kernels)}}},
        sort_keys=False,
    )


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
    result = run(
        pytester,
        "--scaledmm-matrix",
        str(project / "matrix.yaml"),
        f"--scaledmm-isolate={isolate}",
        "--no-scaledmm-triage",
    )
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


@pytest.mark.slow
def test_xdist_workers_and_their_children_find_it(pytester, clean_path):
    project = pytester.mkdir("kernels_xdist")
    (project / "xdist_mod.py").write_text(KERNELS)
    (project / "matrix.yaml").write_text(matrix({"name": "mine", "impl": "xdist_mod:right"}))
    result = run(pytester, "--scaledmm-matrix", str(project / "matrix.yaml"), "-n", "2", "--no-scaledmm-triage")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)


CONFTEST = """
import hooked_mod
from pytest_scaledmm.matrix.kernels import Kernel


def pytest_scaledmm_kernels(config):
    return [Kernel("hooked", hooked_mod.right)]
"""


def _replay_line(result) -> str:
    lines = [line for line in result.outlines if line.startswith("replay: ")]
    assert lines, result.stdout.str()
    return lines[0][len("replay: ") :]


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
    assert f"`pytest {project / 'matrix.yaml'} --scaledmm-matrix`" in result.stderr.str()


BIG_M_BUG = (
    KERNELS
    + """

def doubled_big_m(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = right(a, b, scale_a, scale_b, bias=bias, out_dtype=torch.float32)
    return (2 * out if a.shape[0] > 12 else out).to(out_dtype)  # M = 8 fails at its other M, 24
"""
)


def _md_unescaped(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def test_a_replay_command_names_the_run_s_profile_seed_and_device_over_the_project_s_ini(
    pytester, clean_path, monkeypatch, tmp_path
):
    """The project's ini says profile smoke; the run used default (where alone the failing case
    is), seed 11 and the CPU: the printed command replays that case from another directory, and the
    summary, the step summary and `scaledmm compare` print the same command."""
    import html

    from pytest_scaledmm.cli import main

    project = pytester.mkdir("iniproj")
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\nscaledmm_profile = "smoke"\n')
    (project / "big_m_mod.py").write_text(BIG_M_BUG)
    (project / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "kernels": [{"name": "bigm", "impl": "big_m_mod:doubled_big_m"}],
                "axes": AXES,
                "profiles": {"smoke": {"cases": 1, "axes": {"m": [4]}}, "default": {"cases": 2}},
            },
            sort_keys=False,
        )
    )
    step_summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    monkeypatch.chdir(project)
    first = run(
        pytester,
        "--scaledmm-matrix",
        "--scaledmm-profile",
        "default",
        "--scaledmm-seed",
        "11",
        "--scaledmm-device",
        "cpu",
        "--scaledmm-report",
        str(tmp_path / "r.json"),
        *IN_PROCESS,
    )
    first.assert_outcomes(failed=1, passed=1)
    command = _replay_line(first)
    words = shlex.split(command)
    assert words[0] == "pytest" and words[1].startswith(f"{project / 'matrix.yaml'}::bigm.")
    assert words[2] == "--scaledmm-matrix" and words.count(str(project / "matrix.yaml")) == 0  # named once
    assert command.endswith(" --scaledmm-profile default --scaledmm-seed 11 --scaledmm-device cpu")
    summary = [line.strip() for line in first.outlines if line.startswith("         replay: ")]
    assert summary == [f"replay: {command}"]
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert _md_unescaped(step_summary.read_text()).count(f"| {command} |") == 1

    md, page = tmp_path / "compare.md", tmp_path / "compare.html"
    assert main(["compare", str(tmp_path / "r.json"), "--markdown", str(md), "--html", str(page)]) == 0
    assert _md_unescaped(md.read_text()).count(f"| {command} |") == 1
    assert html.unescape(page.read_text()).count(f"<code>{command}</code>") == 2  # the case panel, the root cause

    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    replayed = run(pytester, *words[1:], *IN_PROCESS)
    replayed.assert_outcomes(failed=1)
    assert f"replay: {command}" in replayed.outlines


def test_a_replay_command_always_names_the_profile():
    from pytest_scaledmm.matrix.replay_command import replay_command
    from pytest_scaledmm.reports.cause_text import report_replay

    assert replay_command("/p/m.yaml", "c1") == "pytest /p/m.yaml::c1 --scaledmm-matrix --scaledmm-profile default"
    assert replay_command("/p/m.yaml", "c1", "smoke", device="auto").endswith(" --scaledmm-profile smoke")
    block = {"path": "/p/m.yaml", "profile": "full", "seed": 3, "forced": {"seed": 3, "device": "cuda:1"}}
    assert report_replay(block, "c1") == replay_command("/p/m.yaml", "c1", "full", 3, "cuda:1")
    assert report_replay({**block, "forced": None}, "c1", "/q/m.yaml") == replay_command("/q/m.yaml", "c1", "full")


PACKAGE_KERNEL = """
import torch


def scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return ((a.float() @ b.float()) * scale_a.float() * scale_b.float()).to(out_dtype)
"""
PLANTED_BESIDE_MATRIX = """
import torch

from mykernels.fp8 import scaled_mm


def off(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return (1.25 * scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.float32)).to(out_dtype)
"""


def _run_repro_from_root(script):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd="/", env=env)


@pytest.mark.slow
def test_a_repro_script_imports_the_kernel_as_the_run_did(pytester, clean_path, monkeypatch):
    """A kernel beside its matrix imports the project's package from the rootdir: its repro
    script, run from / in a fresh process, puts the run's import directories first too and
    reproduces (exit 10), as does one written later by `scaledmm repro`."""
    from pytest_scaledmm.cli import main

    project = pytester.mkdir("pkgproj")
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (project / "mykernels").mkdir()
    (project / "mykernels" / "__init__.py").write_text("")
    (project / "mykernels" / "fp8.py").write_text(PACKAGE_KERNEL)
    (project / "buggy").mkdir()
    (project / "buggy" / "planted_beside.py").write_text(PLANTED_BESIDE_MATRIX)
    (project / "buggy" / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "kernels": [{"name": "off", "impl": "planted_beside:off"}],
                "axes": {**AXES, "m": [4]},
                "profiles": {"default": {"cases": 1}},
            },
            sort_keys=False,
        )
    )
    monkeypatch.chdir(project)
    result = run(
        pytester,
        "--scaledmm-matrix",
        "buggy",
        "--scaledmm-repro-dir",
        "repros",
        "--scaledmm-report",
        "r.json",
        *IN_PROCESS,
    )
    result.assert_outcomes(failed=1)
    script = next((project / "repros").glob("repro_*.py"))
    done = _run_repro_from_root(script)
    assert done.returncode == 10, done.stdout + done.stderr
    assert str(project) in script.read_text() and str(project / "buggy") in script.read_text()

    assert (
        main(
            [
                "repro",
                str(project / "r.json"),
                "--out",
                str(project / "later"),
                "--matrix",
                str(project / "buggy" / "matrix.yaml"),
            ]
        )
        == 0
    )
    done = _run_repro_from_root(next((project / "later").glob("repro_*.py")))
    assert done.returncode == 10, done.stdout + done.stderr


# -- project files named like standard modules -----------------------------------------------------


def _usage_lines(result):
    return [line for line in result.stderr.lines if line.strip()]


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
