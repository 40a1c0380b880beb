"""Grouped GEMM cases (torch._scaled_grouped_mm): group sizes and offsets, operand shapes, the
per-group float64 reference against hand-computed examples, and a matrix run on this CPU."""

import pytest
import torch
from case_factory import case_record

from matrices import IN_PROCESS, matrix_text
from pytest_scaledmm.matrix import kernels as K
from pytest_scaledmm.matrix.case_params import case_id
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.draw import CaseInputs, expected_shape, make_inputs
from pytest_scaledmm.verdict.grouped import group_sizes, offsets
from pytest_scaledmm.verdict.reference import reference

F8 = torch.float8_e4m3fn


def params(layout, sizes="even", groups=2, m=16, k=32, n=16):
    return case_record(
        kernel="scaled_grouped_mm",
        scale_a="rowwise",
        scale_b="rowwise",
        mode="aot_eager",
        group_layout=layout,
        group_sizes=sizes,
        groups=groups,
        m=m,
        k=k,
        n=n,
    )


# -- group sizes, offsets and shapes ----------------------------------------------------------------


@pytest.mark.parametrize("layout", ["2d3d", "2d2d"])
@pytest.mark.parametrize("sizes", ["even", "jagged", "empty"])
@pytest.mark.parametrize("groups", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("share", [16, 32, 48, 128])
def test_group_sizes_are_aligned_and_cover_the_grouped_dim(layout, sizes, groups, share):
    p = params(layout, sizes, groups, m=share, k=share)
    found = group_sizes(p)
    assert len(found) == groups
    assert sum(found) == groups * share
    assert all(size % 16 == 0 and size >= 0 for size in found)
    ends = offsets(found)
    assert ends == sorted(ends) and ends[-1] == groups * share
    if sizes == "even":
        assert found == [share] * groups
    if sizes == "empty" and groups > 1:
        assert found[1] == 0 and found[0] == 2 * share
    if sizes == "jagged" and groups > 1:
        assert found[0] < share < found[1]


def test_three_d_groups_are_always_even():
    assert group_sizes(params("3d3d", "empty", 4)) == [16] * 4


@pytest.mark.parametrize(
    "layout,a_shape,b_shape,sa_shape,sb_shape,out_shape,offs",
    [
        ("2d3d", (64, 32), (4, 32, 16), (64,), (4, 16), (64, 16), [32, 32, 64, 64]),
        ("3d3d", (4, 16, 32), (4, 32, 16), (4, 16), (4, 16), (4, 16, 16), None),
        ("2d2d", (16, 128), (128, 16), (64,), (64,), (4, 16, 16), [64, 64, 128, 128]),
    ],
)
def test_operands_offsets_and_output_shape(layout, a_shape, b_shape, sa_shape, sb_shape, out_shape, offs):
    p = params(layout, "empty", 4)
    inputs = make_inputs(p, 7, "cpu")
    assert tuple(inputs.a.shape) == a_shape and inputs.a.dtype == F8
    assert tuple(inputs.b.shape) == b_shape and inputs.b.stride()[-2] == 1  # column-major in its last two dims
    assert tuple(inputs.scale_a.shape) == sa_shape and tuple(inputs.scale_b.shape) == sb_shape
    assert expected_shape(p) == out_shape == tuple(reference(p, inputs).value.shape)
    if offs is None:
        assert "offs" not in inputs.extras
    else:
        assert inputs.extras["offs"].dtype == torch.int32 and inputs.extras["offs"].tolist() == offs
        assert len(inputs.args()) == 6  # offs after bias: passed to the kernel by keyword


def test_grouped_axes_are_in_the_case_id():
    cid = case_id(params("2d2d", "jagged", 4))
    assert "-2d2dg4-jagged-" in cid
    assert case_id(params("2d2d", "jagged", 4)) != case_id(params("2d2d", "empty", 4))


# -- the per-group reference against hand-computed values -------------------------------------------


def exact(values, dtype=F8):
    """Small integers, exact in e4m3."""
    return torch.tensor(values, dtype=torch.float32).to(dtype)


def grouped_inputs(a, b, scale_a, scale_b, offs=None):
    extras = {} if offs is None else {"offs": torch.tensor(offs, dtype=torch.int32)}
    return CaseInputs(a, b, torch.tensor(scale_a), torch.tensor(scale_b), None, torch.bfloat16, False, None, extras)


def test_reference_2d3d_rows_of_each_group_with_an_empty_group():
    # G = 2, groups of 32 and 0 rows ("empty"): only rows 0-31 exist, all of group 0.
    p = params("2d3d", "empty", 2, m=16, k=2, n=2)
    a = exact([[1, 2]] * 32)
    b = torch.stack([exact([[1, 0], [0, 1]]), exact([[5, 5], [5, 5]])]).transpose(-2, -1).contiguous().transpose(-2, -1)
    inputs = grouped_inputs(a, b, [2.0] * 32, [[1.0, 3.0], [7.0, 7.0]], offs=[32, 32])
    ref = reference(p, inputs)
    # Row (1, 2) * 2 @ identity * [1, 3] = (2, 12) for every row; group 1's b is never used.
    assert torch.equal(ref.value, torch.tensor([[2.0, 12.0]] * 32, dtype=torch.float64))
    assert ref.bound["group_sizes"] == [32, 0]


def test_reference_3d3d_each_group_its_own_operands():
    p = params("3d3d", groups=2, m=1, k=2, n=1)
    a = exact([[[1, 2]], [[3, 4]]])
    b = exact([[[1], [1]], [[2], [-1]]])
    inputs = grouped_inputs(a, b, [[1.0], [0.5]], [[2.0], [4.0]])
    ref = reference(p, inputs)
    # g0: (1 + 2) * 1 * 2 = 6; g1: (3*2 - 4) * 0.5 * 4 = 4
    assert torch.equal(ref.value, torch.tensor([[[6.0]], [[4.0]]], dtype=torch.float64))


def test_reference_2d2d_sums_each_group_over_its_own_k_and_an_empty_k_gives_zeros():
    # K groups of 2 and 0 columns: group 0 sums K[0:2], group 1 nothing (exact zeros).
    p = params("2d2d", "empty", 2, m=1, k=1, n=1)
    a = exact([[1, 3]])
    b = exact([[2], [5]])
    group_sizes_here = [2, 0]
    inputs = grouped_inputs(a, b, [1.0, 9.0], [0.5, 9.0], offs=offsets(group_sizes_here))
    p = p.with_values(k=1)
    # Sizes come from the case: override to the hand-made split.
    import pytest_scaledmm.verdict.grouped as grouped

    original = grouped.group_sizes
    grouped.group_sizes = lambda _: group_sizes_here
    try:
        ref = reference(p, inputs)
    finally:
        grouped.group_sizes = original
    # g0: (1*2 + 3*5) * 1 * 0.5 = 8.5; g1: an empty sum
    assert torch.equal(ref.value, torch.tensor([[[8.5]], [[0.0]]], dtype=torch.float64))
    assert ref.tolerance[1].item() == torch.finfo(torch.bfloat16).tiny  # held to exactly zero


def test_reference_catches_a_kernel_that_mixes_up_groups():
    from pytest_scaledmm.verdict.reference import compare

    p = params("2d3d", "jagged", 4, m=32, k=64, n=16)
    inputs = make_inputs(p, 3, "cpu")
    ref = reference(p, inputs)
    right = ref.value.to(torch.bfloat16)
    assert compare(right, ref, expected_shape(p), torch.bfloat16)["ok"]
    # Group 1's rows computed with group 0's b: far outside the bound.
    a = inputs.a.double() * inputs.scale_a.double()[:, None]
    b0 = inputs.b[0].double() * inputs.scale_b[0].double()[None, :]
    wrong = ref.value.clone()
    start, end = offsets(group_sizes(p))[0], offsets(group_sizes(p))[1]
    wrong[start:end] = a[start:end] @ b0
    assert not compare(wrong.to(torch.bfloat16), ref, expected_shape(p), torch.bfloat16)["ok"]


def test_grouped_kernel_passes_offs_by_keyword(monkeypatch):
    seen = {}

    def fake(a, b, scale_a, scale_b, **kwargs):
        seen.update(kwargs)
        return torch.zeros(1)

    monkeypatch.setattr(torch, "_scaled_grouped_mm", fake)
    offs = torch.tensor([16, 32], dtype=torch.int32)
    K.scaled_grouped_mm(None, None, None, None, out_dtype=torch.bfloat16, offs=offs)
    assert seen["offs"] is offs and seen["out_dtype"] is torch.bfloat16


# -- a matrix run on this CPU -----------------------------------------------------------------------


GROUPED_AXES = {
    "scale_a": ["rowwise"],
    "scale_b": ["rowwise"],
    "mode": ["aot_eager", "inductor"],
    "m": [16],
    "k": [32],
    "n": [16],
    "group_layout": ["2d3d", "3d3d", "2d2d"],
    "group_sizes": ["even", "empty"],
    "groups": [2],
}


def test_grouped_kernel_on_this_cpu_is_a_documented_boundary(matrix_project):
    matrix_project.write_matrix(
        matrix_text(
            ["scaled_grouped_mm"], GROUPED_AXES, cases=12, exclude=[{"group_layout": "3d3d", "group_sizes": "empty"}]
        )
    )
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    report = matrix_project.report()
    cases = report["cases"]
    assert cases, "no grouped case ran"
    for case in cases:
        assert case["params"]["kernel"] == "scaled_grouped_mm"
        assert case["params"]["purpose"] == "boundary" and case["params"]["expected_refusal"] == "backend"
        # torch 2.13 has no CPU kernel: refused alike eagerly and compiled, a documented refusal.
        assert case["outcome"] == oc.UNSUPPORTED, case
        assert "_scaled_grouped_mm" in case["signature"] and "documented refusal" in case["detail"]
        assert case["model"]["mismatch"] is False
    assert {c["params"]["group_layout"] for c in cases} <= {"2d3d", "3d3d", "2d2d"}
    assert result.ret == 0
