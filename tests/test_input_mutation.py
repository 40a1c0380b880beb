"""A kernel that changes its inputs in place fails its case, whatever it returns.

The reference is built from the inputs as they were drawn, and each call (eager, each compiled
call) gets inputs of its own, so a kernel can neither move the reference towards its own answer
nor hand a changed input to the other side. The change itself is the failure: a MISMATCH whose
signature and detail name the tensor, reproduced by the case's repro script.
"""

import subprocess
import sys

import pytest
from case_factory import case_record

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm import cli
from pytest_scaledmm.reports import repro
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.pipeline import PristineInputs

TARGETS = ("a", "b", "scale_a", "scale_b", "bias")
SIDES = ("eager", "compiled", "both")
# before: the right answer, computed before the change; after: the answer the changed inputs
# give, which a reference built from them afterwards would accept.
RESULTS = ("before", "after")
LAYER = {"eager": "eager", "compiled": "compiled", "both": "eager+compiled"}

MUTATING = '''\
import torch

TARGETS = ("a", "b", "scale_a", "scale_b", "bias")


def _product(a, b, scale_a, scale_b, bias, out_dtype):
    value = (a.float() * scale_a) @ (b.float() * scale_b)
    if bias is not None:
        value = value + bias.float()
    return value.to(out_dtype)


def _kernel(target, side, result):
    def kernel(a, b, scale_a, scale_b, *, bias=None, out_dtype=torch.bfloat16, use_fast_accum=False):
        before = _product(a, b, scale_a, scale_b, bias, out_dtype)
        if side == "both" or (side == "compiled") == torch.compiler.is_compiling():
            {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b, "bias": bias}[target].zero_()
        return before if result == "before" else _product(a, b, scale_a, scale_b, bias, out_dtype)

    return kernel


for _target in TARGETS:
    for _side in ("eager", "compiled", "both"):
        for _result in ("before", "after"):
            globals()[f"{_side}_{_target}_{_result}"] = _kernel(_target, _side, _result)


def correct(a, b, scale_a, scale_b, *, bias=None, out_dtype=torch.bfloat16, use_fast_accum=False):
    return _product(a, b, scale_a, scale_b, bias, out_dtype)


def mutate_b(a, b, scale_a, scale_b, *, bias=None, out_dtype=torch.bfloat16, use_fast_accum=False):
    b.zero_()
    return torch.zeros((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)


def mutate_zero(a, b, scale_a, scale_b, *, bias=None, out_dtype=torch.bfloat16, use_fast_accum=False):
    scale_a.zero_()
    return torch.zeros((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)


def restores(a, b, scale_a, scale_b, *, bias=None, out_dtype=torch.bfloat16, use_fast_accum=False):
    """Changes scale_a and puts the same value back: the inputs end as they began."""
    scale_a.mul_(2.0)
    scale_a.div_(2.0)
    return _product(a, b, scale_a, scale_b, bias, out_dtype)


def transposes(a, b, scale_a, scale_b, *, bias=None, out_dtype=torch.bfloat16, use_fast_accum=False):
    """Changes b's strides, not its values."""
    out = _product(a, b, scale_a, scale_b, bias, out_dtype)
    b.t_()
    return out
'''

WITH_BIAS = {"bias": [True]}


def _kernel_names():
    return [f"{side}_{target}_{result}" for target in TARGETS for side in SIDES for result in RESULTS]


@pytest.fixture
def mutating(matrix_project, pytester):
    (pytester.path / "mutating.py").write_text(MUTATING)
    pytester.syspathinsert()
    return matrix_project


def _cases(project) -> dict:
    return {c["params"]["kernel"]: c for c in project.report()["cases"]}


def test_each_input_changed_in_place_fails_its_case_and_is_named(mutating):
    """Every input, changed eagerly, compiled only or on both sides, with the right answer or
    the one the changed inputs give: a MISMATCH naming the tensor and the side; the correct
    kernel beside them passes. Today each of these is judged against a reference built from the
    changed tensors, and the ones returning what those give PASS."""
    names = _kernel_names()
    kernels = [planted(name, module="mutating") for name in names] + [planted("correct", module="mutating")]
    mutating.write_matrix(matrix_text(kernels, WITH_BIAS))
    result = mutating.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=len(names), passed=1)
    assert result.ret == 1
    cases = _cases(mutating)
    assert cases["correct"]["outcome"] == oc.PASS
    for name in names:
        side, target = name.split("_", 1)
        target = target.rsplit("_", 1)[0]
        case = cases[name]
        assert case["outcome"] == oc.MISMATCH, (name, case["outcome"], case["detail"])
        assert case["layer"] == LAYER[side], (name, case["layer"])
        assert case["signature"] == f"MISMATCH: {LAYER[side]} changed {target} in place", name
        assert f"the kernel changed {target} in place" in case["detail"], (name, case["detail"])
        assert case["extra"]["changed_inputs"] == {s: {target: "values"} for s in LAYER[side].split("+")}, name
        # The side that left its inputs alone got pristine ones, and the reference is built from
        # pristine ones: a right answer there checks out.
        untouched = {"eager": "compiled", "compiled": "eager"}.get(side)
        if untouched and name.endswith("_before"):
            assert case["errors"][untouched]["ok"], (name, case["errors"][untouched])


def test_the_hostile_kernels_fail_under_each_compile_mode(mutating):
    """The two kernels that passed before: zeroing b or scale_a and returning zeros."""
    kernels = [planted(name, module="mutating") for name in ("mutate_b", "mutate_zero", "correct")]
    axes = {"scale_b": ["tensor_0d"], "out_dtype": ["fp32"], "mode": ["eager", "aot_eager", "inductor"]}
    mutating.write_matrix(matrix_text(kernels, axes))
    result = mutating.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=6, passed=3)
    for case in mutating.report()["cases"]:
        kernel, mode = case["params"]["kernel"], case["params"]["mode"]
        if kernel == "correct":
            assert case["outcome"] == oc.PASS, (mode, case["detail"])
            continue
        changed = {"mutate_b": "b", "mutate_zero": "scale_a"}[kernel]
        assert case["outcome"] == oc.MISMATCH, (kernel, mode, case["outcome"])
        assert case["signature"] == f"MISMATCH: eager+compiled changed {changed} in place", (kernel, mode)
        assert f"the kernel changed {changed} in place" in case["detail"]


def test_the_signature_is_the_same_for_every_shape(mutating):
    """One bug, one signature: shapes and values stay out of it."""
    kernels = [planted("both_scale_a_after", module="mutating")]
    mutating.write_matrix(matrix_text(kernels, {"m": [4, 8], "k": [32, 64], **WITH_BIAS}))
    result = mutating.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=4)
    signatures = {c["signature"] for c in mutating.report()["cases"]}
    assert signatures == {"MISMATCH: eager+compiled changed scale_a in place"}


def test_a_value_put_back_is_no_change_but_new_strides_are(mutating):
    """The inputs are compared bit for bit and by layout after each call: a kernel that restores
    what it changed passes, one that changes only b's strides fails."""
    kernels = [planted(name, module="mutating") for name in ("restores", "transposes")]
    mutating.write_matrix(matrix_text(kernels, WITH_BIAS))
    result = mutating.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=1, passed=1)
    cases = _cases(mutating)
    assert cases["restores"]["outcome"] == oc.PASS, cases["restores"]["detail"]
    assert cases["transposes"]["outcome"] == oc.MISMATCH
    assert "the kernel changed b in place" in cases["transposes"]["detail"]
    assert "strides" in cases["transposes"]["detail"]


def test_an_isolated_run_fails_the_same_way(mutating):
    """In a child process per case (the default), the record is the same."""
    kernels = [planted("eager_scale_b_after", module="mutating")]
    mutating.write_matrix(matrix_text(kernels, WITH_BIAS))
    result = mutating.run("--scaledmm-matrix", "--scaledmm-report", "report.json", "--no-scaledmm-triage")
    result.assert_outcomes(failed=1)
    (case,) = mutating.report()["cases"]
    assert (case["outcome"], case["signature"]) == (oc.MISMATCH, "MISMATCH: eager changed scale_b in place")


def test_a_repro_script_reproduces_the_change(mutating, pytester):
    """The script embeds the pipeline, so it fails the case the same way: exit 10."""
    names = ("both_scale_a_after", "compiled_bias_before")
    kernels = [planted(name, module="mutating") for name in names]
    mutating.write_matrix(matrix_text(kernels, WITH_BIAS))
    result = mutating.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=2)
    for case in mutating.report()["cases"]:
        out_dir = pytester.path / case["params"]["kernel"]
        assert (
            cli.main(
                [
                    "repro",
                    str(pytester.path / "report.json"),
                    "--out",
                    str(out_dir),
                    "--case",
                    case["id"],
                    "--matrix",
                    str(pytester.path / "matrix.yaml"),
                ]
            )
            == 0
        )
        (script,) = out_dir.glob("repro_*.py")
        done = subprocess.run(
            [sys.executable, str(script), "--strict-inputs"],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=pytester.path,
        )
        out = done.stdout + done.stderr
        assert done.returncode == repro.EXIT_REPRODUCED, out
        assert f"observed: MISMATCH ({case['layer']}): {case['signature']}\n" in out, out


@pytest.mark.parametrize("layout", ["contiguous", "noncontiguous", "offset", "expanded"])
def test_each_call_gets_copies_laid_out_as_the_inputs(layout):
    """Same dtype, shape, strides, offset and view-ness, the whole storage copied (the NaN
    padding of a strided scale included), on a storage of its own; a write into that padding
    is a change too, named as such."""
    import torch

    params = case_record(
        scale_a="rowwise", scale_b="rowwise", scale_layout=layout, activation_rank=3, bias=True, m=6, k=32, n=16
    )
    inputs = make_inputs(params, 7, "cpu")
    pristine = PristineInputs(inputs.args(), list(TARGETS))
    given = pristine.fresh()
    for original, copy in zip(inputs.args(), given):
        assert (copy.dtype, copy.shape, copy.stride(), copy.storage_offset(), copy._is_view()) == (
            original.dtype,
            original.shape,
            original.stride(),
            original.storage_offset(),
            original._is_view(),
        )
        assert copy.untyped_storage().data_ptr() != original.untyped_storage().data_ptr()
        assert bytes(copy.untyped_storage()) == bytes(original.untyped_storage())
    assert pristine.changes(given) == {}

    scale_a = given[2]
    storage = torch.empty(0, dtype=scale_a.dtype).set_(scale_a.untyped_storage())
    padding = {"noncontiguous": 1, "offset": 0}.get(layout)
    if padding is not None:
        assert storage[padding].isnan()
        storage[padding] = 1.0
        assert pristine.changes(given) == {"scale_a": "storage outside its view"}
    storage[scale_a.storage_offset()] += 1.0
    assert pristine.changes(given) == {"scale_a": "values"}
