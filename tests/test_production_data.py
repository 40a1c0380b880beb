"""Production data: value regimes, special values on either side, operand layouts, the serving
loop's second call, N of several blocks. Kernels right on synthetic data and wrong on such data
(tests/planted_production_kernels.py) are each caught by the shipped default profile at 30 cases
a kernel (its compile modes those that build no code: the bugs are in the values), beside
torch._scaled_mm, which fails none."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from torch_facts import cpu_scaled_mm_leaves_empty_k_unwritten

from matrices import WITHOUT_M65536
from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.spec import parse_spec
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.reference import reference
from pytest_scaledmm.verdict.regimes import QMAX

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
FP8_FORMS = ["tensor_0d", "tensor_1d", "tensor_1x1", "rowwise", "blockwise"]
PLANTED = [
    "clamps_at_fnuz_max",
    "exponent_15_is_nan",
    "clamps_output_to_fp16_range",
    "flushes_tiny_scales",
    "ignores_scale_b_sign",
    "nan_for_pruned_channel",
    "one_output_buffer",
    "reads_a_with_pitch_k",
    "first_column_block_of_scale_b",
    "nan_for_zero_scale_a",
    "ignores_scale_a_sign",
]
CASES_PER_KERNEL = 30
# Inductor's CPU code generation costs seconds a case and finds none of these bugs.
MODES = ["eager", "aot_eager"]


def shipped_default_matrix(
    kernels: list, cases_per_kernel: int, modes: list | None = None, limits: dict | None = None
) -> str:
    """The shipped matrix with its default profile's axes (its compile modes `modes` where given),
    these kernels, and a budget of `cases_per_kernel` each; `limits` where given."""
    shipped = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    default = shipped["profiles"]["default"]
    document = {
        "version": 1,
        "seed": shipped["seed"],
        "kernels": kernels,
        "axes": shipped["axes"],
        "exclude": shipped["exclude"],
        "profiles": {"default": {"cases": cases_per_kernel * len(kernels), "axes": default["axes"]}},
    }
    if modes is not None:
        document["profiles"]["default"]["axes"] = {**default["axes"], "mode": modes}
    if limits is not None:
        document["limits"] = limits
    return yaml.safe_dump(document, sort_keys=False)


def planted_entries() -> list:
    return [
        {
            "name": name,
            "impl": f"planted_production_kernels:{name}",
            "scale_forms": FP8_FORMS,
            "dtypes": ["e4m3fn", "e5m2"],
        }
        for name in PLANTED
    ]


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    """One run of the shipped default profile over the planted kernels and the control, -n 2; the
    M = 65536 extreme shape kept out (no production-data class; seconds a call on the CPU)."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("planted-production")
    for module in ("planted_production_kernels.py", "planted_kernels.py"):
        shutil.copy(TESTS / module, folder)
    (folder / "matrix.yaml").write_text(
        shipped_default_matrix(["aten_scaled_mm", *planted_entries()], CASES_PER_KERNEL, MODES, WITHOUT_M65536)
    )
    report = folder / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--scaledmm-matrix",
            "matrix.yaml",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            "--scaledmm-report",
            str(report),
            "--no-scaledmm-triage",
            "-q",
            "--no-header",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(report.read_text()), done.stdout


@pytest.mark.slow
def test_every_planted_production_bug_is_caught_and_the_control_fails_none(planted_run):
    report, stdout = planted_run
    assert report["session"]["complete"], report["session"]["incomplete_reasons"]
    by_kernel: dict = {}
    for record in report["cases"]:
        by_kernel.setdefault(record["params"]["kernel"], []).append(record)
    for name in PLANTED:
        records = by_kernel[name]
        assert len(records) >= 20, (name, len(records))
        caught = [r for r in records if r["outcome"] == "MISMATCH"]
        assert caught, (name, sorted({r["outcome"] for r in records}))
    control = by_kernel["aten_scaled_mm"]

    def accepted(record):
        # Refusals the op documents, and torch's own defects the production space reaches: Inductor
        # on the CPU refuses a row-major b that eager takes (torch 2.13, "mat_b must be col_major");
        # an fp8 output with scale_result comes out divided by it (pytorch#190449).
        if record["outcome"] in ("PASS", "UNSUPPORTED", "BOUNDARY_PARITY"):
            return True
        if record["outcome"] == "COMPILE_ONLY_ERROR":
            return (
                record["params"].get("operand_layout") == "b_row_major"
                and "mat_b must be col_major" in record["signature"]
            )
        if record["outcome"] == "MISMATCH" and record["params"].get("k") == 0:
            # torch._scaled_mm on the CPU leaves its output unwritten at K = 0 where this torch does.
            return cpu_scaled_mm_leaves_empty_k_unwritten()
        return (
            record["outcome"] == "MISMATCH"
            and record["params"].get("scale_result", "none") != "none"
            and record["signature"].endswith("values off the reference by one constant factor")
        )

    assert all(accepted(r) for r in control), [
        (r["id"], r["outcome"], r.get("signature")) for r in control if not accepted(r)
    ]
    assert sum(r["outcome"] == "PASS" for r in control) >= len(control) // 2


@pytest.mark.slow
def test_each_bug_is_caught_where_production_data_shows_it(planted_run):
    report, _ = planted_run
    records = [r for r in report["cases"] if r["outcome"] == "MISMATCH"]

    def caught(kernel, where):
        return [r for r in records if r["params"]["kernel"] == kernel and where(CaseParams.from_json(r["params"]), r)]

    # The value regimes, the special side, the layouts, the second call and N of several blocks.
    assert caught("clamps_at_fnuz_max", lambda p, r: p.value_regime == "full_range")
    assert caught("exponent_15_is_nan", lambda p, r: p.value_regime == "full_range")
    assert caught("clamps_output_to_fp16_range", lambda p, r: p.value_regime == "near_limit")
    assert caught("flushes_tiny_scales", lambda p, r: p.value_regime == "real_scales")
    assert caught("ignores_scale_b_sign", lambda p, r: p.special_side == "b")
    assert caught("nan_for_pruned_channel", lambda p, r: p.special_side == "b" and p.special_scale == "zero")
    assert caught("one_output_buffer", lambda p, r: "previous call's output" in (r.get("signature") or ""))
    assert caught("reads_a_with_pitch_k", lambda p, r: p.operand_layout in ("a_padded", "a_offset"))
    assert caught("first_column_block_of_scale_b", lambda p, r: p.scale_b == "blockwise" and p.n > 128)


@pytest.mark.slow
def test_the_coverage_block_and_summary_count_production_data(planted_run):
    report, stdout = planted_run
    production = report["coverage"]["production"]
    assert set(production["value_regime"]) == {"standard", "full_range", "real_scales", "near_limit", "cancelling"}
    assert {"dense", "a_padded", "a_offset", "b_row_major", "b_padded"} <= set(production["operand_layout"])
    assert set(production["special_side"]) == {"a", "b"}
    assert all(c["reference_checked"] > 0 for c in production["value_regime"].values())
    assert "production data (run/reference-checked): value regimes " in stdout
    assert "special side a " in stdout and ", b " in stdout


def _default_cases(kernels=("aten_scaled_mm", "int8_w8a8")):
    spec = parse_spec(ROOT / "matrix.yaml", (ROOT / "matrix.yaml").read_text())
    return generate_cases(spec, spec.profile("default"))[0]


def test_full_range_operands_reach_the_dtype_maximum_with_exact_references():
    import torch

    seen = set()
    for case in _default_cases():
        params = case.params
        if params.value_regime != "full_range" or params.purpose != "valid" or not params.m * params.k:
            continue
        inputs = make_inputs(params, 7, "cpu")
        values = inputs.a.float()
        if params.dtype_a == "int8":
            # Symmetric at 127 on the amax's side, -128 reached as clipped schemes do.
            assert values.min().item() == -128 and bool((values.abs() == 127).any()), case.id
        else:
            assert values.abs().max().item() == QMAX[params.dtype_a], case.id
        seen.add(params.dtype_a)
        ref = reference(params, inputs)
        assert torch.isfinite(ref.value).all() and (ref.tolerance > 0).all()
    assert {"int8", "e4m3fn"} <= seen


def test_near_limit_outputs_stay_representable_and_close_to_the_limit():
    import torch

    for case in _default_cases():
        params = case.params
        if (
            params.value_regime != "near_limit"
            or params.out_dtype != "fp16"
            or params.purpose != "valid"
            or not params.m * params.n
        ):
            continue
        ref = reference(params, make_inputs(params, 3, "cpu"))
        peak = ref.value.abs().max().item()
        assert 65504 / 4 < peak + ref.tolerance.max().item() <= 65504, (case.id, peak)
        assert torch.isfinite(ref.value).all()


def test_real_scales_are_tiny_and_large_and_span_decades():
    for case in _default_cases():
        params = case.params
        if params.value_regime != "real_scales" or params.purpose != "valid" or not params.m * params.k * params.n:
            continue
        inputs = make_inputs(params, 5, "cpu")
        assert inputs.scale_b.abs().max().item() < 2**-14, case.id
        assert inputs.scale_a.abs().min().item() > 2**10, case.id
        if inputs.scale_b.numel() > 1 and params.scale_layout != "expanded":  # expanded: one value
            spread = inputs.scale_b.abs().max().item() / inputs.scale_b.abs().min().item()
            assert spread > 100, (case.id, spread)


def test_cancelling_sums_are_near_zero_against_their_terms():
    for case in _default_cases():
        params = case.params
        if (
            params.value_regime != "cancelling"
            or params.bias
            or params.k < 64
            or params.purpose != "valid"
            or not params.m * params.n
        ):
            continue
        from pytest_scaledmm.verdict.reference import bound_terms, dequantised

        terms = bound_terms(*dequantised(params, make_inputs(params, 11, "cpu")))
        ratio = (terms["value"].abs().max() / terms["energy"].max()).item()
        assert ratio < 0.5, (case.id, ratio)


def test_operand_layouts_are_the_same_values_in_other_memory():
    import torch

    for case in _default_cases():
        params = case.params
        layout = params.operand_layout
        if layout == "dense" or params.purpose == "boundary" or not params.m * params.k * params.n:
            continue
        dense = make_inputs(params.with_values(operand_layout="dense"), 1, "cpu")
        laid = make_inputs(params, 1, "cpu")
        # equal_nan: a case with NaN in an operand has it in both layouts.
        for laid_t, dense_t in ((laid.a, dense.a), (laid.b, dense.b)):
            torch.testing.assert_close(laid_t.float(), dense_t.float(), rtol=0, atol=0, equal_nan=True, msg=case.id)
        if layout == "a_padded":
            assert laid.a.stride(-2) > params.k and laid.a.storage_offset() == 0
        elif layout == "a_offset":
            assert laid.a.storage_offset() == params.k
        elif layout == "b_row_major":
            assert laid.b.is_contiguous()
        elif layout == "b_padded":
            assert laid.b.stride() == (1, params.k + 16)
        elif layout == "a_token_stride0":
            assert params.m == 1 and set(laid.a.stride()[:-1]) == {0}


def test_every_kernel_gets_special_cases_on_both_sides_within_its_budget():
    text = shipped_default_matrix(["aten_scaled_mm", *planted_entries()], 20)
    spec = parse_spec(Path("matrix.yaml"), text)
    cases = generate_cases(spec, spec.profile("default"))[0]
    for kernel in ["aten_scaled_mm", *PLANTED]:
        special = [c.params for c in cases if c.params.kernel == kernel and c.params.purpose == "special"]
        sides = {(p.special_scale, p.special_side) for p in special}
        assert {("zero", "b"), ("negative", "a"), ("negative", "b")} <= sides, (kernel, sides)


def test_blockwise_scales_meet_n_of_several_blocks_and_empty_dims_appear():
    text = shipped_default_matrix(["aten_scaled_mm", *planted_entries()], CASES_PER_KERNEL)
    spec = parse_spec(Path("matrix.yaml"), text)
    cases = generate_cases(spec, spec.profile("default"))[0]
    planted = [c.params for c in cases if c.params.kernel == "first_column_block_of_scale_b"]
    assert any(p.scale_b == "blockwise" and p.n > 128 and p.n % 128 == 0 for p in planted)
    shipped = _default_cases()
    assert {dim for p in (c.params for c in shipped) for dim in "mkn" if p.value_of(dim) == 0} == {"m", "k", "n"}
    assert any(c.params.n > 128 and c.params.n % 128 == 0 for c in shipped)
