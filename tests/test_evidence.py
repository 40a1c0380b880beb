"""Evidence a first problem used to hide, and the gate's comparison of it: the eager side's check
kept behind a crash or hang of the compiled side, values compared behind a wrong dtype or shape,
and per kernel and side what a candidate checked less of than its baseline (reports/evidence.py)."""

import math
import multiprocessing
import os
from pathlib import Path

import pytest
import torch
from case_factory import case_params
from reports_factory import BASE, CAND, case, gate, report

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.execution import isolate
from pytest_scaledmm.execution.child_messages import Ready, SideMade
from pytest_scaledmm.matrix.case_params import Case
from pytest_scaledmm.verdict.outcome import BOTH_CHECKED, EAGER_CHECKED
from pytest_scaledmm.verdict.reference import Reference, compare

AXES = {"m": [16], "n": [32], "mode": ["inductor"]}


def _run(matrix_project, impl, report_name, *extra):
    matrix_project.write_matrix(matrix_text([planted("k", impl, module="planted_evidence_kernels")], AXES))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", report_name, *extra)
    result.assert_outcomes(failed=1)
    return matrix_project.report(report_name)["cases"][0]


def _gate(matrix_project, capsys, *extra) -> tuple[int, str]:
    path = matrix_project.path
    code = main(["gate", "--baseline", str(path / "old.json"), "--candidate", str(path / "new.json"), *extra])
    return code, capsys.readouterr().out


# -- a crash or hang keeps the side that came before ----------------------------------------------


def test_the_eager_side_off_behind_an_old_crash_fails_the_gate(matrix_project, pytester, capsys):
    # The isolated child imports the planted kernels through pytest's own `pythonpath`.
    pytester.makeini(f"[pytest]\npythonpath = {Path(__file__).parent}\n")
    old = _run(matrix_project, "compiled_aborts", "old.json", "--no-scaledmm-triage")
    assert old["outcome"] == "CRASH" and old["signature"] == "CRASH: process killed by SIGABRT"
    # The eager side was checked before the compiled side killed the process: the record keeps it.
    assert old["errors"]["eager"]["ok"] is True and old["errors"]["eager"]["ratio"] <= 1
    assert old["extra"]["died_after"] == EAGER_CHECKED
    new = _run(matrix_project, "compiled_aborts_eager_off", "new.json", "--no-scaledmm-triage")
    assert (old["outcome"], old["signature"]) == (new["outcome"], new["signature"])
    assert new["errors"]["eager"]["ok"] is False
    code, out = _gate(matrix_project, capsys)
    assert code == 1, out
    assert "regression: 1 case CRASH -> CRASH (eager: passed -> off" in out


class _LiveChild:
    """A child that started and then never answers again (a hang in the compiled side)."""

    pid = 2**22 + 54321  # no such process: the stack dump and the kill find nobody
    exitcode = None

    def is_alive(self):
        return True

    def join(self, timeout=None):
        pass

    def kill(self):
        pass


def test_a_hang_after_the_eager_side_keeps_its_check():
    from pytest_scaledmm.execution.run import RunContext
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS

    parent, child = multiprocessing.Pipe()
    eager = {"check": {"ok": False, "ratio": 4.0, "max_abs": 2.5, "off_elements": 7}, "error": None}
    child.send(Ready(1))
    child.send(SideMade("eager", eager))  # then nothing: the hang
    spare = isolate.SpareChild.__new__(isolate.SpareChild)
    spare.dir = isolate.tempfile.mkdtemp(prefix="scaledmm-child-")
    spare.log = os.path.join(spare.dir, "child.log")
    spare.proc, spare.conn = _LiveChild(), parent
    ctx = RunContext("cpu", 1, {}, {"aten_scaled_mm": BUILTIN_IMPLS["aten_scaled_mm"]})
    # The side's message is in the pipe before the request: any limit finds it.
    runner = isolate.ChildRunner(ctx, timeout=0.2, spare=spare)
    result = runner.run(Case("aten_scaled_mm-s0d_x_s0d", case_params()))
    runner.close()
    child.close()
    assert result.outcome == "TIMEOUT"
    assert result.errors == {"eager": eager["check"]}
    assert result.observations.died_after == EAGER_CHECKED


def test_a_death_after_both_sides_keeps_both_checks():
    """opcheck, or the verdict itself, ending the process after both sides were checked."""
    passed = {"check": {"ok": True, "ratio": 0.2}, "error": None}
    raised = {"check": None, "error": {"type": "RuntimeError", "message": "boom", "root_type": "RuntimeError"}}
    death = isolate.Death(
        "CRASH", "CRASH: process killed by SIGABRT", "", None, 1.0, {"eager": passed, "compiled": raised}
    )
    result = death.outcome()
    assert result.errors == {"eager": passed["check"]}
    assert result.compiled_error is not None and result.compiled_error.message == "boom"
    assert result.observations.died_after == BOTH_CHECKED


# -- a metadata problem keeps the values ------------------------------------------------------------


def _reference():
    value = torch.arange(32, dtype=torch.float64).reshape(4, 8) - 10
    return Reference(value, torch.full_like(value, 0.01))


@pytest.mark.parametrize(
    "out, problem, values",
    [
        (lambda v: v.float(), "dtype torch.float32, expected torch.bfloat16", "compared as float64"),
        (
            lambda v: v.T.contiguous().to(torch.bfloat16),
            "shape (8, 4), expected (4, 8)",
            "compared as float64, row-major",
        ),
    ],
    ids=["dtype", "shape"],
)
def test_a_wrong_dtype_or_shape_is_recorded_beside_its_values(out, problem, values):
    ref = _reference()
    right = compare(out(ref.value), ref, (4, 8), torch.bfloat16)
    far = compare(out(ref.value * 1000), ref, (4, 8), torch.bfloat16)
    for check in (right, far):
        assert check["ok"] is False and check["problem"] == problem and check["ratio"] == math.inf
        assert check["values"] == values and check["elements"] == 32
    assert far["max_abs"] > 500 * max(right["max_abs"], 1e-3) and far["off_elements"] >= right["off_elements"]
    assert far["values_ratio"] > right["values_ratio"]


def test_an_output_that_holds_no_values_says_so():
    ref = _reference()
    for out in ((1, 2), ref.value[:2].float(), torch.empty(4, 8, device="meta")):
        check = compare(out, ref, (4, 8), torch.bfloat16)
        assert check["ok"] is False and check["values"].startswith("not compared")


def test_values_further_off_behind_an_old_wrong_dtype_fail_the_gate(matrix_project, capsys):
    old = _run(matrix_project, "fp32_out", "old.json", *IN_PROCESS)
    new = _run(matrix_project, "fp32_out_far_off", "new.json", *IN_PROCESS)
    # The same text on both: what an outcome and signature alone compared.
    assert (old["outcome"], old["signature"]) == (new["outcome"], new["signature"])
    assert old["errors"]["eager"]["problem"] == new["errors"]["eager"]["problem"]
    code, out = _gate(matrix_project, capsys)
    assert code == 1, out
    assert "off by more: eager max abs error" in out and "compiled max abs error" in out
    assert _gate(matrix_project, capsys, "--allow-worse")[0] == 0


# -- the gate compares what each run checked ------------------------------------------------------


def test_a_kernel_skipped_in_both_runs_is_not_a_silent_pass(tmp_path, capsys):
    def cases():
        return [
            case("a", "PASS"),
            case("t1", "SKIPPED", kernel="torchao_fp8"),
            case("t2", "SKIPPED", kernel="torchao_fp8"),
        ]

    assert gate(tmp_path, report(cases(), **BASE), report(cases(), **CAND)) == 1
    out = capsys.readouterr().out
    assert (
        "not proven: kernel torchao_fp8: no case checked in either run (baseline: 2 SKIPPED; candidate: 2 SKIPPED)"
        in out
    )
    assert gate(tmp_path, report(cases(), **BASE), report(cases(), **CAND), "--allow-unchecked", "torchao_*") == 0
    assert "accepted: not proven: kernel torchao_fp8" in capsys.readouterr().out


def test_a_kernel_absent_from_the_candidate_is_named(tmp_path, capsys):
    baseline = report([case("a", "PASS"), case("b", "PASS", kernel="other")], **BASE)
    candidate = report([case("a", "PASS")], **CAND)
    assert gate(tmp_path, baseline, candidate) == 1
    out = capsys.readouterr().out
    assert "not proven: kernel other: absent from the candidate; the baseline checked 1 case(s)" in out
    # A partial run allowed to miss cases: what only the missing cases held is said, not failed.
    assert gate(tmp_path, baseline, candidate, "--allow-missing") == 0
    assert "skipped (--allow-missing): not proven: kernel other: absent from the candidate" in capsys.readouterr().out


def test_a_dimension_value_no_longer_checked_is_named(tmp_path, capsys):
    baseline = report([case("a", "PASS", out_dtype="bf16"), case("b", "PASS", out_dtype="fp16")], **BASE)
    # The fp16 case is there and skipped now, its capability loss allowed: the value it alone
    # checked is still named.
    candidate = report([case("a", "PASS", out_dtype="bf16"), case("b", "SKIPPED", out_dtype="fp16")], **CAND)
    assert gate(tmp_path, baseline, candidate, "--allow-capability-loss") == 1
    out = capsys.readouterr().out
    kernel = CASE_KERNEL
    assert f"not proven: kernel {kernel}, eager side: no longer checked: out_dtype=fp16 (1 in the baseline)" in out
    assert f"not proven: kernel {kernel}, compiled side: no longer checked: out_dtype=fp16" in out
    allowed = ("--allow-capability-loss", "--allow-unchecked", f"{kernel}:*:out_dtype=fp16")
    assert gate(tmp_path, baseline, candidate, *allowed) == 0, capsys.readouterr().out


def test_a_kernel_its_platform_cannot_run_in_either_run_is_said_not_failed(tmp_path, capsys):
    def cases(detail):
        skipped = {**case("h", "SKIPPED", kernel="h100_only"), "detail": detail}
        return [case("a", "PASS"), skipped]

    declared = "kernel h100_only declares archs ['sm90'], this is cpu"
    assert gate(tmp_path, report(cases(declared), **BASE), report(cases(declared), **CAND)) == 0
    out = capsys.readouterr().out
    assert "note: kernel h100_only: not run on this platform in either run" in out
    # Skipped because its module is not installed: nothing says it cannot run here.
    missing = "torchao is not installed (pip install torchao)"
    assert gate(tmp_path, report(cases(missing), **BASE), report(cases(missing), **CAND)) == 1
    assert "not proven: kernel h100_only: no case checked in either run" in capsys.readouterr().out


def test_a_matrix_kernel_the_budget_gave_no_case_is_named(tmp_path, capsys):
    code = {"plugin": "0" * 64, "kernels": {CASE_KERNEL: {"sha256": "1" * 64}, "ghost": {"sha256": "2" * 64}}}
    baseline, candidate = report([case("a", "PASS")], **BASE), report([case("a", "PASS")], **CAND)
    for data in (baseline, candidate):
        data["matrix"]["code"] = code
    assert gate(tmp_path, baseline, candidate) == 1
    assert "not proven: kernel ghost: listed in the matrix, no case of it in either run" in capsys.readouterr().out


def test_a_record_that_does_not_hold_its_worst_run_fails(tmp_path, capsys):
    edited = {**case("a", "PASS"), "runs": [{"outcome": "PASS"}, {"outcome": "MISMATCH", "signature": "x"}]}
    assert gate(tmp_path, report([case("a", "PASS")], **BASE), report([edited], **CAND)) == 1
    out = capsys.readouterr().out
    assert "1 record(s) of a case that ran more than once do not hold its worst run, e.g. a" in out


def test_a_side_checked_in_no_case_is_named(tmp_path, capsys):
    baseline = report([case("a", "PASS")], **BASE)
    crashed = {
        **case("a", "CRASH", "CRASH: process killed by SIGSEGV"),
        "errors": {"eager": {"ok": True, "ratio": 0.5}},
    }
    assert gate(tmp_path, baseline, report([crashed], **CAND)) == 1
    out = capsys.readouterr().out
    assert f"not proven: kernel {CASE_KERNEL}, compiled side: no case ran and checked, 1 in the baseline" in out
    assert f"kernel {CASE_KERNEL}, eager side" not in out


def test_the_baseline_gate_in_pytest_takes_the_allowance(matrix_project):
    def kernels(**gone):
        return [
            planted("k", "fp32_out", module="planted_evidence_kernels"),
            planted("gone", "fp32_out", module="planted_evidence_kernels", **gone),
        ]

    matrix_project.write_matrix(matrix_text(kernels(), AXES))
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "old.json").assert_outcomes(failed=2)
    # Now skipped: a torch this run does not have (the baseline's run checked it).
    matrix_project.write_matrix(matrix_text(kernels(min_torch="99.0"), AXES))
    args = (*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "new.json", "--scaledmm-baseline", "old.json")
    result = matrix_project.run(*args, "--scaledmm-allow-capability-loss")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*not proven: kernel gone: no case checked in the candidate (1 SKIPPED)*"])
    result.stdout.fnmatch_lines(["*--scaledmm-allow-unchecked 'gone' accepts it*"])
    result = matrix_project.run(*args, "--scaledmm-allow-capability-loss", "--scaledmm-allow-unchecked", "gone")
    result.stdout.fnmatch_lines(["*accepted: not proven: kernel gone*"])
    assert "gate FAILED" not in result.stdout.str()


CASE_KERNEL = case("x", "PASS")["params"]["kernel"]
