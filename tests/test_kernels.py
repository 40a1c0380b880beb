"""Built-in kernels, the layout axes of the inputs, special-value parity, and user kernels
declared through the pytest_scaledmm_kernels hook."""

import math
import textwrap
from pathlib import Path

import pytest
import torch
from case_factory import case_params, case_record
from direct_run import run_matrix

from matrices import IN_PROCESS, matrix_text, synthetic
from pytest_scaledmm.matrix import kernels as K
from pytest_scaledmm.matrix.spec import KernelSpec
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import expected_shape, lay_out, make_inputs
from pytest_scaledmm.verdict.reference import parity


def matrix(kernels, axes, cases=200, **extra) -> str:
    """A matrix of the built-ins on the synthetic slice (the production axes at their neutral
    value): these tests judge each kernel on the inputs they list, not on the drawn space."""
    base = synthetic({"mode": ["aot_eager"], "m": [4], "k": [32], "n": [16]})
    return matrix_text(kernels, axes, cases=cases, base=base, **extra)


def failures(results):
    return [(case.id, r.outcome, r.signature) for case, r in results if r.outcome != oc.PASS]


# -- inputs: layouts, ranks, special values -------------------------------------------------------


@pytest.mark.parametrize("shape,transpose", [((8, 1), False), ((1, 16), False), ((2, 8), True), ((1,), False)])
def test_layouts_keep_values_and_change_memory(shape, transpose):
    base = torch.rand(*shape[::-1]).t() if transpose else torch.rand(*shape)
    strided, offset, expanded = (lay_out(base, name) for name in ("noncontiguous", "offset", "expanded"))
    for view in (strided, offset):
        assert view.shape == base.shape and torch.equal(view, base)
    assert strided.stride() == tuple(2 * s for s in base.stride())
    assert offset.stride() == base.stride() and offset.storage_offset() > 0
    assert all(s == 0 for s in expanded.stride()) and torch.equal(expanded, base.reshape(-1)[0].expand(shape))
    if base.numel() > 1:
        assert not strided.is_contiguous()
    # What lies outside the view is NaN, so a kernel that reads it cannot pass by luck.
    storage = torch.tensor([], dtype=base.dtype).set_(offset.untyped_storage())
    assert torch.isnan(storage[: offset.storage_offset()]).all()


def test_zero_dim_scale_layouts():
    scale = torch.tensor(3.0)
    assert lay_out(scale, "expanded").dim() == 0
    off = lay_out(scale, "offset")
    assert off.storage_offset() == 1 and off.item() == 3.0


@pytest.mark.parametrize("m,shape", [(4, (2, 2, 16)), (5, (1, 5, 16)), (1, (1, 1, 16))])
def test_three_d_activation_rule(m, shape):
    params = case_record(m=m, k=32, n=16, activation_rank=3)
    assert expected_shape(params) == shape
    assert expected_shape(params.with_values(activation_rank=2)) == (m, 16)


BASE = case_params(kernel="correct", scale_a="rowwise", scale_b="tensor_1d", mode="aot_eager", m=4)


def _params(**overrides):
    return CaseParams.from_json({**BASE, **overrides})


@pytest.mark.parametrize(
    "special,check",
    [
        ("zero", lambda v, f: v == 0),
        ("negative", lambda v, f: v == -f),
        ("inf", lambda v, f: v == math.inf),
        ("nan", lambda v, f: math.isnan(v)),
    ],
)
def test_special_value_goes_into_first_element_of_scale_a(special, check):
    inputs = make_inputs(_params(special_scale=special, scale_layout="noncontiguous"), 7, "cpu")
    first, finite = inputs.scale_a[0, 0].item(), inputs.finite_scale_a[0, 0].item()
    assert check(first, finite) and math.isfinite(finite)
    assert torch.equal(inputs.scale_a[1:], inputs.finite_scale_a[1:])
    assert not inputs.scale_a.is_contiguous()


def test_bias_is_on_the_scale_of_the_output():
    inputs = make_inputs(_params(bias=True), 3, "cpu")
    out = (inputs.a.float() * inputs.scale_a) @ (inputs.b.float() * inputs.scale_b)
    assert inputs.bias.float().abs().mean() > 0.1 * out.abs().mean()


def test_parity_compares_positions_of_nan_and_inf():
    tol = torch.full((2, 2), 1e-3, dtype=torch.float64)
    eager = torch.tensor([[math.nan, 1.0], [math.inf, 2.0]])
    assert parity(eager, eager.clone(), tol, (2, 2), torch.float32)["ok"]
    moved = torch.tensor([[1.0, math.nan], [math.inf, 2.0]])
    assert parity(eager, moved, tol, (2, 2), torch.float32)["problem"] == "NaN positions differ from eager"
    flipped = torch.tensor([[math.nan, 1.0], [-math.inf, 2.0]])
    assert parity(eager, flipped, tol, (2, 2), torch.float32)["problem"] == "infinities differ from eager"
    off = torch.tensor([[math.nan, 1.5], [math.inf, 2.0]])
    assert parity(eager, off, tol, (2, 2), torch.float32)["problem"] == "finite values differ from eager"
    assert parity(eager, off, tol, (4,), torch.float32)["problem"].startswith("shape")


@pytest.mark.slow
def test_correct_kernel_passes_every_layout_rank_and_special_value():
    axes = {
        "scale_a": ["tensor_0d", "tensor_1d", "tensor_1x1", "rowwise"],
        "scale_b": ["tensor_0d", "tensor_1d", "rowwise"],
        "scale_layout": ["contiguous", "noncontiguous", "offset", "expanded"],
        "activation_rank": [2, 3],
        "special_scale": ["none", "zero", "negative", "inf", "nan"],
        "bias": [False, True],
        "m": [1, 4, 5],
    }
    results = run_matrix(matrix([{"name": "correct", "impl": "planted_kernels:correct"}], axes, cases=40))
    assert len(results) >= 40  # the budget, and the guaranteed values past it
    assert failures(results) == []
    seen = {(c.params.scale_layout, c.params.activation_rank, c.params.special_scale) for c, _ in results}
    assert {s for _, _, s in seen} == set(axes["special_scale"]) and {layout for layout, _, _ in seen} == set(
        axes["scale_layout"]
    )


# -- built-in kernels ----------------------------------------------------------------------------


@pytest.mark.slow
def test_fp8_builtins_pass_on_this_cpu(cpu_fp8_mm):
    """Matched scale pairs, 2-D and 3-D, M = 1 and odd M, with bias: the built-ins agree with the
    float64 reference eager and compiled (each within what it accepts)."""
    text = matrix(
        ["aten_scaled_mm", "scaled_mm_v2", "fp8_linear", "fp8_linear_no_lift"],
        {
            "scale_a": ["tensor_0d", "tensor_1d", "rowwise"],
            "scale_b": ["tensor_0d", "tensor_1d", "rowwise"],
            "bias": [False, True],
            "m": [1, 17],
            "k": [32],
            "n": [16],
        },
        cases=40,
        exclude=[
            {"scale_a": ["tensor_0d", "tensor_1d"], "scale_b": "rowwise"},
            {"scale_a": "rowwise", "scale_b": ["tensor_0d", "tensor_1d"]},
        ],
    )
    results = run_matrix(text)
    assert {c.params.kernel for c, _ in results} == {
        "aten_scaled_mm",
        "scaled_mm_v2",
        "fp8_linear",
        "fp8_linear_no_lift",
    }
    allowed_skip = {"scaled_mm_v2"} if K.unavailable_reason(KernelSpec("scaled_mm_v2", family="fp8")) else set()
    bad = [
        (c.id, r.outcome, r.signature)
        for c, r in results
        if r.outcome != oc.PASS and c.params.kernel not in allowed_skip
    ]
    assert bad == []


@pytest.mark.slow
def test_fp8_linear_wrapper_on_three_d_tokens(cpu_fp8_mm):
    text = matrix(
        ["fp8_linear", "fp8_linear_no_lift"],
        {"activation_rank": [3], "m": [1, 6], "scale_a": ["tensor_0d"], "scale_b": ["tensor_1d"]},
    )
    results = run_matrix(text)
    assert sorted((c.params.kernel, c.params.m) for c, _ in results) == [
        (k, m) for k in ("fp8_linear", "fp8_linear_no_lift") for m in (1, 6)
    ]
    assert failures(results) == []  # a refusal of the 3-D tokens is a failure here, not a skip


def test_fp8_linear_lifts_zero_dim_scales_and_no_lift_does_not(monkeypatch):
    seen = []

    def fake_scaled_mm(a, b, *, scale_a, scale_b, bias, out_dtype, use_fast_accum):
        seen.append((scale_a.dim(), scale_b.dim(), a.shape[0]))
        return torch.zeros(a.shape[0], b.shape[1], dtype=out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", fake_scaled_mm)
    a, b = torch.zeros(2, 3, 32), torch.zeros(32, 16)
    out = K.fp8_linear(a, b, torch.tensor(1.0), torch.ones(1), out_dtype=torch.bfloat16)
    K.fp8_linear_no_lift(a, b, torch.tensor(1.0), torch.ones(1), out_dtype=torch.bfloat16)
    assert seen == [(1, 1, K.TOKEN_PADDING), (0, 1, K.TOKEN_PADDING)]  # 6 tokens padded to 17
    assert out.shape == (2, 3, 16)


@pytest.mark.skipif(K._scaling_type() is None, reason="no scaled_mm_v2 recipes in this torch")
def test_scaled_mm_v2_recipes_follow_scale_shapes():
    recipe = K._scaling_type()
    m, k, n = 8, 256, 384
    tw, rw = recipe.TensorWise, recipe.RowWise
    cases = [
        (torch.ones(()), torch.ones(1, 1), m, (tw, tw)),
        (torch.ones(m, 1), torch.ones(1, n), m, (rw, rw)),
        (torch.ones(1, 1), torch.ones(1, n), 1, (rw, rw)),  # rowwise at M = 1 is one element
        (torch.ones(()), torch.ones(1, n), m, (tw, rw)),  # mixed: the op decides
        (torch.ones(m, 2), torch.ones(2, 3), m, (recipe.BlockWise1x128, recipe.BlockWise128x128)),
    ]
    for scale_a, scale_b, rows, want in cases:
        assert K.scale_recipes(scale_a, scale_b, rows, k, n) == want


def test_builtin_kernel_needing_newer_torch_is_skipped_at_run_time_only(monkeypatch):
    text = matrix([{"name": "scaled_mm_v2", "min_torch": "99.0"}, "aten_scaled_mm"], {}, cases=2)
    results = run_matrix(text)
    assert {c.params.kernel for c, _ in results} == {"scaled_mm_v2", "aten_scaled_mm"}  # both collected
    too_new = [outcome for case, outcome in results if case.params.kernel == "scaled_mm_v2"]
    assert too_new and all(o.outcome == oc.SKIPPED and "needs torch>=99.0" in o.detail for o in too_new)
    assert all(o.outcome != oc.SKIPPED for case, o in results if case.params.kernel == "aten_scaled_mm")
    monkeypatch.setattr(K, "_scaling_type", lambda: None)
    assert "has no torch.nn.functional.scaled_mm" in K.unavailable_reason(
        KernelSpec("scaled_mm_v2_functional", family="fp8")
    )


def test_custom_op_detection():
    import planted_kernels

    assert K.custom_op(planted_kernels.correct_custom_op) is not None
    assert K.custom_op(torch.ops.planted.correct) is not None
    assert K.custom_op(planted_kernels.correct) is None
    assert K.custom_op(planted_kernels.asserts_0d_x_1d_under_compile) is None  # a wrapper hides its op


# -- user kernels through the hook ---------------------------------------------------------------

HOOK_CONFTEST = """
import sys

sys.path.insert(0, TESTS_DIR)  # xdist workers do not inherit pytester's sys.path

import planted_kernels
from pytest_scaledmm.matrix.kernels import Kernel
from pytest_scaledmm.verdict.case_axes import CaseParams


def pytest_scaledmm_kernels(config):
    return [
        Kernel("my_linear", planted_kernels.correct, scale_forms=["tensor_0d", "tensor_1d", "rowwise"]),
        {"name": "my_custom_op", "fn": planted_kernels.correct_custom_op, "archs": ["cpu", "sm90"]},
        Kernel("my_hopper_kernel", planted_kernels.correct, archs=["sm90"], min_torch="2.5"),
    ]
"""


def hook_project(matrix_project, conftest=HOOK_CONFTEST):
    conftest = conftest.replace("TESTS_DIR", repr(str(Path(__file__).parent)))
    matrix_project.write_matrix(
        matrix(
            [{"name": "my_linear", "scale_forms": ["tensor_0d", "tensor_1d"]}],
            {"scale_a": ["tensor_0d", "rowwise"], "scale_b": ["tensor_1d", "rowwise"]},
            cases=8,
        )
    )
    (matrix_project.path / "conftest.py").write_text(textwrap.dedent(conftest))


def test_hook_kernels_join_the_matrix(matrix_project):
    hook_project(matrix_project)
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    cases = matrix_project.report()["cases"]
    by_kernel = {}
    for case in cases:
        by_kernel.setdefault(case["params"]["kernel"], []).append(case)
    assert sorted(by_kernel) == ["my_custom_op", "my_hopper_kernel", "my_linear"]
    # The matrix narrowed my_linear to tensorwise scales; the declaration allowed rowwise too.
    assert {c["params"]["scale_a"] for c in by_kernel["my_linear"]} == {"tensor_0d"}
    assert {c["outcome"] for c in by_kernel["my_linear"] + by_kernel["my_custom_op"]} == {oc.PASS}
    assert all(c["extra"]["opcheck"]["error"] is None for c in by_kernel["my_custom_op"])
    # archs are decided at run time: collected here, skipped on this CPU.
    assert {c["outcome"] for c in by_kernel["my_hopper_kernel"]} == {oc.SKIPPED}
    assert result.ret == 0


@pytest.mark.parametrize(
    "conftest,message",
    [
        (
            "def pytest_scaledmm_kernels(config):\n    return [{'name': 'k', 'fn': print, 'scale_forms': ['diagonal']}]\n",
            "pytest_scaledmm_kernels in *conftest.py: key '[[]0[]].scale_forms[[]0[]]': 'diagonal' is not one of*",
        ),
        (
            "def pytest_scaledmm_kernels(config):\n    return [{'name': 'aten_scaled_mm', 'fn': print}]\n",
            "*'aten_scaled_mm' is a built-in kernel*",
        ),
        (
            "def pytest_scaledmm_kernels(config):\n    return [{'name': 'k', 'fn': 3}]\n",
            "*key '[[]0[]].fn': 3 is not callable*",
        ),
        (
            "def pytest_scaledmm_kernels(config):\n    return {'name': 'k'}\n",
            "*must return a list of kernels, got dict*",
        ),
        (
            # A declaration after fn given by position (family, here) is refused, never read as another.
            "from pytest_scaledmm import Kernel\n\n"
            "def pytest_scaledmm_kernels(config):\n    return [Kernel('k', print, 'int8')]\n",
            "pytest_scaledmm_kernels in *conftest.py: raised TypeError: *positional arguments*(at *conftest.py:4)",
        ),
        (
            # The line named is the hook's own call, not the library frame beneath it; one line.
            "import json\n\ndef pytest_scaledmm_kernels(config):\n    return json.loads('{bad')\n",
            "pytest_scaledmm_kernels in *conftest.py: raised JSONDecodeError: *(at *conftest.py:4)",
        ),
        (
            "def pytest_scaledmm_kernels(config):\n    raise ValueError('first line\\nsecond line')\n",
            "pytest_scaledmm_kernels in *conftest.py: raised ValueError: first line / second line (at *conftest.py:2)",
        ),
        (
            "from pytest_scaledmm import Kernel\n\ndef pytest_scaledmm_kernels(config):\n    return [Kernel]\n",
            "pytest_scaledmm_kernels in *conftest.py: key '[[]0[]]': not a Kernel or dict: <class *Kernel'>",
        ),
        (
            "from pytest_scaledmm import Kernel\n\n"
            "def pytest_scaledmm_kernels(config):\n    return [Kernel(None, print)]\n",
            "pytest_scaledmm_kernels in *conftest.py: key '[[]0[]].name': None is not of type 'string'",
        ),
    ],
    ids=[
        "bad-scale-form",
        "builtin-name",
        "not-callable",
        "not-a-list",
        "positional-declaration",
        "library-raises",
        "multi-line-message",
        "the-class",
        "name-none",
    ],
)
def test_bad_hook_declaration_is_a_usage_error(matrix_project, conftest, message):
    hook_project(matrix_project, conftest)
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", *IN_PROCESS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert len([line for line in result.stderr.lines if line.strip()]) == 1, result.stderr.lines
    assert "Traceback" not in result.stderr.str()


def test_a_hook_that_calls_pytest_exit_ends_the_run_as_it_asked(matrix_project):
    hook_project(
        matrix_project,
        "import pytest\n\ndef pytest_scaledmm_kernels(config):\n    pytest.exit('no GPU here', returncode=0)\n",
    )
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", *IN_PROCESS)
    assert result.ret == 0
    assert "no GPU here" in result.stderr.str() + result.stdout.str()
    assert "usage error" not in result.stderr.str().lower() and "ERROR:" not in result.stderr.str()


@pytest.mark.slow
def test_hook_kernels_collect_identically_under_xdist(matrix_project):
    """xdist refuses to run when its workers collect differently; the run's cases are the ones a
    plain collection lists."""
    pytest.importorskip("xdist")
    hook_project(matrix_project)
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--collect-only", "-q")
    plain = sorted(line for line in result.outlines if "::" in line)
    assert plain
    result = matrix_project.run(
        "--scaledmm-matrix", "matrix.yaml", "-n", "2", "--scaledmm-report", "report.json", *IN_PROCESS
    )
    assert result.ret == 0
    assert sorted(f"matrix.yaml::{c['id']}" for c in matrix_project.report()["cases"]) == plain


@pytest.mark.slow
def test_fp8_scaled_mm_rank_pair_runs_on_this_cpu(matrix_project, cpu_fp8_mm):
    matrix_project.write_matrix(matrix_text(["aten_scaled_mm"], {"mode": ["inductor"], "m": [17]}, cases=1))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    (case,) = matrix_project.report()["cases"]
    assert case["id"].startswith("fp8e4m3-s0d_x_s1d-m17k32n16-bf16-inductor-")
    # Measured on torch 2.13 CPU: both paths agree with the reference for this pairing.
    assert case["outcome"] == "PASS", case
    result.assert_outcomes(passed=1)
