"""The newer scaled-mm API: aten._scaled_mm_v2 called with int recipes and through
torch.nn.functional.scaled_mm, the three blockwise pairings, MX and NVFP4 scales. Hand-computed
exact examples for the multipliers, the dequantisation and the swizzle; what the support models
and the refusal catalogue say of them; a small matrix run on this CPU."""

import math

import pytest
import torch
from case_factory import case_params, case_record

from matrices import IN_PROCESS, matrix_text
from pytest_scaledmm.matrix import kernels as K
from pytest_scaledmm.matrix.spec import BUILTIN_KERNELS, KernelSpec
from pytest_scaledmm.matrix.support import support_model
from pytest_scaledmm.verdict import draw
from pytest_scaledmm.verdict import reference as reference_module
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.microscaling import E2M1_VALUES, operand_values, pack_fp4, scale_values
from pytest_scaledmm.verdict.outcome import ErrorInfo
from pytest_scaledmm.verdict.refusals import matching_refusal
from pytest_scaledmm.verdict.scale_forms import RECIPE_CODES, SWIZZLE_CODES, scale_form

HAS_V2 = hasattr(torch.ops.aten, "_scaled_mm_v2")
HAS_MICRO = hasattr(torch, "float4_e2m1fn_x2") and hasattr(torch, "float8_e8m0fnu")
needs_v2 = pytest.mark.skipif(not HAS_V2, reason=f"torch {torch.__version__} has no aten._scaled_mm_v2")
needs_micro = pytest.mark.skipif(not HAS_MICRO, reason=f"torch {torch.__version__} has no fp4 / e8m0 dtypes")


BASE = case_params(kernel="scaled_mm_v2", m=128, k=256, n=128)


def _params(**overrides):
    return CaseParams.from_json({**BASE, **overrides})


def _dequantised(params, a, b, scale_a, scale_b):
    made = draw.CaseInputs(a, b, scale_a, scale_b, None, torch.bfloat16, False, scale_a)
    return reference_module.dequantised(params, made)


# -- recipe ints ----------------------------------------------------------------------------------


@pytest.mark.skipif(K._scaling_type() is None, reason="no ScalingType in this torch")
def test_recipe_and_swizzle_codes_are_torchs():
    recipes = K._scaling_type()
    assert {name: getattr(recipes, name).value for name in RECIPE_CODES} == RECIPE_CODES
    swizzles = torch.nn.functional.SwizzleType
    assert {name: getattr(swizzles, name).value for name in SWIZZLE_CODES} == SWIZZLE_CODES


@pytest.mark.parametrize(
    "form_a,form_b,recipes,codes",
    [
        ("block1x128", "block128x128", ("BlockWise1x128", "BlockWise128x128"), ([4], [0], [5], [0])),
        ("block128x128", "block1x128", ("BlockWise128x128", "BlockWise1x128"), ([5], [0], [4], [0])),
        ("block1x128", "block1x128", ("BlockWise1x128", "BlockWise1x128"), ([4], [0], [4], [0])),
        ("blockwise", "blockwise", ("BlockWise1x128", "BlockWise128x128"), ([4], [0], [5], [0])),
        ("rowwise", "rowwise", ("RowWise", "RowWise"), ([1], [0], [1], [0])),
        ("mx", "mx", ("BlockWise1x32", "BlockWise1x32"), ([3], [1], [3], [1])),
        # NVFP4: block scales swizzled, then the global scale TensorWise and not swizzled.
        ("nvfp4", "nvfp4", ("BlockWise1x16", "BlockWise1x16"), ([2, 0], [1, 0], [2, 0], [1, 0])),
    ],
)
@needs_micro
def test_v2_recipe_ints_from_scale_shapes(form_a, form_b, recipes, codes):
    m, k, n = 256, 512, 384
    dtype = "fp4e2m1" if form_a == "nvfp4" else "e4m3fn"
    made = draw.make_inputs(
        _params(scale_a=form_a, scale_b=form_b, m=m, k=k, n=n, dtype_a=dtype, dtype_b=dtype), 1, "cpu"
    )
    assert K._inner(made.a) == k
    assert K.scale_recipe_names(made.scale_a, made.scale_b, m, k, n) == recipes
    got = K.v2_call_codes(*recipes, made.scale_a, made.scale_b)
    assert got == codes and all(type(v) is int for side in got for v in side)


# -- blockwise multipliers and the op's layouts ---------------------------------------------------


def test_block128x128_multiplier_of_a_repeats_each_element_over_its_block():
    grid = torch.tensor([[1.0, 2.0], [3.0, 4.0]])  # M = 200, K = 256: 2 x 2 blocks, the last rows partial
    expanded = draw.expand_scale(grid, "block128x128", "a", 200, 256)
    assert expanded.shape == (200, 256) and expanded.dtype == torch.float64
    assert expanded[0, 0] == 1 and expanded[127, 127] == 1 and expanded[0, 128] == 2
    assert expanded[128, 0] == 3 and expanded[199, 255] == 4 and expanded[128, 127] == 3


def test_block1x128_multiplier_of_b_runs_along_k_per_column():
    grid = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # K = 256 x N = 3: one per 128 of K and column
    expanded = draw.expand_scale(grid, "block1x128", "b", 256, 3)
    assert expanded[0].tolist() == [1, 2, 3] and expanded[127].tolist() == [1, 2, 3]
    assert expanded[128].tolist() == [4, 5, 6] and expanded[255].tolist() == [4, 5, 6]


def test_block128x128_of_b_and_block1x128_of_a_exact_product():
    # a: M = 1, K = 256 of ones with 1x128 scales (2, 3); b: K = 256, N = 1 of ones with one
    # 128x128 scale per K block (5, 7): the product is 128 * 2 * 5 + 128 * 3 * 7.
    params = _params(scale_a="block1x128", scale_b="block128x128", m=1, k=256, n=1)
    a, b = torch.ones(1, 256), torch.ones(256, 1)
    A, B, _ = _dequantised(params, a, b, torch.tensor([[2.0, 3.0]]), torch.tensor([[5.0], [7.0]]))
    assert (A @ B).item() == 128 * 2 * 5 + 128 * 3 * 7


def test_v2_scale_operand_has_the_ops_layouts():
    m, _k, n = 256, 640, 384  # K/128 = 5 blocks, padded to L4 = 8
    kb, l4 = 5, 8
    a_1x128 = torch.arange(m * kb, dtype=torch.float32).reshape(m, kb)
    (sa,) = K.v2_scale_operand(a_1x128, "BlockWise1x128", "a")
    assert sa.shape == (m, kb) and sa.stride() == (1, m) and torch.equal(sa, a_1x128)
    b_1x128 = torch.arange(kb * n, dtype=torch.float32).reshape(kb, n)  # grid of b: K/128 x N
    (sb,) = K.v2_scale_operand(b_1x128, "BlockWise1x128", "b")
    assert sb.shape == (n, kb) and sb.stride() == (1, n) and torch.equal(sb, b_1x128.t())
    b_128 = torch.arange(kb * 3, dtype=torch.float32).reshape(kb, 3) + 1  # K/128 x N/128
    (sb,) = K.v2_scale_operand(b_128, "BlockWise128x128", "b")
    assert sb.shape == (l4, 3) and sb.stride() == (1, l4)
    assert torch.equal(sb[:kb], b_128) and torch.equal(sb[kb:], torch.zeros(l4 - kb, 3))
    a_128 = torch.arange(2 * kb, dtype=torch.float32).reshape(2, kb) + 1  # M/128 x K/128
    (sa,) = K.v2_scale_operand(a_128, "BlockWise128x128", "a")
    assert sa.shape == (l4, 2) and sa.stride() == (1, l4) and torch.equal(sa[:kb], a_128.t())


@needs_v2
@pytest.mark.parametrize(
    "form_a,form_b",
    [
        ("block1x128", "block128x128"),
        ("block128x128", "block1x128"),
        ("block1x128", "block1x128"),
        ("blockwise", "blockwise"),
    ],
)
def test_blockwise_layouts_pass_torchs_meta_checks(form_a, form_b):
    """Compiled, the op's meta function checks each recipe's scale shapes and strides first (a
    wrong layout fails there with its own message); the CPU kernel then refuses every blockwise
    pairing as eager does."""
    m, k, n = 256, 640, 384
    made = draw.make_inputs(_params(scale_a=form_a, scale_b=form_b, m=m, k=k, n=n), 2, "cpu")

    def call(a, b, scale_a, scale_b):
        return K.scaled_mm_v2(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)

    torch._dynamo.reset()
    with pytest.raises(ValueError, match="Invalid scaling configuration") as eager:
        call(made.a, made.b, made.scale_a, made.scale_b)
    with pytest.raises(Exception) as compiled:
        torch.compile(call, backend="aot_eager", fullgraph=True)(made.a, made.b, made.scale_a, made.scale_b)
    assert "Invalid scaling configuration" in str(compiled.value), str(compiled.value)[:300]
    assert "must have shape" not in str(compiled.value) and str(eager.value)


# -- MX and NVFP4 --------------------------------------------------------------------------------


@needs_micro
def test_fp4_codes_and_packing():
    codes = torch.arange(16, dtype=torch.uint8).reshape(1, 16)
    packed = pack_fp4(codes)
    assert packed.shape == (1, 8) and packed.view(torch.uint8)[0, 0].item() == 0x10  # code 0 low, 1 high
    want = [*E2M1_VALUES, *(-v for v in E2M1_VALUES)]
    assert operand_values(packed)[0].tolist() == want
    # b is K/2 x N column-major: unpacked along K, its contiguous dim.
    assert operand_values(packed.t()).t()[0].tolist() == want
    assert want[:8] == [0, 0.5, 1, 1.5, 2, 3, 4, 6]


@needs_micro
def test_e8m0_scales_are_powers_of_two_from_their_bits():
    bits = torch.tensor([127, 129, 125, 0, 254, 255], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    values = scale_values(bits)
    assert values[:5].tolist() == [1.0, 4.0, 0.25, 2.0**-127, 2.0**127] and math.isnan(values[5])


@needs_micro
def test_mx_block_dequantises_each_32_wide_block_by_its_exponent():
    # a: M = 1, K = 64, two 1x32 blocks with exponents 2^2 and 2^-1; b: K = 64 x N = 1 with 2^0, 2^3.
    params = _params(scale_a="mx", scale_b="mx", m=1, k=64, n=1)
    a_values = torch.tensor([[1.5] * 32 + [-2.0] * 32])
    a = a_values.to(torch.float8_e4m3fn)
    b = torch.ones(1, 64).to(torch.float8_e4m3fn).t()
    scale_a = torch.tensor([[129, 126]], dtype=torch.uint8).view(torch.float8_e8m0fnu)  # (M, K/32)
    scale_b = torch.tensor([[127], [130]], dtype=torch.uint8).view(torch.float8_e8m0fnu)  # (K/32, N)
    A, B, _ = _dequantised(params, a, b, scale_a, scale_b)
    assert A[0, 0] == 6.0 and A[0, 31] == 6.0 and A[0, 32] == -1.0 and A[0, 63] == -1.0
    assert B[0, 0] == 1.0 and B[32, 0] == 8.0
    assert (A @ B).item() == 32 * 6.0 * 1.0 + 32 * -1.0 * 8.0  # = -64
    ref = reference_module.reference(
        params, draw.CaseInputs(a, b, scale_a, scale_b, None, torch.bfloat16, False, scale_a)
    )
    assert ref.value.item() == -64.0


@needs_micro
def test_nvfp4_block_dequantises_with_block_and_global_scales():
    # a: M = 1, K = 16, nibbles 0..15 (0, 0.5, ..., 6, -0, -0.5, ..., -6); e4m3 block scale 1.5,
    # global 0.5. b: K = 16 x N = 1, every nibble 2 (value 1.0), block scale 2, global 0.25.
    params = _params(scale_a="nvfp4", scale_b="nvfp4", dtype_a="fp4e2m1", dtype_b="fp4e2m1", m=1, k=16, n=1)
    a = pack_fp4(torch.arange(16, dtype=torch.uint8).reshape(1, 16))
    b = pack_fp4(torch.full((1, 16), 2, dtype=torch.uint8)).t()
    scale_a = (torch.tensor([[1.5]]).to(torch.float8_e4m3fn), torch.tensor(0.5))
    scale_b = (torch.tensor([[2.0]]).to(torch.float8_e4m3fn), torch.tensor(0.25))
    A, B, _ = _dequantised(params, a, b, scale_a, scale_b)
    assert A[0, 3].item() == 1.5 * 1.5 * 0.5 and A[0, 15].item() == -6 * 0.75
    assert B[:, 0].tolist() == [0.5] * 16
    # sum of the a values is 0 (each magnitude once with each sign): check a one-signed half too.
    assert (A @ B).item() == 0.0
    half = pack_fp4(torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7] * 2], dtype=torch.uint8))
    A, B, _ = _dequantised(params, half, b, scale_a, scale_b)
    # each magnitude twice, times a's scales (1.5 * 0.5), times b's value 1 and scales (2 * 0.25)
    assert (A @ B).item() == 2 * sum(E2M1_VALUES) * (1.5 * 0.5) * (1.0 * 2 * 0.25)
    assert (A @ B).item() == 13.5  # 2 * 18 * 0.75 * 0.5


@needs_micro
def test_microscaled_inputs_are_drawn_in_their_dtypes():
    made = draw.make_inputs(_params(scale_a="nvfp4", scale_b="nvfp4", dtype_a="fp4e2m1", dtype_b="fp4e2m1"), 4, "cpu")
    assert made.a.dtype == torch.float4_e2m1fn_x2 and made.a.shape == (128, 128) and made.b.shape == (128, 128)
    assert made.scale_a[0].dtype == torch.float8_e4m3fn and made.scale_a[0].shape == (128, 16)
    assert made.scale_b[0].shape == (16, 128) and made.scale_a[1].dtype == torch.float32
    ref = reference_module.reference(
        _params(scale_a="nvfp4", scale_b="nvfp4", dtype_a="fp4e2m1", dtype_b="fp4e2m1"), made
    )
    assert ref.value.shape == (128, 128) and torch.isfinite(ref.value).all()
    mx = draw.make_inputs(_params(scale_a="mx", scale_b="mx"), 4, "cpu")
    assert mx.scale_a.dtype == torch.float8_e8m0fnu and mx.scale_a.shape == (128, 8) and mx.scale_b.shape == (8, 128)


def _blocked_position(row: int, col: int, col_blocks: int) -> int:
    """Where to_blocked puts element (row, col): its 128 x 4 tile (row-major over tiles), then
    row r of the tile at [r % 32, (r // 32) * 4 + c] of the tile's 32 x 16."""
    tile = (row // 128) * col_blocks + col // 4
    r, c = row % 128, col % 4
    return tile * 512 + (r % 32) * 16 + (r // 32) * 4 + c


def test_to_blocked_places_each_element_by_hand():
    scale = torch.arange(128 * 4, dtype=torch.float32).reshape(128, 4)
    flat = K.to_blocked(scale)
    assert flat.shape == (512,)
    assert flat[0].item() == 0 and flat[4].item() == scale[32, 0].item() and flat[16].item() == scale[1, 0].item()
    for row in range(128):
        for col in range(4):
            assert flat[_blocked_position(row, col, 1)] == scale[row, col]


@needs_micro
def test_to_blocked_pads_rows_to_128_and_cols_to_4_with_zero_bytes():
    rows, cols = 130, 5
    bits = (torch.arange(rows * cols) % 200 + 1).to(torch.uint8).reshape(rows, cols)
    flat = K.to_blocked(bits.view(torch.float8_e8m0fnu)).view(torch.uint8)
    assert flat.shape == (2 * 2 * 512,)
    for row in range(rows):
        for col in range(cols):
            assert flat[_blocked_position(row, col, 2)] == bits[row, col]
    assert int((flat == 0).sum()) == 2048 - rows * cols


# -- tracing ------------------------------------------------------------------------------------


def _rowwise_inputs():
    made = draw.make_inputs(_params(scale_a="rowwise", scale_b="rowwise", m=16, k=64, n=32), 5, "cpu")
    return made.a, made.b, made.scale_a, made.scale_b


@needs_v2
def test_v2_kernel_traces_in_dynamo_fullgraph_on_this_cpu():
    args = _rowwise_inputs()
    eager = K.scaled_mm_v2(*args, out_dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda a, b, sa, sb: K.scaled_mm_v2(a, b, sa, sb, out_dtype=torch.bfloat16), backend="eager", fullgraph=True
    )
    assert torch.equal(compiled(*args), eager)


@pytest.mark.skipif(not hasattr(torch.nn.functional, "scaled_mm"), reason="no torch.nn.functional.scaled_mm")
def test_functional_kernel_is_the_form_dynamo_may_skip():
    args = _rowwise_inputs()
    eager = K.scaled_mm_v2_functional(*args, out_dtype=torch.bfloat16)
    assert torch.equal(eager, K.scaled_mm_v2(*args, out_dtype=torch.bfloat16))
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda a, b, sa, sb: K.scaled_mm_v2_functional(a, b, sa, sb, out_dtype=torch.bfloat16),
        backend="eager",
        fullgraph=True,
    )
    try:
        out = compiled(*args)
    except Exception as exc:  # torch 2.11 on the H200: the failure this kernel exists to show
        assert "marked as skipped" in str(exc), str(exc)[:300]
        return
    assert torch.equal(out, eager)
    pytest.skip(f"torch {torch.__version__} traces torch.nn.functional.scaled_mm (2.11 skipped it)")


# -- support models and refusals -----------------------------------------------------------------


def _model(name, arch):
    return support_model(KernelSpec(name, **BUILTIN_KERNELS[name]), arch)


@pytest.mark.parametrize("form_a,form_b", [("block128x128", "block1x128"), ("block1x128", "block1x128")])
def test_old_scaled_mm_refuses_the_new_pairings_on_sm90(form_a, form_b):
    case = _params(kernel="aten_scaled_mm", scale_a=form_a, scale_b=form_b, m=256, k=256, n=256)
    assert _model("aten_scaled_mm", "sm90").breaks(case) == ["scale_pair"]
    assert _model("aten_scaled_mm", "sm90").breaks(case.with_values(scale_a="block1x128", scale_b="block128x128")) == []


@pytest.mark.parametrize("kernel", ["scaled_mm_v2", "scaled_mm_v2_functional"])
def test_v2_models_take_every_blockwise_pairing_on_sm90_and_none_on_the_cpu(kernel):
    for form_a, form_b in [
        ("block1x128", "block128x128"),
        ("block128x128", "block1x128"),
        ("block1x128", "block1x128"),
        ("blockwise", "blockwise"),
    ]:
        case = _params(kernel=kernel, scale_a=form_a, scale_b=form_b, m=256, k=256, n=256)
        assert _model(kernel, "sm90").breaks(case) == []
        # Any layout: the kernel copies block scales into the op's.
        assert _model(kernel, "sm90").breaks(case.with_values(scale_layout="noncontiguous")) == []
        assert _model(kernel, "cpu").breaks(case) == ["scale_pair"]
    # Whole blocks only: K a multiple of 128, M of a 128x128 scale_a too.
    assert _model(kernel, "sm90").breaks(_params(kernel=kernel, scale_a="block1x128", scale_b="block1x128", k=192)) == [
        "recipe_layout"
    ]
    assert _model(kernel, "sm90").breaks(
        _params(kernel=kernel, scale_a="block128x128", scale_b="block1x128", m=64)
    ) == ["recipe_layout"]


@pytest.mark.parametrize("arch,want", [("cpu", ["needs_sm100"]), ("sm90", ["needs_sm100"]), ("sm100", [])])
def test_microscaling_needs_sm100(arch, want):
    mx = _params(scale_a="mx", scale_b="mx")
    nvfp4 = _params(scale_a="nvfp4", scale_b="nvfp4", dtype_a="fp4e2m1", dtype_b="fp4e2m1")
    for kernel in ("scaled_mm_v2", "scaled_mm_v2_functional"):
        assert _model(kernel, arch).breaks(mx.with_values(kernel=kernel)) == want
        assert _model(kernel, arch).breaks(nvfp4.with_values(kernel=kernel)) == want
        # Mixed forms, or a form with other operands, have no recipe anywhere.
        assert _model(kernel, arch).breaks(mx.with_values(kernel=kernel, scale_b="nvfp4")) == ["scale_pair"]
        assert _model(kernel, arch).breaks(nvfp4.with_values(kernel=kernel, dtype_a="e4m3fn", dtype_b="e4m3fn")) == [
            "scale_pair"
        ]
        assert _model(kernel, arch).breaks(mx.with_values(kernel=kernel, scale_b="rowwise")) == ["scale_pair"]


@pytest.mark.parametrize(
    "message,key,kinds",
    [
        ("CPU does not support swizzle.", "needs_sm100", ("ValueError",)),
        ("scale_a must be swizzled to SWIZZLE_32_4_4 format", "needs_sm100", ("ValueError",)),
        (
            "CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmulAlgoGetHeuristic",
            "library_status",
            ("RuntimeError",),
        ),
        ("Invalid scaling configuration.", "scale_pair", ("ValueError", "RuntimeError")),
    ],
)
def test_microscaling_refusals_are_catalogued_for_both_v2_kernels(message, key, kinds):
    for kernel in ("scaled_mm_v2", "scaled_mm_v2_functional"):
        for kind in (f"builtins.{name}" for name in kinds):
            error = ErrorInfo(kind, message, kind, "runtime", message)
            found = matching_refusal(error, kernel)
            assert found is not None and found.key == key
    # Not the old kernel's: torch._scaled_mm has no microscaled recipes to refuse.
    assert (
        matching_refusal(
            ErrorInfo("builtins.ValueError", "CPU does not support swizzle.", "builtins.ValueError"), "aten_scaled_mm"
        )
        is None
    )


def test_forms_are_one_recipe_pair_per_pair_of_forms():
    forms = {f: scale_form(f) for f in ("block1x128", "block128x128")}
    pairs = {(a, b): (forms[a].recipe_a, forms[b].recipe_b) for a in forms for b in forms}
    assert pairs[("block1x128", "block128x128")] == ("BlockWise1x128", "BlockWise128x128")
    assert pairs[("block128x128", "block1x128")] == ("BlockWise128x128", "BlockWise1x128")
    assert pairs[("block1x128", "block1x128")] == ("BlockWise1x128", "BlockWise1x128")


# -- a small matrix on this CPU ------------------------------------------------------------------


@needs_v2
@needs_micro
def test_frontier_matrix_outcomes_on_this_cpu(matrix_project):
    axes = {
        "scale_a": ["mx", "nvfp4", "block1x128", "block128x128", "rowwise"],
        "scale_b": ["mx", "nvfp4", "block1x128", "block128x128", "rowwise"],
        "dtype_a": ["e4m3fn", "fp4e2m1"],
        "dtype_b": ["e4m3fn", "fp4e2m1"],
        "out_dtype": ["bf16"],
        "mode": ["aot_eager"],
        "m": [128],
        "k": [256],
        "n": [128],
    }
    exclude = [{"dtype_a": "fp4e2m1", "dtype_b": "e4m3fn"}, {"dtype_a": "e4m3fn", "dtype_b": "fp4e2m1"}]
    matrix_project.write_matrix(matrix_text(["scaled_mm_v2"], axes, cases=40, exclude=exclude))
    matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    cases = matrix_project.report()["cases"]
    by_pair = {}
    for case in cases:
        params = case["params"]
        by_pair.setdefault((params["scale_a"], params["scale_b"], params["dtype_a"]), set()).add(case["outcome"])
    # Valid cases (rowwise, or block scales whose shapes are rowwise or one element) pass; MX and
    # NVFP4 are refused by the CPU's swizzle check, the op's blockwise pairings by its recipe
    # check, in layouts the meta function accepts: documented refusals, eager and compiled alike.
    valid = [c for c in cases if c["params"].get("purpose") == "valid"]
    assert valid and all(c["outcome"] == "PASS" for c in valid), [(c["id"], c["outcome"]) for c in valid]
    micro = {k: v for k, v in by_pair.items() if k[0] in ("mx", "nvfp4") and k[0] == k[1]}
    assert micro and all(v == {"UNSUPPORTED"} for v in micro.values()), by_pair
    pairings = [("block1x128", "block128x128"), ("block128x128", "block1x128"), ("block1x128", "block1x128")]
    block = {k: v for k, v in by_pair.items() if k[:2] in pairings}
    assert all(v == {"UNSUPPORTED"} for v in block.values()), by_pair  # when drawn (two-scale changes)
    needs = [c for c in cases if c["params"].get("expected_refusal") == "needs_sm100"]
    assert needs and all(c["outcome"] == "UNSUPPORTED" for c in needs)
    # A pair that is no recipe of the op (128x128 x 128x128, MX x blockwise): eager's ValueError,
    # the meta function's RuntimeError, on invalid input.
    assert {c["outcome"] for c in cases} <= {"PASS", "UNSUPPORTED", "BOUNDARY_PARITY"}, [
        (c["id"], c["outcome"], c.get("signature")) for c in cases if c["outcome"] not in ("PASS", "UNSUPPORTED")
    ]


def test_input_facts_of_packed_fp4_operands_for_repro_scripts():
    """A repro script records each input's facts; packed fp4 has no copy kernel to take them with."""
    from pytest_scaledmm.verdict.draw import make_inputs
    from pytest_scaledmm.verdict.facts import input_facts

    params = case_record(
        kernel="scaled_mm_v2",
        scale_a="nvfp4",
        scale_b="nvfp4",
        dtype_a="fp4e2m1",
        dtype_b="fp4e2m1",
        m=64,
        k=128,
        n=128,
        mode="aot_eager",
    )
    first, again = (input_facts(make_inputs(params, 7, "cpu")) for _ in range(2))
    assert first == again
    assert first["a"]["dtype"] == "float4_e2m1fn_x2" and first["a"]["shape"] == [64, 64]
    assert first["b"]["stride"] == [1, 64]  # K/2 x N, column-major, as drawn
    assert [level["dtype"] for level in first["scale_a"]["levels"]] == ["float8_e4m3fn", "float32"]
    other = input_facts(make_inputs(params, 8, "cpu"))
    assert other["a"]["crc32"] != first["a"]["crc32"]
