"""Production data against the kernels it exists to catch: a low-precision accumulator on
cancelling sums, subnormal flushing on full-range operands, a ring of output buffers in a serving
loop; and every case it makes can be written as a repro script."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from case_factory import case_params

from pytest_scaledmm.verdict import reference as reference_module
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import expected_shape, make_inputs
from pytest_scaledmm.verdict.reference import compare, reference

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import planted_production_kernels as planted  # noqa: E402

BASE = case_params(
    scale_a="rowwise",
    scale_b="rowwise",
    out_dtype="fp32",
    scale_layout="contiguous",
    activation_rank=2,
    special_scale="none",
    k=256,
    n=32,
    purpose="valid",
    operand_layout="dense",
    value_regime="standard",
)


PLAIN = {key: value for key, value in BASE.items() if key not in ("operand_layout", "value_regime")}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"value_regime": "cancelling"},
        {"operand_layout": "a_padded"},
        {"special_scale": "zero", "special_side": "b", "purpose": "special"},
        {"m": 0},
    ],
)
def test_scaledmm_repro_accepts_a_case_the_generator_makes(extra):
    """`scaledmm repro` validates a record's params against the corpus schema: it knows the
    production axes and empty dims."""
    from pytest_scaledmm.matrix.schema import DEFAULT_LIMITS
    from pytest_scaledmm.reports.repro import _record_problem

    record = {
        "id": "aten_scaled_mm.e4m3-row_x_row-m16k256n32-fp32-eager-cancel-123abc",
        "outcome": "MISMATCH",
        "signature": "MISMATCH: eager values off the reference",
        "params": {**PLAIN, **extra},
    }
    assert _record_problem(record, dict(DEFAULT_LIMITS)) is None


def _low_precision_accumulation(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False, chunk=32):
    """Dequantise in fp32, sum K in chunks of `chunk`, the running sum kept in bf16."""
    tokens = a.reshape(-1, a.shape[-1])
    m, k = tokens.shape
    n = b.shape[-1]
    left = tokens.float() * planted._expand(scale_a, m, k)
    right = b.float() * planted._expand(scale_b, k, n)
    total = torch.zeros(m, n, dtype=torch.bfloat16)
    for start in range(0, k, chunk):
        total = (total.float() + left[:, start : start + chunk] @ right[start : start + chunk]).to(torch.bfloat16)
    out = total.float() if bias is None else total.float() + bias.float()
    return out.to(out_dtype).reshape(*a.shape[:-1], n)


def _worst_ratio(kernel, params, monkeypatch=None, family=None, seeds=range(3)):
    if family:
        monkeypatch.setattr(reference_module, "accumulator", lambda *a, **k: family)
    worst = 0.0
    for seed in seeds:
        case = make_inputs(params, seed, "cpu")
        ref = reference(params, case)
        out = kernel(case.a, case.b, case.scale_a, case.scale_b, bias=case.bias, out_dtype=case.out_dtype)
        worst = max(worst, compare(out, ref, expected_shape(params), case.out_dtype)["ratio"])
    return worst


def test_cancelling_catches_a_bf16_accumulator_under_the_tensor_core_bound(monkeypatch):
    """Cancelling partners sit half a block apart, so a chunked bf16 running sum holds the large
    terms before they cancel: caught under the tensor-core bound (an H200's), as by standard."""
    params = CaseParams.from_json({**BASE, "k": 1024})
    standard = _worst_ratio(_low_precision_accumulation, params, monkeypatch, "fp8-tensor-core")
    cancelling = _worst_ratio(_low_precision_accumulation, params.with_values(value_regime="cancelling"))
    assert standard > 1.0
    assert cancelling > 1.0, f"cancelling passes a bf16 accumulator (ratio {cancelling:.3g}); standard {standard:.3g}"


def _flushes_subnormal_operands(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    def read(t):
        v = t.to(torch.float32)
        return torch.where(v.abs() < torch.finfo(t.dtype).smallest_normal, torch.zeros_like(v), v)

    return planted._kernel(a, b, scale_a, scale_b, bias, out_dtype, read_a=read, read_b=read)


@pytest.mark.parametrize("out_dtype", ["fp32", "bf16"])
def test_full_range_subnormals_show_a_kernel_that_flushes_them(out_dtype):
    """full_range gives one token of subnormals only: flushing them zeroes its output row."""
    params = CaseParams.from_json(
        {**BASE, "dtype_a": "e5m2", "dtype_b": "e5m2", "out_dtype": out_dtype, "value_regime": "full_range"}
    )
    assert _worst_ratio(_flushes_subnormal_operands, params) > 1.0


RING = '''
import torch
from planted_production_kernels import _kernel
from pytest_scaledmm.verdict.case_axes import CaseParams
_RING = {}
def ring2(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Double-buffered output: one of two preallocated buffers per shape, in turn."""
    out = _kernel(a, b, scale_a, scale_b, bias, out_dtype)
    bufs, turn = _RING.setdefault((tuple(out.shape), out.dtype), ([torch.empty_like(out), torch.empty_like(out)], [0]))
    turn[0] += 1
    return bufs[turn[0] % 2].copy_(out)
'''


def test_a_kernel_with_two_output_buffers_in_turn_fails_the_serving_loop(tmp_path):
    """Two preallocated buffers used in turn: the third call of the serving loop overwrites the
    first output."""
    for module in ("planted_production_kernels.py", "planted_kernels.py"):
        (tmp_path / module).write_text((TESTS / module).read_text())
    (tmp_path / "ring.py").write_text(RING)
    (tmp_path / "matrix.yaml").write_text(
        textwrap.dedent("""\
        version: 1
        seed: 7
        kernels:
          - {name: ring2, impl: "ring:ring2", scale_forms: [tensor_0d], dtypes: [e4m3fn]}
        axes:
          scale_a: [tensor_0d]
          scale_b: [tensor_0d]
          dtype_a: [e4m3fn]
          dtype_b: [e4m3fn]
          out_dtype: [bf16]
          mode: [eager]
          m: [16]
          k: [32]
          n: [16]
        profiles:
          t: {cases: 2}
        """)
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--scaledmm-matrix",
            "matrix.yaml",
            "--scaledmm-profile",
            "t",
            "-n",
            "0",
            "--scaledmm-isolate=no",
            "-p",
            "no:cacheprovider",
            "-q",
            "--no-header",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stdout[-2000:]
