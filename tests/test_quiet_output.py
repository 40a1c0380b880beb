"""Quiet, clear output: no third-party warning noise from torch's or hypothesis's start-up, the
user's own warnings untouched; a failure says its outcome once, its parameters in the matrix's
axis order, and how to replay it; triage says what it tried and what changed."""

import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.execution.quiet import quiet_torch_imports
from pytest_scaledmm.matrix.case_params import PARAM_ORDER

ROOT = Path(__file__).parent.parent
BIAS_AXES = {"bias": [True], "mode": ["aot_eager"], "m": [4], "k": [32], "n": [16]}


def test_torch_import_noise_is_filtered_only_from_torch(recwarn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_torch_imports():
            warnings.warn_explicit(
                "Failed to initialize NumPy: No module named 'numpy'",
                UserWarning,
                "functional_tensor.py",
                1,
                module="torch._subclasses.functional_tensor",
            )
            warnings.warn_explicit(
                "`torch.jit.script_method` is deprecated.",
                DeprecationWarning,
                "_script.py",
                1,
                module="torch.utils.mkldnn",
            )
            warnings.warn("Failed to initialize NumPy: the user's own", UserWarning, stacklevel=2)  # not torch's
            warnings.warn_explicit("another torch warning", UserWarning, "x.py", 1, module="torch.foo")
    messages = [str(w.message) for w in seen]
    assert messages == ["Failed to initialize NumPy: the user's own", "another torch warning"]


@pytest.mark.skipif(importlib.util.find_spec("numpy") is not None, reason="torch warns about NumPy only without it")
def test_a_run_prints_no_numpy_warning(matrix_project, pytester):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--scaledmm-matrix", *IN_PROCESS)
    assert result.ret == 0
    assert "Failed to initialize NumPy" not in result.stdout.str() + result.stderr.str()


def test_an_unknown_case_id_is_one_error_without_hypothesis_warnings(matrix_project, pytester):
    matrix_project.write_matrix(matrix_text([planted("correct")], {"m": [4, 8]}))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--scaledmm-matrix", "--scaledmm-case", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "HypothesisSideeffectWarning" not in text
    assert [line for line in result.stderr.lines if line.strip()] == [
        line for line in result.stderr.lines if line.startswith("ERROR: --scaledmm-case: unknown case id 'nope'")
    ]


@pytest.mark.slow
def test_xdist_workers_compiling_in_process_print_no_torchscript_deprecation(matrix_project, pytester):
    matrix_project.write_matrix(matrix_text([planted("correct")], {"mode": ["inductor"], "m": [4, 8]}))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--scaledmm-matrix", "-n", "2", *IN_PROCESS)
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str() + result.stderr.str()
    assert "is deprecated. Please switch to `torch.compile`" not in text
    assert "Failed to initialize NumPy" not in text


@pytest.mark.slow
def test_a_users_own_warning_still_shows(matrix_project, pytester):
    """Imported while pytest configures, as torch is: its warning is not filtered with torch's."""
    pytester.makepyfile(
        noisy_kernels="""
import warnings
from planted_kernels import correct

warnings.warn("Failed to initialize the user's kernels", UserWarning)
"""
    )
    matrix_project.write_matrix(matrix_text([planted("noisy", "correct", module="noisy_kernels")]))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--scaledmm-matrix", *IN_PROCESS)
    assert result.ret == 0
    assert "Failed to initialize the user's kernels" in result.stdout.str() + result.stderr.str()


def test_a_failure_says_its_outcome_once_and_its_params_in_axis_order(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("drops_bias")], BIAS_AXES))
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "MISMATCH: MISMATCH" not in out
    assert any(line.startswith("MISMATCH: ") for line in result.outlines)
    params = next(line for line in result.outlines if line.startswith("params: "))
    keys = [item.split("=")[0] for item in params[len("params: ") :].split(", ")]
    assert keys == sorted(keys, key=PARAM_ORDER.index)
    assert keys[:3] == ["kernel", "scale_a", "scale_b"] and keys[-1] == "purpose"
    assert any(line.startswith("replay: pytest ") and "matrix.yaml::" in line for line in result.outlines)


def test_triage_lists_what_it_tried_and_finds_the_bias(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("drops_bias")], BIAS_AXES))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-isolate=no", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=1)
    line = next(line for line in result.outlines if line.strip().startswith("breaks in "))
    assert "breaks in eager (the kernel itself, before any compiler)" in line
    assert "tried one change at a time: torch's plain bf16 matmul of the same shapes PASS, " in line
    assert "both scales one rank MISMATCH, without bias PASS" in line  # 0-D x [1]: ranks differ
    assert "passes without bias: the bias is at fault" in line
    assert "none of the rungs" not in line and "the quantized path fails" not in line
    triage = next(c["triage"] for c in matrix_project.report()["cases"] if "triage" in c)
    assert triage["at_fault"] == ["bias=False"] and triage["workarounds"] == []


def test_triage_says_when_no_single_change_helps(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("ignores_scale_b")], {"mode": ["aot_eager"]}))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-isolate=no")
    result.assert_outcomes(failed=1)
    line = next(line for line in result.outlines if line.strip().startswith("breaks in "))
    assert line.rstrip().split("[")[0].rstrip().endswith("no single change makes it pass")


def test_a_root_cause_says_its_outcome_once_in_the_summary_markdown_and_html(matrix_project, tmp_path):
    """The outcome column says MISMATCH; the cause beside it does not repeat it. The report keeps
    the signature as it was: gates compare it across versions."""
    from pytest_scaledmm.cli import main

    matrix_project.write_matrix(matrix_text([planted("drops_bias")], BIAS_AXES))
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "--scaledmm-report", "r.json")
    result.assert_outcomes(failed=1)
    line = next(line for line in result.outlines if line.startswith("  ") and " x MISMATCH" in line)
    cause = "kernel drops_bias: values off the reference, error over 1000x the bound"
    assert line.count("MISMATCH") == 1 and line.endswith(f" {cause}"), line
    group = matrix_project.report("r.json")["signatures"][0]
    assert group["root_cause"] == cause and group["signature"].startswith("MISMATCH: ")
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    assert main(["compare", str(matrix_project.path / "r.json"), "--markdown", str(md), "--html", str(html)]) == 0
    row = next(row for row in md.read_text().splitlines() if row.startswith("| tier 1"))
    assert row.count("MISMATCH") == 1
    page = html.read_text()
    assert 'class="sig">MISMATCH' not in page and f'<td class="sig">{cause}</td>' in page


@pytest.mark.slow
def test_xdist_workers_compiling_in_process_read_no_deprecated_dynamo_config(matrix_project, pytester):
    """Each case restores Dynamo's config; torch's deprecated keys warn when read, and they do
    nothing, so none is read: no FutureWarning in pytest's warnings summary."""
    matrix_project.write_matrix(matrix_text([planted("correct")], {"m": [4, 8]}))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--scaledmm-matrix", "-n", "2", *IN_PROCESS)
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str() + result.stderr.str()
    assert "FutureWarning" not in text and "warnings summary" not in text, text


@pytest.mark.skipif(importlib.util.find_spec("numpy") is not None, reason="torch warns about NumPy only without it")
def test_scaledmm_doctor_prints_no_numpy_warning():
    done = subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm", "doctor", "--no-probe"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("scaledmm doctor\n")
    assert "Failed to initialize NumPy" not in done.stdout + done.stderr


@pytest.mark.skipif(importlib.util.find_spec("numpy") is not None, reason="torch warns about NumPy only without it")
def test_a_repro_script_prints_no_numpy_warning(matrix_project, pytester):
    matrix_project.write_matrix(matrix_text([planted("ignores_scale_b")]))
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "--scaledmm-repro-dir", "repros")
    result.assert_outcomes(failed=1)
    script = next((pytester.path / "repros").glob("repro_*.py"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 10, done.stdout + done.stderr  # REPRODUCED
    assert done.stdout.startswith("the run: MISMATCH")
    assert "Failed to initialize NumPy" not in done.stdout + done.stderr


def test_torchao_imports_without_its_noise_and_says_it_in_one_line():
    pytest.importorskip("torchao")
    script = (
        "import logging\n"
        "from pytest_scaledmm.matrix.packs.torchao import import_torchao, load_note\n"
        "import_torchao()\n"
        "print(load_note())\n"
        "logging.getLogger('torchao').warning('Failed to load x.so: a later record is shown')\n"
    )
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    note = done.stdout.strip().splitlines()[-1]
    assert note == "None" or (note.startswith("torchao ") and "did not load on this machine" in note), note
    assert "KernelPreference" not in done.stderr
    assert [line for line in done.stderr.splitlines() if "Failed to load" in line] == [
        "Failed to load x.so: a later record is shown"
    ]


@pytest.mark.slow
def test_torchaos_import_noise_is_one_line_of_the_summary(matrix_project, pytester):
    """The smoke profile of matrices/torchao.yaml on one kernel, in a fresh process that imports
    torchao where the cases run: its C extensions that do not load here are said once, in one
    line, and neither they nor torch's deprecation of its Enum registration are logged."""
    pytest.importorskip("torchao")
    import yaml

    from pytest_scaledmm.matrix.packs.torchao import load_note

    matrix = yaml.safe_load((ROOT / "matrices" / "torchao.yaml").read_text())
    matrix["kernels"] = ["torchao_int8_weight"]
    matrix["profiles"] = {"smoke": {**matrix["profiles"]["smoke"], "cases": 1}}
    matrix_project.write_matrix(yaml.safe_dump(matrix, sort_keys=False))
    # One shard of many: the coverage guarantee adds dozens of cases past `cases: 1`, and a few
    # of them show the imports as well as all do.
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--scaledmm-matrix",
        "--scaledmm-profile",
        "smoke",
        "--scaledmm-shard",
        "1/20",
        *IN_PROCESS,
    )
    assert result.ret in (0, 1), result.stdout.str()
    text = result.stdout.str() + result.stderr.str()
    assert re.search(r"\b\d+ cases \(smoke profile", text), text
    assert "Failed to load" not in text and "KernelPreference" not in text
    notes = [line for line in text.splitlines() if "did not load on this machine" in line]
    expected = load_note()  # this process imported torchao the same way (tests/conftest.py)
    assert notes == ([f"note: {expected}"] if expected else []), text
