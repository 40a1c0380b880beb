"""A runner added from outside the plugin: one object and one mode row, then a matrix value."""

import json
import sys

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.matrix import compile_modes
from pytest_scaledmm.verdict import runners


@pytest.fixture
def counted_runner():
    """Imports tests/counted_runner.py (which registers its runner and mode) and removes both after."""
    sys.modules.pop("counted_runner", None)
    import counted_runner

    yield counted_runner
    compile_modes.unregister_mode(counted_runner.MODE)
    runners.unregister_runner(counted_runner.RUNNER)
    sys.modules.pop("counted_runner", None)


def test_the_built_in_runners_are_the_modes_runners():
    assert set(runners.RUNNERS) == {m.runner for m in compile_modes.MODES}
    assert compile_modes.compile_mode("mark-unbacked").marks_m == "unbacked"
    assert compile_modes.compile_mode("aoti").how.builds_package
    assert not compile_modes.compile_mode("inductor").how.builds_package


def test_a_mode_must_name_a_registered_runner():
    with pytest.raises(ValueError, match="no runner named 'nowhere'"):
        compile_modes.register_mode(compile_modes.CompileMode("somewhere", "eager", runner="nowhere"))
    assert "somewhere" not in compile_modes.MODE_NAMES


def test_a_registered_runner_runs_a_matrix(matrix_project, counted_runner):
    kernels = [planted("correct"), planted("wrong_only_compiled")]
    matrix_project.write_matrix(matrix_text(kernels, {"mode": [counted_runner.MODE]}))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "r.json")
    records = {r["params"]["kernel"]: r for r in json.loads((matrix_project.path / "r.json").read_text())["cases"]}
    assert {k: r["outcome"] for k, r in records.items()} == {"correct": "PASS", "wrong_only_compiled": "MISMATCH"}
    for record in records.values():
        assert record["params"]["mode"] == counted_runner.MODE
        assert counted_runner.MODE in record["id"]
        assert record["extra"]["compiled_graphs"] == 1
        assert "kernel_choice" not in record["extra"]  # not an Inductor backend
    assert records["wrong_only_compiled"]["layer"] == "compiled"
    # Each case's compiled side came from the runner, given the mode row's settings.
    assert len(counted_runner.BUILDS) == 2 and all(b["backend"] == "eager" for b in counted_runner.BUILDS)
    result.assert_outcomes(passed=1, failed=1)


@pytest.mark.slow
def test_a_registered_runner_runs_in_the_child_and_its_script_says_it_cannot(matrix_project, counted_runner):
    """The isolated child imports the module that registered the runner; a standalone repro script
    embeds the built-in runners only, so it says it cannot run the case (exit 12), never a verdict."""
    import subprocess

    kernels = [planted("correct"), planted("wrong_only_compiled")]
    matrix_project.write_matrix(matrix_text(kernels, {"mode": [counted_runner.MODE]}))
    matrix_project.run(
        "--no-scaledmm-triage", "--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "r.json",
        "--scaledmm-repro-dir", "repros",
    )  # fmt: skip
    records = {r["params"]["kernel"]: r for r in json.loads((matrix_project.path / "r.json").read_text())["cases"]}
    assert {k: r["outcome"] for k, r in records.items()} == {"correct": "PASS", "wrong_only_compiled": "MISMATCH"}
    (script,) = (matrix_project.path / "repros").glob("repro_*.py")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=script.parent)
    assert done.returncode == 12, done.stdout + done.stderr
    assert "runner 'counted-aot-eager', registered by module counted_runner" in done.stdout
