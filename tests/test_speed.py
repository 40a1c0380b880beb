"""Speed features: likely failures first, each new signature printed once, cases balanced between
xdist workers, CPU threads shared out between them."""

import json
import re

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.execution import device

ORDER_MATRIX = matrix_text(
    [planted("correct"), planted("ignores_scale_b")],
    {"mode": ["eager", "inductor"], "scale_a": ["tensor_0d", "tensor_1d"], "scale_b": ["tensor_0d", "tensor_1d"]},
)


def _rank_pair(case_id: str) -> tuple[str, str]:
    pair = next(part for part in case_id.split("-") if "_x_" in part)
    left, right = pair.split("_x_")
    return left, right


@pytest.mark.slow
def test_first_failure_puts_last_failures_then_mixed_ranks_under_inductor_first(matrix_project):
    matrix_project.write_matrix(ORDER_MATRIX)
    plain = matrix_project.collect()
    ordered = matrix_project.collect("--scaledmm-first-failure")
    assert sorted(plain) == sorted(ordered) and len(ordered) == 16  # the same cases, reordered

    def prior(case_id):
        left, right = _rank_pair(case_id)
        inductor = "-inductor-" in case_id
        return 2 * (inductor and left != right) + inductor

    assert [prior(i) for i in ordered] == sorted((prior(i) for i in ordered), reverse=True)
    assert prior(ordered[0]) == 3 and prior(ordered[-1]) == 0

    # A run that fails in eager mode writes its report under .scaledmm/reports; the next ordered
    # run starts with exactly those failures, ahead of every Inductor case.
    result = matrix_project.run("--scaledmm-matrix", "-k", "not inductor")
    failed = sorted(line.split("::", 1)[1].split(" ")[0] for line in result.outlines if line.startswith("FAILED"))
    assert failed and all("-eager-" in i for i in failed)
    assert sum("new signature" in line for line in result.outlines) == 1  # one signature, printed once
    assert any(line.startswith("[scaledmm +") and "new signature: MISMATCH" in line for line in result.outlines)
    again = matrix_project.collect("--scaledmm-first-failure")
    assert sorted(again[: len(failed)]) == failed


@pytest.mark.slow
@pytest.mark.parametrize(
    "dist, scheduler",
    [([], "LongestFirstScheduling"), (["--dist", "load"], "LoadScheduling")],
    ids=["default", "explicit"],
)
def test_xdist_hands_out_the_costliest_case_first_unless_told_otherwise(matrix_project, dist, scheduler):
    # Built-in kernels: xdist workers do not see the planted kernels' directory.
    matrix_project.write_matrix(
        """
        version: 1
        kernels: [aten_scaled_mm]
        axes: {scale_a: [tensor_0d, tensor_1d], scale_b: [tensor_0d], mode: [eager, aot_eager], m: [16], k: [32], n: [16],
               dtype_a: [e4m3fn], dtype_b: [e4m3fn], out_dtype: [bf16], bias: [false], use_fast_accum: [false],
               scale_layout: [contiguous], special_scale: [none], value_regime: [standard], operand_layout: [dense]}
        profiles: {default: {cases: 4}}
        """
    )
    result = matrix_project.run("--scaledmm-matrix", "-n", "2", "-v", *dist, "--scaledmm-report", "report.json")
    result.stdout.fnmatch_lines([f"*scheduling tests via {scheduler}*"])
    assert len(matrix_project.report()["cases"]) == 4


def test_threads_are_shared_out_between_workers(monkeypatch):
    monkeypatch.setattr(device.os, "cpu_count", lambda: 16)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    assert device.threads_per_worker() == 4
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "32")
    assert device.threads_per_worker() == 1


def test_n_auto_runs_the_matrix_on_a_worker_per_core(matrix_project, cpu_fp8_mm):
    """The README's main-job command: `pytest --scaledmm-matrix -n auto` (pytest-xdist is a
    dependency of the package)."""
    matrix_project.write_matrix(matrix_text(["aten_scaled_mm"], {"out_dtype": ["bf16", "fp16"]}))
    result = matrix_project.run("--scaledmm-matrix", "-n", "auto", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(passed=2)
    assert any(re.fullmatch(r"created: (\d+)/\1 workers", line) for line in result.outlines), result.outlines
    assert len(matrix_project.report()["cases"]) == 2 and matrix_project.report()["session"]["complete"] is True


MATRIX = matrix_text([planted("correct"), planted("ignores_scale_b")], {"out_dtype": ["bf16", "fp16"]})


def test_first_failure_in_a_real_run_reads_the_last_results_not_its_own_placeholder(matrix_project):
    # The run claims its report path (an unfinished placeholder) before collection: that newest
    # file held no case, so the last run's failures were never put first outside --collect-only.
    matrix_project.write_matrix(MATRIX)
    assert matrix_project.run(*IN_PROCESS, "--scaledmm-matrix").ret == 1
    # Say the passing cases were the slow ones: the plain (cost) order starts with them.
    newest = max((matrix_project.path / ".scaledmm" / "reports").glob("*.json"), key=lambda p: p.stat().st_mtime)
    data = json.loads(newest.read_text())
    for case in data["cases"]:
        case["timing"] = {"case_s": 100.0 if case["id"].startswith("correct.") else 0.01}
    newest.write_text(json.dumps(data))
    assert matrix_project.collect()[0].startswith("correct.")
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-first-failure", "-v")
    ran = [line.split("::", 1)[1].split(" ")[0] for line in result.outlines if line.startswith("matrix.yaml::")]
    assert len(ran) == 4 and all(cid.startswith("ignores_scale_b.") for cid in ran[:2])
