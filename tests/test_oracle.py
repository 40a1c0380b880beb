"""The oracle (inputs.reference / compare / parity, oracle.check_sides): kernels wrong only in
their numbers are caught against the float64 reference at every K, the correct kernel passes the
same cases, the bound is what its formula says on hand-computed examples, special values follow
IEEE, and the calibrated constants pass every recorded correct aten output."""

import json
import math
from pathlib import Path

import pytest
import torch
from case_factory import case_record
from direct_run import run_matrix

from matrices import BASE_AXES as SYNTHETIC_BASE
from matrices import matrix_text, planted
from pytest_scaledmm.verdict import draw
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict import reference as reference_module

CALIBRATION = Path(__file__).resolve().parents[1] / "calibration"
BASE_AXES = {**SYNTHETIC_BASE, "out_dtype": ["fp32"]}
EVERY_K = [32, 1024, 4096, 16384]
# fast accumulation: the old bound's 2^-13 per product, the loosest it had
LARGE_K = {"k": [1024, 2048], "use_fast_accum": [True]}
UNIFORM = {"k": EVERY_K, "use_fast_accum": [True]}
SPECIAL = {"scale_a": ["tensor_0d", "rowwise"], "out_dtype": ["fp32", "bf16"]}

ORACLE_BUGS = [
    ("ignores_scale_sign", {**SPECIAL, "special_scale": ["negative"]}),
    ("nan_on_zero_scale", {**SPECIAL, "special_scale": ["zero"]}),
    ("zeros_at_large_k", LARGE_K),
    ("half_the_answer", LARGE_K),
    ("uniform_error_1pct", UNIFORM),
    ("uniform_error_2pct", UNIFORM),
    ("uniform_error_5pct", {**UNIFORM, "out_dtype": ["fp32", "bf16", "fp16"]}),
]


def oracle_matrix(kernel, axes) -> str:
    return matrix_text([planted(kernel, module="planted_oracle_kernels"), planted("correct")], axes, base=BASE_AXES)


@pytest.mark.parametrize("kernel,axes", ORACLE_BUGS, ids=[b[0] for b in ORACLE_BUGS])
def test_numeric_bug_is_caught_at_every_k_and_correct_passes(kernel, axes):
    results = run_matrix(oracle_matrix(kernel, axes))
    buggy = [(c, r) for c, r in results if c.params.kernel == kernel]
    correct = [(c, r) for c, r in results if c.params.kernel == "correct"]
    assert buggy and len(buggy) == len(correct) == math.prod(len(v) for v in {**BASE_AXES, **axes}.values())
    for case, result in buggy:
        assert result.outcome == oc.MISMATCH, (case.id, result.outcome, result.signature, result.errors)
        assert result.layer == "eager+compiled", (case.id, result.layer)
    for case, result in correct:
        assert result.outcome == oc.PASS, (case.id, result.signature, result.detail)
        for side in ("eager", "compiled"):
            check = result.errors[side]
            assert check["ratio"] <= 1 and check["bound"]["model"] == reference_module.BOUND_MODEL


def test_records_carry_relative_error_and_bound():
    results = run_matrix(oracle_matrix("uniform_error_2pct", {"k": [4096]}))
    for case, result in results:
        check = result.errors["eager"]
        assert set(check) >= {"ok", "ratio", "max_abs", "max_rel", "bound"}
        bound = check["bound"]
        assert bound["accumulator"] == "fp32" and bound["c_acc"] == reference_module.ACCUMULATORS["fp32"]["c_acc"]
        assert 0 < bound["min_tol_rel"] <= bound["max_tol_rel"]
        json.loads(json.dumps(check))  # JSON-plain
        if case.params.kernel == "uniform_error_2pct":
            assert check["max_rel"] == pytest.approx(0.02, rel=1e-3) and check["ratio"] > 100
        else:
            assert check["max_rel"] < 1e-5


# -- the bound, by hand ------------------------------------------------------------------------


def test_bound_by_hand():
    """A = [[1, 2]], B = [[3], [4]], bias 5: dot 11, value 16, energy sqrt(3^2 + 8^2) = sqrt(73),
    |dot| + |bias| = 16."""
    a = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    b = torch.tensor([[3.0], [4.0]], dtype=torch.float64)
    terms = reference_module.bound_terms(a, b, torch.tensor([5.0], dtype=torch.float64))
    assert terms["dot"].item() == 11 and terms["value"].item() == 16
    assert terms["energy"].item() == pytest.approx(math.sqrt(73)) and terms["epilogue"].item() == 16
    tiny = 1e-30
    u32, bf16 = 2.0**-24, 2.0**-8
    fp32 = reference_module.ACCUMULATORS["fp32"]["c_acc"] * u32 * math.sqrt(2) * math.sqrt(73)
    expected = fp32 + reference_module.C_EP * u32 * 16 + reference_module.C_OUT * bf16 * 16 + tiny
    assert reference_module.tolerance_of(terms, 2, "fp32", bf16, 1.0, tiny).item() == pytest.approx(expected, rel=1e-12)
    # slack scales everything but tiny
    assert reference_module.tolerance_of(terms, 2, "fp32", bf16, 3.0, tiny).item() == pytest.approx(
        3 * (expected - tiny) + tiny
    )
    # fp8 on tensor cores without fast accumulation: the chain stops growing at 128 products
    fp8 = reference_module.ACCUMULATORS["fp8-tensor-core"]
    at_4096 = reference_module.tolerance_of(terms, 4096, "fp8-tensor-core", bf16, 1.0, tiny).item()
    assert fp8["promote_every"] == 128
    assert at_4096 == pytest.approx(fp8["c_acc"] * 2.0**-13 * math.sqrt(128) * math.sqrt(73) + expected - fp32)


def test_bound_grows_like_sqrt_k_not_k():
    """The old term K * u * (|A|@|B|) grew past the result; the new one, relative to |value|,
    grows like sqrt(K) * u * (energy / |value|): for K = 16384 fp32 sums it stays below 1e-4."""
    params = case_record(out_dtype="fp32", use_fast_accum=True, m=8, k=16384)
    ref = reference_module.reference(params, draw.make_inputs(params, 1, "cpu"))
    assert ref.bound["min_tol_rel"] < 1e-4 and ref.bound["accumulator"] == "fp32"
    assert (ref.tolerance < 0.01 * ref.value.abs().max()).all()


@pytest.mark.parametrize(
    "family,out,worst",
    [
        ("fp32", "fp32", 0.01),
        ("fp8-tensor-core", "fp32", 0.01),
        ("fp32", "bf16", 0.01),
        ("fp8-tensor-core", "bf16", 0.01),
    ],
)
@pytest.mark.parametrize("k", EVERY_K)
def test_uniform_one_percent_is_outside_the_bound(family, out, worst, k):
    """For fp32 sums and for fp8 tensor cores without fast accumulation (the H200 constants), a
    kernel returning 1.01 x the answer, rounded to the out dtype, is caught at every K."""
    params = case_record(out_dtype=out, m=4, k=k)
    inputs = draw.make_inputs(params, k, "cpu")
    terms = reference_module.bound_terms(*reference_module.dequantised(params, inputs))
    dtype = draw.torch_dtype(out)
    tol = reference_module.tolerance_of(
        terms, k, family, reference_module.OUT_ROUNDOFF[out], 1.0, torch.finfo(dtype).tiny
    )
    got = (terms["value"] * (1 + worst)).to(dtype).to(torch.float64)
    assert ((got - terms["value"]).abs() > tol).any()


def test_accumulator_families():
    def fp8(fast):
        return case_record(dtype_a="e4m3fn", dtype_b="e5m2", use_fast_accum=fast)

    assert reference_module.accumulator(fp8(True), "cpu") == "fp32"
    assert reference_module.accumulator(fp8(False), "cuda") == "fp8-tensor-core"
    assert reference_module.accumulator(fp8(True), "cuda") == "fp8-tensor-core-fast"
    int8 = case_record(kernel="int8_w8a8", dtype_a="int8", dtype_b="int8", use_fast_accum=True)
    assert reference_module.accumulator(int8, "cuda") == "fp32"


# -- special values ----------------------------------------------------------------------------


def _ref(values, tol=0.1):
    value = torch.tensor(values, dtype=torch.float64)
    return reference_module.Reference(value, torch.full_like(value, tol))


def test_non_finite_reference_by_hand():
    ref = _ref([[math.nan, math.inf], [1.0, -math.inf]])
    check = lambda got: reference_module.compare(torch.tensor(got), ref, (2, 2), torch.float32)  # noqa: E731
    # nan and inf both count as non-finite: a scale applied before or after the sum
    assert check([[math.inf, math.nan], [1.05, -math.inf]])["ok"]
    moved = check([[1.0, math.inf], [1.0, -math.inf]])
    assert not moved["ok"] and moved["problem"] == "non-finite positions differ from the reference"
    assert moved["ratio"] == math.inf
    flipped = check([[math.nan, -math.inf], [1.0, -math.inf]])
    assert not flipped["ok"] and flipped["problem"] == "infinities of the wrong sign"
    off = check([[math.nan, math.inf], [1.2, -math.inf]])
    assert not off["ok"] and "problem" not in off and off["ratio"] == pytest.approx(2.0)
    assert off["max_rel"] == pytest.approx(0.2)
    nan_where_finite = check([[math.nan, math.inf], [math.nan, -math.inf]])
    assert not nan_where_finite["ok"] and nan_where_finite["ratio"] == math.inf


def test_saturation_by_hand():
    ref = _ref([[70000.0, -70000.0, 100.0]], tol=1.0)
    check = lambda got: reference_module.compare(torch.tensor(got, dtype=torch.float16), ref, (1, 3), torch.float16)  # noqa: E731
    assert check([[math.inf, -65504.0, 100.0]])["ok"]
    assert not check([[-math.inf, -65504.0, 100.0]])["ok"]
    assert not check([[65504.0, -65504.0, math.inf]])["ok"]


def _special_params(special, scale_a="rowwise", bias=True):
    return case_record(
        kernel="correct",
        scale_a=scale_a,
        scale_b="tensor_1d",
        bias=bias,
        mode="aot_eager",
        m=4,
        special_scale=special,
    )


@pytest.mark.parametrize("special", ["zero", "negative"])
def test_zero_and_negative_scales_have_exact_references(special):
    inputs = draw.make_inputs(_special_params(special), 5, "cpu")
    ref = reference_module.reference(_special_params(special), inputs)
    finite = reference_module.reference(_special_params("none"), draw.make_inputs(_special_params("none"), 5, "cpu"))
    a = inputs.a.double() * inputs.scale_a.double()
    exact = a @ (inputs.b.double() * inputs.scale_b.double()) + inputs.bias.double()
    assert torch.allclose(ref.value, exact, rtol=1e-12, atol=0)
    # row 0 is the special one; the others are the finite case's
    assert torch.equal(ref.value[1:], finite.value[1:])
    if special == "zero":
        assert torch.equal(ref.value[0], inputs.bias.double())
    else:
        assert torch.allclose(ref.value[0] - inputs.bias.double(), -(finite.value[0] - inputs.bias.double()))
    # the tolerance is the finite scales' (with the larger |value| in its output term)
    assert (ref.tolerance >= finite.tolerance).all() and torch.equal(ref.tolerance[1:], finite.tolerance[1:])


@pytest.mark.parametrize("special,scale_a", [("inf", "rowwise"), ("nan", "rowwise"), ("inf", "tensor_0d")])
def test_inf_and_nan_scales_reference_is_ieee(special, scale_a):
    params = _special_params(special, scale_a, bias=False)
    inputs = draw.make_inputs(params, 5, "cpu")
    ref = reference_module.reference(params, inputs)
    rows = slice(0, 1) if scale_a == "rowwise" else slice(None)
    assert not torch.isfinite(ref.value[rows]).any()
    if scale_a == "rowwise":
        assert torch.isfinite(ref.value[1:]).all()
    assert torch.isfinite(ref.tolerance).all()  # built from the finite scales


def test_triage_style_reference_still_compares():
    """triage builds Reference(value, tolerance) itself: no bound of ours."""
    ref = _ref([[1.0, 2.0]])
    check = reference_module.compare(torch.tensor([[1.0, 2.05]]), ref, (1, 2), torch.float32)
    assert (
        check["ok"] and check["bound"] == {"model": "given by the caller"} and check["max_rel"] == pytest.approx(0.025)
    )


# -- calibration data ----------------------------------------------------------------------------


def _records(name):
    doc = json.loads((CALIBRATION / name).read_text())
    return doc, [dict(zip(doc["columns"], row)) for row in doc["records"]]


@pytest.mark.parametrize("name", ["h200-torch211.json", "cpu-torch213.json"])
def test_calibrated_constants_pass_every_recorded_case_with_margin(name):
    """need_e is the error left after the output-rounding and epilogue terms, in units of the
    energy e; the accumulation term must cover it with a margin of at least 2."""
    doc, records = _records(name)
    assert (
        doc["constants_at_measurement"]["c_ep"] == reference_module.C_EP
        and doc["constants_at_measurement"]["c_out"] == reference_module.C_OUT
    )
    for r in records:
        case = case_record(dtype_a=r["dtype_a"], dtype_b=r["dtype_b"], use_fast_accum=r["fast_accum"])
        family = reference_module.accumulator(case, doc["device_type"])
        acc = reference_module.ACCUMULATORS[family]
        have = acc["c_acc"] * acc["u_acc"] * math.sqrt(min(r["k"], acc["promote_every"]))
        assert r["need_e"] * 2 <= have, (r, family)


def test_h200_calibration_covers_what_it_claims():
    doc, records = _records("h200-torch211.json")
    assert doc["device"] == "NVIDIA H200" and doc["torch"].startswith("2.11") and not doc["skipped"]
    seen = {(r["op"], r["fast_accum"], r["out"], r["side"]) for r in records}
    for out in ("bf16", "fp16", "fp32"):
        for fast in (False, True):
            assert ("scaled_mm", fast, out, "eager") in seen and ("scaled_mm", fast, out, "inductor") in seen
        assert ("int_mm", False, out, "eager") in seen and ("int_mm", False, out, "inductor") in seen
    assert {r["k"] for r in records if r["op"] == "scaled_mm"} == set(doc["ks"]) and max(doc["ks"]) == 16384
    assert {r["bias"] for r in records} == {False, True} and {r["dtype_b"] for r in records} >= {"e4m3fn", "e5m2"}
