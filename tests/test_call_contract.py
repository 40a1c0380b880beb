"""The call contract, held on every call the harness makes of a kernel: each planted kernel of
tests/planted_call_contract_kernels.py returns values the reference accepts and breaks one thing a
caller of torch._scaled_mm relies on, some only on a call after the first. Each is caught with
its check's own signature by a matrix that lists only it, its correct twin passes, a declaration
quiets the check it names, and a finding replays alone in a fresh process.
"""

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.call_contract import DETERMINISM_CHECK, OUTPUT_LAYOUT_CHECK
from pytest_scaledmm.verdict.signature_text import (
    CHANGED_IN_PLACE,
    NONDETERMINISTIC,
    NONFINITE_PATTERN,
    NOT_IN_LAYOUT,
)

MODULE = "planted_call_contract_kernels"
# M past one 16-row tile; an fp32 and a bf16 output; both compile paths that run on a CPU quickly.
AXES = {"m": [33], "out_dtype": ["fp32", "bf16"], "mode": ["eager", "aot_eager"]}
ROW_MAJOR, COLUMN_MAJOR = NOT_IN_LAYOUT
# kernel -> (what its signature names, the call-contract check it breaks or None, the out dtypes it shows on)
PLANTED = {
    "column_major": (ROW_MAJOR, OUTPUT_LAYOUT_CHECK, ("fp32", "bf16")),
    "padded_rows": (ROW_MAJOR, OUTPUT_LAYOUT_CHECK, ("fp32", "bf16")),
    "nondeterministic_later": (NONDETERMINISTIC, DETERMINISM_CHECK, ("fp32",)),
    "writes_scale_a_later": (f"changed scale_a {CHANGED_IN_PLACE}", None, ("fp32", "bf16")),
    "nan_tail_rows": (NONFINITE_PATTERN, None, ("fp32", "bf16")),
    "float32_on_later_calls": ("dtype torch.float32, expected torch.bfloat16", None, ("bf16",)),
}


def _run(project, kernels, *args):
    project.write_matrix(matrix_text(kernels, AXES))
    result = project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *args)
    return result, project.report()["cases"]


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_broken_check_is_caught_with_its_own_signature(matrix_project, name):
    said, check, shows_on = PLANTED[name]
    result, cases = _run(matrix_project, [planted(name, module=MODULE)], *IN_PROCESS)
    caught = [case for case in cases if case["params"]["out_dtype"] in shows_on]
    assert caught and result.ret == 1
    for case in caught:
        assert case["outcome"] == oc.MISMATCH, case["detail"]
        assert said in case["signature"], case["signature"]
        if check is not None:
            broken = case["extra"]["call_contract"]
            assert all(check in found for found in broken.values()), broken
    summary = result.stdout.str()
    assert f"kernel {name}: " in summary and said in summary


def test_the_correct_twin_passes_every_check(matrix_project):
    result, cases = _run(matrix_project, [planted("correct", module=MODULE)], *IN_PROCESS)
    assert result.ret == 0
    assert [case["outcome"] for case in cases] == [oc.PASS] * len(cases) and len(cases) == 4
    assert all("call_contract" not in case.get("extra", {}) for case in cases)


@pytest.mark.parametrize(
    ("name", "declared"),
    [
        ("column_major", {"output_layout": "column-major"}),
        ("padded_rows", {"output_layout": "any"}),
        ("nondeterministic_later", {"deterministic": False}),
    ],
)
def test_a_declared_contract_quiets_the_check_it_names(matrix_project, name, declared):
    result, cases = _run(matrix_project, [planted(name, module=MODULE, **declared)], *IN_PROCESS)
    assert result.ret == 0, [case["signature"] for case in cases]
    assert {case["outcome"] for case in cases} == {oc.PASS}


def test_a_declared_layout_is_held_too(matrix_project):
    """A kernel declared column-major that returns row-major breaks its own declaration."""
    result, cases = _run(matrix_project, [planted("correct", module=MODULE, output_layout="column-major")], *IN_PROCESS)
    assert result.ret == 1
    assert all(COLUMN_MAJOR in case["signature"] for case in cases), [case["signature"] for case in cases]


def test_an_unknown_declared_layout_is_one_clear_error(matrix_project):
    result, _ = _run(matrix_project, [planted("correct", module=MODULE, output_layout="diagonal")])
    text = result.stdout.str() + result.stderr.str()
    assert "matrix.yaml" in text and "output_layout" in text and "Traceback" not in text
    assert result.ret != 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_finding_replays_alone_in_a_fresh_process(matrix_project, pytester, name):
    """The failing case run on its own, in a new process (and its isolated child), as the
    summary's replay line says: the same check broken, whatever ran before it in the run. (The
    run here is in-process, so a kernel wrong from its process's second call on is wrong on an
    earlier call there than in the replay: the check is the same, the call that showed it not.)"""
    said, _, shows_on = PLANTED[name]
    _, cases = _run(matrix_project, [planted(name, module=MODULE)], *IN_PROCESS)
    case = next(c for c in cases if c["params"]["out_dtype"] in shows_on and c["params"]["mode"] == "aot_eager")
    replay = pytester.runpytest_subprocess(
        f"{matrix_project.path / 'matrix.yaml'}::{case['id']}",
        "--scaledmm-matrix",
        "--scaledmm-report",
        "replay.json",
        "-p",
        "no:cacheprovider",
    )
    (alone,) = matrix_project.report("replay.json")["cases"]
    assert replay.ret == 1
    assert alone["id"] == case["id"] and alone["outcome"] == case["outcome"] == oc.MISMATCH
    assert said in alone["signature"], alone["signature"]
