"""The fp8 ops' optional arguments: scale_result with an fp8 output, bias dtypes, and rowwise
scales of 3-D activations that arrive keepdim ([B, T, 1])."""

import pytest
import torch
from case_factory import case_params

from matrices import IN_PROCESS, matrix_text
from pytest_scaledmm.matrix import kernels as K
from pytest_scaledmm.matrix.case_params import case_id
from pytest_scaledmm.matrix.spec import load_spec
from pytest_scaledmm.matrix.support import support_model
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import CaseInputs, expected_shape, make_inputs
from pytest_scaledmm.verdict.reference import compare, reference

F8 = torch.float8_e4m3fn


BASE = case_params(out_dtype="e4m3fn", mode="aot_eager")


def params(**changes):
    return CaseParams.from_json({**BASE, **changes})


# -- scale_result ---------------------------------------------------------------------------------


def test_scale_result_multiplies_the_result_by_hand():
    # 1x2 @ 2x1 of exact e4m3 values: (1*2 + 3*4) * 0.5 * 2 = 14, times scale_result 2 = 28.
    p = params(m=1, k=2, n=1, scale_result="two")
    a = torch.tensor([[1.0, 3.0]]).to(F8)
    b = torch.tensor([[2.0], [4.0]]).to(F8)
    inputs = CaseInputs(
        a,
        b,
        torch.tensor(0.5),
        torch.tensor(2.0),
        None,
        F8,
        False,
        torch.tensor(0.5),
        {"scale_result": torch.tensor(2.0)},
    )
    ref = reference(p, inputs)
    assert ref.value.item() == 28.0
    assert ref.bound["scale_result"] == 2.0 and ref.bound["u_out"] == 2.0**-4
    # Without it (or with a 16-bit output, where the op does not use it): 14.
    assert reference(params(m=1, k=2, n=1), inputs).value.item() == 14.0
    bf16 = CaseInputs(a, b, torch.tensor(0.5), torch.tensor(2.0), None, torch.bfloat16, False, torch.tensor(0.5))
    assert reference(params(m=1, k=2, n=1, out_dtype="bf16", scale_result="two"), bf16).value.item() == 14.0


@pytest.mark.parametrize("value", ["two", "quarter"])
def test_an_output_that_ignores_scale_result_is_outside_the_bound(value):
    p = params(scale_result=value, k=128, n=32)
    inputs = make_inputs(p, 11, "cpu")
    assert inputs.extras["scale_result"].item() == {"two": 2.0, "quarter": 0.25}[value]
    ref = reference(p, inputs)
    assert ref.value.abs().max() < 448  # an fp8 output in range: no saturation hides an error
    right = ref.value.to(F8)
    assert compare(right, ref, expected_shape(p), F8)["ok"]
    ignored = reference(params(k=128, n=32), inputs).value.to(F8)
    assert not compare(ignored, ref, expected_shape(p), F8)["ok"]


def test_scale_result_and_bias_dtype_are_in_the_id_only_where_given():
    assert "-srtwo-" in case_id(params(scale_result="two"))
    assert "-biasfp32-" in case_id(params(bias=True, bias_dtype="fp32"))
    # A case without the axes keeps the id it always had (no key, no part, same digest).
    assert case_id(params()) == case_id(CaseParams.from_json(params().to_json()))
    assert "-sr" not in case_id(params()) and "bias" not in case_id(params())


SR_AXES = {
    "scale_a": ["tensor_0d"],
    "scale_b": ["tensor_0d"],
    "out_dtype": ["e4m3fn"],
    "mode": ["aot_eager"],
    "m": [16],
    "k": [32],
    "n": [16],
    "scale_result": ["none", "two"],
}


def test_planted_kernel_ignoring_scale_result_is_a_mismatch(matrix_project, monkeypatch):
    planted = {"name": "ignores_scale_result", "impl": "planted_more_arguments:ignores_scale_result"}
    matrix_project.write_matrix(matrix_text(["aten_scaled_mm", planted], SR_AXES, cases=8))
    (matrix_project.path / "planted_more_arguments.py").write_text(
        "import torch\n\n"
        "def ignores_scale_result(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):\n"
        "    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype)\n"
    )
    monkeypatch.syspath_prepend(str(matrix_project.path))
    matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    cases = matrix_project.report()["cases"]
    # A user kernel never takes the axis: its cases have no scale_result.
    planted_cases = [c for c in cases if c["params"]["kernel"] == "ignores_scale_result"]
    assert planted_cases and all("scale_result" not in c["params"] for c in planted_cases)
    builtin = {c["params"]["scale_result"]: c for c in cases if c["params"]["kernel"] == "aten_scaled_mm"}
    assert builtin["none"]["outcome"] == oc.PASS
    # torch 2.13 on the CPU divides by scale_result (oneDNN's destination scale), where the
    # documented contract multiplies: eager and compiled are both wrong, never a PASS.
    assert builtin["two"]["outcome"] == oc.MISMATCH, builtin["two"]
    assert builtin["two"]["signature"].startswith("MISMATCH: eager+compiled")
    assert builtin["two"]["errors"]["eager"]["bound"]["scale_result"] == 2.0


def test_kernel_ignoring_scale_result_is_caught_in_process():
    from direct_run import run_matrix

    def ignores(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False, scale_result=None):
        return K.aten_scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)

    import unittest.mock as mock

    with mock.patch.dict(K.BUILTIN_IMPLS, {"aten_scaled_mm": ignores}):
        results = run_matrix(matrix_text(["aten_scaled_mm"], {**SR_AXES, "scale_result": ["two", "quarter"]}, cases=4))
    assert results and {r.outcome for _, r in results} == {oc.MISMATCH}


# -- bias dtypes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "out,bias,refused",
    [
        ("bf16", "bf16", False),
        ("fp16", "fp16", False),
        ("bf16", "fp16", True),
        ("fp16", "bf16", True),
        ("bf16", "fp32", True),
        ("fp32", "fp32", True),
        ("fp32", "bf16", True),
        ("e4m3fn", "bf16", False),
    ],
)
def test_gpu_model_refuses_the_documented_bias_dtypes(out, bias, refused):
    spec = load_spec("matrix.yaml")
    kernel = next(k for k in spec.kernels if k.name == "aten_scaled_mm")
    case = params(out_dtype=out, bias=True, bias_dtype=bias, scale_result="none")
    assert ("bias_dtype" in support_model(kernel, "sm90").breaks(case)) is refused
    assert "bias_dtype" not in support_model(kernel, "cpu").breaks(case)  # the CPU takes every pairing


def test_bias_has_the_axis_dtype():
    inputs = make_inputs(params(out_dtype="bf16", bias=True, bias_dtype="fp32"), 5, "cpu")
    assert inputs.bias.dtype == torch.float32
    assert make_inputs(params(out_dtype="fp16", bias=True), 5, "cpu").bias.dtype == torch.float16
    assert make_inputs(params(out_dtype="e4m3fn", bias=True), 5, "cpu").bias.dtype == torch.bfloat16


def test_bias_dtype_refusals_are_documented_boundaries():
    from pytest_scaledmm.verdict.outcome import ErrorInfo
    from pytest_scaledmm.verdict.refusals import judge

    spec = load_spec("matrix.yaml")
    kernel = next(k for k in spec.kernels if k.name == "aten_scaled_mm")
    for message in (
        "Bias must be BFloat16 to compute BFloat16 output, but got Half",
        "Bias must be Float16 to compute Half output, but got BFloat16",
        "Bias must be BFloat16 or Half, but got Float",
        "Bias is not supported when out_dtype is set to Float32",
    ):
        error = ErrorInfo("RuntimeError", message, "RuntimeError", "eager", message)
        verdict = judge(kernel, params(out_dtype="bf16", bias=True, bias_dtype="fp16"), error, error)
        assert verdict.outcome == oc.UNSUPPORTED and "documented refusal" in verdict.detail, message


# -- keepdim rowwise scales of 3-D activations -----------------------------------------------------


def rowwise_params(**changes):
    return params(
        kernel="fp8_linear_rowwise",
        scale_a="rowwise",
        scale_b="rowwise",
        out_dtype="bf16",
        activation_rank=3,
        m=32,
        k=64,
        n=16,
        **changes,
    )


def test_keepdim_scale_arrives_as_b_t_1_and_the_reference_is_unchanged():
    flat, keep = make_inputs(rowwise_params(), 9, "cpu"), make_inputs(rowwise_params(scale_keepdim=True), 9, "cpu")
    assert tuple(flat.a.shape) == (2, 16, 64)
    assert tuple(flat.scale_a.shape) == (32, 1) and tuple(keep.scale_a.shape) == (2, 16, 1)
    assert torch.equal(keep.scale_a.reshape(32, 1), flat.scale_a)
    ref_flat, ref_keep = reference(rowwise_params(), flat), reference(rowwise_params(scale_keepdim=True), keep)
    assert torch.equal(ref_flat.value, ref_keep.value)
    # By hand: token 5 of batch 1 (row 21), column 3.
    a = keep.a.double().reshape(32, 64)[21] * keep.scale_a[1, 5, 0].double()
    b = keep.b.double()[:, 3] * keep.scale_b.reshape(-1)[3].double()
    assert torch.isclose(ref_keep.value[21, 3], (a * b).sum(), rtol=1e-12)


def test_rowwise_wrapper_flattens_a_keepdim_scale(cpu_fp8_mm):
    p = rowwise_params(scale_keepdim=True)
    inputs = make_inputs(p, 9, "cpu")
    out = K.fp8_linear_rowwise(inputs.a, inputs.b, inputs.scale_a, inputs.scale_b, out_dtype=torch.bfloat16)
    assert tuple(out.shape) == expected_shape(p) == (2, 16, 16)
    assert compare(out, reference(p, inputs), expected_shape(p), torch.bfloat16)["ok"]
