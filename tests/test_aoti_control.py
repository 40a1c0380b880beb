"""The AOTInductor control: an aoti case that fails while its package loads or runs is SKIPPED
(not proven) when a plain matmul fails the same way, and keeps its verdict when the plain matmul
passes. The load failures are planted (tests/planted_aoti_kernels.py): no C++ build."""

import json
import os

import pytest
from case_factory import case_params
from reports_factory import case as record_of
from reports_factory import report, write

from matrices import matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.execution import isolate
from pytest_scaledmm.execution.aoti_control import apply_control, failed_stage, run_control
from pytest_scaledmm.matrix.case_params import Case
from pytest_scaledmm.verdict.outcome import COMPILE_ONLY_ERROR, CRASH, ErrorInfo, Outcome

AXES = {"scale_a": ["rowwise"], "scale_b": ["rowwise"], "out_dtype": ["bf16"], "mode": ["aoti"], "k": [32], "n": [16]}
KERNEL = planted("scaled_mm", module="planted_aoti_kernels")
REASON = "AOTInductor cannot load a package on this machine: a plain float32 matmul control also crashed at aoti_load"


def _case(mode="aoti"):
    return Case(f"k.{mode}", case_params(kernel="k", mode=mode))


def _load_error(layer):
    return ErrorInfo("builtins.RuntimeError", "cannot load", "builtins.RuntimeError", layer)


CRASHED = {
    "ok": False,
    "outcome": CRASH,
    "stage": "aoti_load",
    "error": "CRASH: process killed by SIGSEGV",
    "dtype": "bfloat16",
    "device": "cuda:0",
    "seconds": 3.0,
    "ran_for": "k.aoti",
}
PASSED = {"ok": True, "outcome": "PASS", "stage": None, "error": None, "dtype": "bfloat16", "device": "cuda:0"}


def test_only_an_aoti_case_failing_at_load_or_run_needs_the_control():
    crash = Outcome(CRASH, "CRASH: process killed by SIGSEGV", "aoti_load")
    assert failed_stage(_case(), crash) == "aoti_load"
    assert (
        failed_stage(_case(), Outcome(COMPILE_ONLY_ERROR, "x", "runtime", compiled_error=_load_error("runtime")))
        == "runtime"
    )
    assert failed_stage(_case("inductor"), crash) is None
    assert failed_stage(_case(), Outcome(CRASH, "CRASH: process killed by SIGSEGV", "inductor")) is None
    assert (
        failed_stage(_case(), Outcome(COMPILE_ONLY_ERROR, "x", "export", compiled_error=_load_error("export"))) is None
    )
    assert failed_stage(_case(), Outcome("UNSUPPORTED", "x", compiled_error=_load_error("aoti_load"))) is None


def test_a_control_that_fails_the_same_way_makes_the_case_skipped():
    result = apply_control(Outcome(CRASH, "CRASH: process killed by SIGSEGV", "aoti_load"), "aoti_load", CRASHED)
    assert result.outcome == "SKIPPED" and result.signature is None and not result.failed
    assert result.detail == (
        "AOTInductor cannot load a package on this machine: a plain bf16 matmul control also "
        "crashed at aoti_load (CRASH: process killed by SIGSEGV)"
    )
    assert result.observations.aoti_control["case"]["outcome"] == CRASH
    # Failing at load also explains a case that failed later, at run time.
    late = Outcome(COMPILE_ONLY_ERROR, "x", "runtime", compiled_error=_load_error("runtime"))
    assert apply_control(late, "runtime", CRASHED).outcome == "SKIPPED"


def test_a_control_that_passes_or_fails_otherwise_leaves_the_case_as_it_was():
    for control in (
        PASSED,
        {**CRASHED, "stage": "runtime"},
        {**CRASHED, "stage": "inductor"},
        {**CRASHED, "stage": None},
    ):
        failing = Outcome(
            COMPILE_ONLY_ERROR, "RuntimeError: cannot load", "aoti_load", compiled_error=_load_error("aoti_load")
        )
        result = apply_control(failing, "aoti_load", control)
        assert result.outcome == COMPILE_ONLY_ERROR, control
        assert result.observations.aoti_control["verdict"].endswith("the case's failure stands")


def test_a_crash_inside_a_package_load_or_run_is_that_stage_whatever_torch_frame_is_innermost():
    def dump(stage_frame):
        return (
            "Current thread 0x1 (most recent call first):\n"
            '  File "/site-packages/torch/_inductor/package/package.py", line 135 in load_package\n'
            f'  File "/work/pytest_scaledmm/verdict/runners.py", line 130 in {stage_frame}\n'
            '  File "/work/pytest_scaledmm/verdict/runners.py", line 160 in _build\n'
            '  File "/work/pytest_scaledmm/execution/isolate.py", line 124 in _serve\n'
        )

    assert isolate._layer_from_stack(dump("_aoti_load")) == "aoti_load"
    assert isolate._layer_from_stack(dump("_aoti_run")) == "runtime"
    assert isolate._layer_from_stack(dump("_build")) == "inductor"


def _run(matrix_project, m, *options):
    matrix_project.write_matrix(matrix_text([KERNEL], {**AXES, "m": m}))
    result = matrix_project.run(
        "--scaledmm-matrix",
        "matrix.yaml",
        "--scaledmm-report",
        "r.json",
        "--no-scaledmm-triage",
        "--scaledmm-timeout",
        "600",  # a backstop: nothing here hangs, and a busy machine's child starts slowly
        *options,
    )
    return result, json.loads((matrix_project.path / "r.json").read_text())


def test_when_no_package_loads_here_an_aoti_crash_is_skipped_and_the_gate_calls_it_not_proven(
    matrix_project, plant_aoti_load, cpu_fp8_mm, tmp_path, capsys
):
    plant_aoti_load("crash-all")
    result, data = _run(matrix_project, [16])
    (record,) = data["cases"]
    assert record["outcome"] == "SKIPPED", record
    assert record["detail"].startswith(REASON + " (CRASH: process killed by SIGSEGV"), record["detail"]
    control = record["extra"]["aoti_control"]
    assert control["ok"] is False and control["stage"] == "aoti_load" and control["ran_for"] == record["id"]
    assert control["case"]["outcome"] == "CRASH" and control["case"]["layer"] == "aoti_load"
    assert data["summary"] == {"SKIPPED": 1}
    result.assert_outcomes(skipped=1)
    out = result.stdout.str()
    assert "1 case(s) SKIPPED, not proven: a control failed the same way" in out and REASON in out

    # The gate: a case that passed before and is skipped now is no pass.
    baseline = write(
        tmp_path / "baseline.json", report([record_of(record["id"], "PASS", **record["params"])], torch="2.11.0")
    )
    candidate = write(
        tmp_path / "candidate.json",
        {
            **data,
            "matrix": {
                **data["matrix"],
                "hash": "0123456789abcdef",
                "path": "matrix.yaml",
                "profile": "smoke",
                "seed": 1,
            },
        },
    )
    capsys.readouterr()
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 1
    err = capsys.readouterr().out
    assert "capability lost: 1 case(s) ran in the baseline and are UNSUPPORTED or SKIPPED in the candidate" in err, err


def test_when_plain_packages_load_a_scaled_mm_load_failure_stands(matrix_project, plant_aoti_load, cpu_fp8_mm):
    plant_aoti_load("fail-scaled")
    result, data = _run(matrix_project, [16, 32])
    records = sorted(data["cases"], key=lambda r: r["params"]["m"])
    for record in records:
        assert record["outcome"] == "COMPILE_ONLY_ERROR", record
        assert record["compiled_error"]["layer"] == "aoti_load"
        assert "cannot load a package that calls _scaled_mm" in record["signature"]
        control = record["extra"]["aoti_control"]
        assert control["ok"] is True and control["dtype"] == "float32"
        assert control["ran_for"] == records[0]["id"]  # once per session
    result.assert_outcomes(failed=2)
    assert "not proven" not in result.stdout.str()


def test_a_control_whose_child_dies_while_starting_proves_nothing_and_the_crash_stands(
    matrix_project, plant_aoti_load, cpu_fp8_mm, monkeypatch
):
    # The control's child shares its log with the case's child, whose crash at aoti_load is in
    # it: that dump is no evidence about a control that never ran.
    plant_aoti_load("crash-then-no-start")
    monkeypatch.setenv("PLANTED_AOTI_RUN_PID", str(os.getpid()))
    result, data = _run(matrix_project, [16])
    (record,) = data["cases"]
    assert record["outcome"] == "CRASH" and record["signature"] == "CRASH: process killed by SIGSEGV", record
    control = record["extra"]["aoti_control"]
    assert control["ok"] is False and control["outcome"] == "CRASH" and control["stage"] is None, control
    assert control["error"] == "CRASH: process exited with status 1", control
    assert control["verdict"].endswith("the case's failure stands"), control
    result.assert_outcomes(failed=1)
    assert "not proven" not in result.stdout.str()


@pytest.mark.slow
def test_the_real_control_passes_on_the_cpu():
    # A real export, C++ build, load and run of float32 a @ b.
    found = run_control("cpu")
    assert found["ok"] is True and found["outcome"] == "PASS" and found["dtype"] == "float32", found


def test_a_control_that_raises_is_answered_as_a_harness_error(monkeypatch):
    """The child and the in-process runner answer one way (control_answer); only the child also
    answers an interrupt, which in-process is the user's."""
    from pytest_scaledmm.execution import aoti_control

    def broken(device):
        raise ValueError("no export here")

    monkeypatch.setattr(aoti_control, "run_control", broken)
    found = aoti_control.control_answer("cpu")
    assert found["ok"] is False and found["outcome"] == "HARNESS_ERROR" and found["stage"] is None
    assert "no export here" in found["error"] and found["seconds"] >= 0

    def interrupted(device):
        raise KeyboardInterrupt

    monkeypatch.setattr(aoti_control, "run_control", interrupted)
    assert aoti_control.control_answer("cpu", catching=BaseException)["outcome"] == "HARNESS_ERROR"
    with pytest.raises(KeyboardInterrupt):
        aoti_control.control_answer("cpu")
