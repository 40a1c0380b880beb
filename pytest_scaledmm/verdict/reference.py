"""The float64 reference of one case, the error bound each output element is held to, and the
check of an output against them (compare) or of the compiled output against the eager one
(parity).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .activation import divisor, dynamic_activation, quantisation_term, requantised_growth
from .case_axes import CaseParams
from .draw import FP8_TORCH_NAMES, CaseInputs, expand_scale, expected_shape, scale_result_of
from .grouped import group_products, group_sizes
from .microscaling import operand_values
from .off_pattern import off_pattern
from .signature_text import (
    FINITE_FROM_EAGER,
    INFINITIES_FROM_EAGER,
    NAN_POSITIONS_FROM_EAGER,
    NONFINITE_POSITIONS,
    WRONG_SIGN_INFINITIES,
)

# The error bound of one output element (see reference()), per element i, j:
#   slack * (c_acc * u_acc * sqrt(min(K, L)) * e_ij + C_EP * U32 * (|dot_ij| + |bias_j|)
#            + C_OUT * u_out * |value_ij|) + tiny
# with e_ij = sqrt((A^2) @ (B^2)) the l2 energy of the K products. A sum of K rounded products
# errs like a random walk, sqrt(K) roundings of partial sums of size ~e; a kernel that promotes
# its partial sums to fp32 every L products errs like sqrt(L). The constants come from real
# outputs: scripts/calibrate_bound.py wrote calibration/*.json, and tests/test_oracle.py checks
# that every recorded correct case still passes them.
U32 = 2.0**-24  # unit roundoff of fp32
OUT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": U32, "e4m3fn": 2.0**-4}
# Accumulator families: unit roundoff u_acc, constant c_acc and promotion length L. c_acc is
# the largest need seen (calibration/*.json: max over elements and shapes of the error left
# after the other terms, in units of u_acc * sqrt(min(K, L)) * e) times a margin of 2.6-2.7.
ACCUMULATORS = {
    # fp32 sums: the CPU (which emulates fp8), int8 after its exact int32 sum, fp32 kernels.
    # Needed 2.94 (the planted kernels' fp32 matmul under Inductor on the CPU, K = 16384; aten
    # ops on the CPU 1.21; int8 on the H200 0).
    "fp32": {"u_acc": U32, "c_acc": 8.0, "promote_every": math.inf},
    # fp8 tensor cores on a GPU keep ~14 bits within a chain of products. Without fast
    # accumulation cuBLAS promotes to fp32 every 128 products of K: on the H200 the error stops
    # growing past K = 128 (needed 1.47, blockwise K = 1024; Inductor's Triton template 0.2).
    "fp8-tensor-core": {"u_acc": 2.0**-13, "c_acc": 4.0, "promote_every": 128},
    # With fast accumulation it grows with K all the way (needed 2.32, cuBLAS rowwise, K = 16384).
    "fp8-tensor-core-fast": {"u_acc": 2.0**-13, "c_acc": 6.0, "promote_every": math.inf},
    # A GPU not calibrated on (not an H200, or ROCm): fewer bits kept, no promotion assumed.
    "fp8-uncalibrated": {"u_acc": 2.0**-11, "c_acc": 8.0, "promote_every": math.inf},
}
C_EP = 8.0  # fp32 roundings of the scale and bias epilogue: 4 counted, a margin of 2
C_OUT = 1.0  # the output dtype's one rounding to nearest
BOUND_MODEL = "sqrt(min(K,L))-energy"


def accumulator(params: CaseParams, device_type: str, calibrated: bool = True) -> str:
    """The accumulator family a case is held to: the CPU, int8 (exact int32 sums, fp32 epilogue)
    and a kernel that declares `accumulation: fp32` sum in fp32; fp8 operands on a GPU otherwise
    sum on tensor cores, fast (unpromoted) where the case asks for fast accumulation or the kernel
    declares it. On a GPU the tensor-core families were not calibrated on, the conservative
    family judges instead."""
    fp8 = params.dtype_a in FP8_TORCH_NAMES or params.dtype_b in FP8_TORCH_NAMES
    declared = params.accumulation
    if device_type == "cpu" or not fp8 or declared == "fp32":
        return "fp32"
    if not calibrated:
        return "fp8-uncalibrated"
    fast = params.use_fast_accum or declared == "fast"
    return "fp8-tensor-core-fast" if fast else "fp8-tensor-core"


# GPUs the tensor-core families were calibrated on (calibration/*.json): the H200 (sm90).
CALIBRATED_CAPABILITIES = ((9, 0),)


def calibrated_device(device: torch.device) -> bool:
    """Whether the tensor-core families were calibrated on this device (CUDA capability)."""

    if device.type != "cuda":
        return True
    if getattr(torch.version, "hip", None):
        return False
    return tuple(torch.cuda.get_device_capability(device)) in CALIBRATED_CAPABILITIES


def dequantised(
    params: CaseParams, inputs: CaseInputs, scale_a: Any = None, scale_b: Any = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(A, B, bias) in float64 on the CPU: A = a * scale_a (M x K, 3-D activations flattened to
    M tokens), B = b * scale_b (K x N), bias (N) or None. `scale_a` / `scale_b` replace the case's."""
    m, k, n = params.m, params.k, params.n
    x = dynamic_activation(params, inputs) if scale_a is None else None
    scale_a = inputs.scale_a if scale_a is None else scale_a
    scale_b = inputs.scale_b if scale_b is None else scale_b
    # A dynamic kernel's reference is of the activation it was given.
    a = (
        x
        if x is not None
        else operand_values(inputs.a).reshape(m, k) * expand_scale(scale_a, params.scale_a, "a", m, k)
    )
    b = operand_values(inputs.b) * expand_scale(scale_b, params.scale_b, "b", k, n)
    bias = None if inputs.bias is None else inputs.bias.detach().to("cpu", torch.float64)
    return a, b, bias


def bound_terms(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The exact float64 product of dequantised operands and the magnitudes its bound is made
    of: value = A @ B + bias, dot = A @ B, energy = sqrt(A^2 @ B^2) (the l2 norm of the K
    products of each element). Works on any device."""
    dot = a @ b
    energy = ((a * a) @ (b * b)).sqrt()
    value = dot if bias is None else dot + bias
    epilogue = dot.abs() if bias is None else dot.abs() + bias.abs()
    return {"value": value, "dot": dot, "energy": energy, "epilogue": epilogue}


def tolerance_of(
    terms: Mapping[str, torch.Tensor],
    k: int,
    family: str,
    u_out: float,
    slack: float,
    tiny: float,
    out_magnitude: torch.Tensor | None = None,
) -> torch.Tensor:
    """The elementwise bound (see the constants at the top of this module). `out_magnitude`
    replaces |value| in the output-rounding term."""
    acc = ACCUMULATORS[family]
    chain = min(k, acc["promote_every"])
    magnitude = terms["value"].abs() if out_magnitude is None else out_magnitude
    return (
        slack
        * (
            acc["c_acc"] * acc["u_acc"] * math.sqrt(chain) * terms["energy"]
            + C_EP * U32 * terms["epilogue"]
            + C_OUT * u_out * magnitude
        )
        + tiny
    )


@dataclass
class Reference:
    value: Any  # float64 M x N; with an inf or nan scale, the IEEE result (non-finite entries)
    tolerance: Any  # float64 M x N, elementwise bound on |out - value| where value is finite
    bound: dict | None = None  # the model and constants the tolerance was built with


def reference(params: CaseParams, inputs: CaseInputs, slack: float = 1.0, scale_a: Any = None) -> Reference:
    """Dequantise in float64: value = (a * scale_a) @ (b * scale_b) + bias, with the case's scales
    (special values included, so zero and negative scales have exact references and inf / nan
    ones their IEEE result). The tolerance is built from the finite scales (inputs.finite_scale_a)
    and, for its output-rounding term, the larger of the finite and the actual |value|. A 3-D
    activation is flattened to M tokens. `scale_a` replaces the case's scale for the value."""
    if params.grouped:
        return _grouped_reference(params, inputs, slack)
    k = params.k
    a, b, bias = dequantised(params, inputs, scale_a)
    value, terms, magnitude = _value_and_terms(params, inputs, scale_a, a, b, bias)
    family = accumulator(params, inputs.a.device.type, calibrated_device(inputs.a.device))
    u_out = OUT_ROUNDOFF[params.out_dtype]
    tiny = torch.finfo(inputs.out_dtype).tiny
    tolerance = tolerance_of(terms, k, family, u_out, slack, tiny, magnitude)
    result_scale = scale_result_of(params) if params.out_dtype in FP8_TORCH_NAMES else None
    if result_scale is not None:
        # A power of two: exact on the value, and every term of the bound scales with it.
        value, magnitude, tolerance = value * result_scale, magnitude * result_scale, tolerance * result_scale
    activation_bound = {}
    x = dynamic_activation(params, inputs)
    if x is not None:
        term, how = quantisation_term(params, torch.where(torch.isfinite(a), a, torch.zeros_like(a)), b)
        if how == "requantised":
            tolerance = tolerance * requantised_growth(params)
        term = term * slack * (1 + 2.0**-6)
        tolerance = tolerance + (term * result_scale if result_scale is not None else term)
        activation_bound = {"activation": how, "activation_divisor": divisor(params)}
    acc = ACCUMULATORS[family]
    rel = tolerance / magnitude
    bound = {
        **activation_bound,
        "model": BOUND_MODEL,
        "accumulator": family,
        "u_acc": acc["u_acc"],
        "c_acc": acc["c_acc"],
        "promote_every": acc["promote_every"],
        "c_ep": C_EP,
        "c_out": C_OUT,
        "u_out": u_out,
        "slack": float(slack),
        **({"scale_result": result_scale} if result_scale is not None else {}),
        # tolerance relative to the largest |value|, and the smallest uniform relative error
        # that this bound catches (the least tol/|value| over the elements)
        "max_tol_rel": float(tolerance.max() / magnitude.max()) if rel.numel() and magnitude.max() > 0 else math.inf,
        "min_tol_rel": float(rel.min()) if rel.numel() else math.inf,
    }
    return Reference(value, tolerance, bound)


def _value_and_terms(
    params: CaseParams, inputs: CaseInputs, scale_a: Any, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None
) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """(value, the bound's terms, the |value| the output rounding is taken of): the IEEE value
    with the case's special values, the terms from the finite elements and scales."""
    finite_a, finite_b = inputs.finite_scale_a, inputs.finite_scale_b
    special = params.special_scale != "none"
    if params.special_operand != "none":
        # A non-finite operand element: the IEEE value, the tolerance from the finite elements.
        value = a @ b if bias is None else a @ b + bias
        finite_a_op, finite_b_op = (torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) for x in (a, b))
        terms = bound_terms(finite_a_op, finite_b_op, bias)
        magnitude = torch.where(
            torch.isfinite(value), torch.maximum(terms["value"].abs(), value.abs()), terms["value"].abs()
        )
    elif not special or (finite_a is None and finite_b is None) or scale_a is finite_a:
        terms = bound_terms(a, b, bias)
        value = terms["value"]
        magnitude = value.abs()
    else:
        value = a @ b if bias is None else a @ b + bias
        finite = dequantised(params, inputs, finite_a, finite_b)
        terms = bound_terms(finite[0], finite[1], bias)
        magnitude = terms["value"].abs()
        magnitude = torch.where(torch.isfinite(value), torch.maximum(magnitude, value.abs()), magnitude)
    return value, terms, magnitude


def _grouped_reference(params: CaseParams, inputs: CaseInputs, slack: float) -> Reference:
    """A grouped case's value in float64, group by group (grouped.group_products), and the bound
    of tolerance_of with each group's own K (2d2d: its K slice; an empty one makes exact zeros,
    held to the output dtype's smallest normal)."""

    value = torch.zeros(expected_shape(params), dtype=torch.float64)
    tolerance = torch.zeros_like(value)
    family = accumulator(params, inputs.a.device.type, calibrated_device(inputs.a.device))
    u_out = OUT_ROUNDOFF[params.out_dtype]
    tiny = torch.finfo(inputs.out_dtype).tiny
    for a, b, rows in group_products(params, inputs.a, inputs.b, inputs.scale_a, inputs.scale_b):
        terms = bound_terms(a, b, None)
        value[rows] = terms["value"]
        tolerance[rows] = tolerance_of(terms, max(1, a.shape[1]), family, u_out, slack, tiny)
    acc = ACCUMULATORS[family]
    magnitude = value.abs()
    bound = {
        "model": BOUND_MODEL + ", per group",
        "accumulator": family,
        "u_acc": acc["u_acc"],
        "c_acc": acc["c_acc"],
        "promote_every": acc["promote_every"],
        "c_ep": C_EP,
        "c_out": C_OUT,
        "u_out": u_out,
        "slack": float(slack),
        "group_sizes": group_sizes(params),
        "max_tol_rel": float(tolerance.max() / magnitude.max()) if value.numel() and magnitude.max() > 0 else math.inf,
        "min_tol_rel": float((tolerance / magnitude).min()) if value.numel() else math.inf,
    }
    return Reference(value, tolerance, bound)


def check_metadata(out: Any, expected_shape: tuple[int, ...], expected_dtype: torch.dtype) -> dict | None:
    """A failed check when `out` is not a tensor of the expected shape and dtype, else None."""

    if not isinstance(out, torch.Tensor):
        return {"ok": False, "problem": f"returned {type(out).__name__}, not a Tensor", "ratio": math.inf}
    if tuple(out.shape) != tuple(expected_shape):
        return {
            "ok": False,
            "problem": f"shape {tuple(out.shape)}, expected {tuple(expected_shape)}",
            "ratio": math.inf,
        }
    if out.dtype != expected_dtype:
        return {"ok": False, "problem": f"dtype {out.dtype}, expected {expected_dtype}", "ratio": math.inf}
    return None


def _relative(max_abs: float, scale: float) -> float:
    if scale > 0:
        return max_abs / scale
    return 0.0 if max_abs == 0 else math.inf


def off_counts(got: torch.Tensor, diff: torch.Tensor, tol: torch.Tensor, finite_ref: torch.Tensor) -> dict[str, int]:
    """How much of an output is off, as counts the gate compares between runs (one NaN becoming
    all NaN has error/bound inf on both sides): the elements, those past the bound, the rows and
    columns holding any (leading dimensions folded into rows), and the non-finite elements where
    the reference is finite."""
    off = diff > tol
    if not off.numel():  # an empty output (M, N or a batch of 0): nothing can be off
        return {"elements": 0, "off_elements": 0, "off_rows": 0, "off_columns": 0, "nonfinite": 0}
    lines = off.reshape(-1, off.shape[-1]) if off.dim() >= 2 else off.reshape(1, -1)
    return {
        "elements": int(off.numel()),
        "off_elements": int(off.sum()),
        "off_rows": int(lines.any(dim=1).sum()),
        "off_columns": int(lines.any(dim=0).sum()),
        "nonfinite": int((finite_ref & ~torch.isfinite(got)).sum()),
    }


def compare(out: Any, ref: Reference, expected_shape: tuple[int, ...], expected_dtype: torch.dtype) -> dict:
    """How far one output is from the reference; ratio = max |out - value| / tolerance, > 1 is
    outside it. Where the reference is non-finite (an inf or nan scale) the output must be
    non-finite too, nan or inf alike (a kernel may apply the scale before or after the sum), and
    an infinity of the reference's sign where both are infinite. Where the reference exceeds the
    output dtype's range, a saturated value (max or inf) of the same sign is right. max_rel is
    the largest error relative to the largest finite |value|.

    An output of the wrong dtype or shape fails whatever its values, and its values are compared
    all the same (read as float64, in row-major order where the element count matches): the
    check keeps the metadata problem, with ratio inf, beside the values' measures and counts, so
    that values going further off behind an old metadata problem still show between runs."""

    bound = dict(ref.bound) if ref.bound else {"model": "given by the caller"}
    bad = check_metadata(out, expected_shape, expected_dtype)
    if bad:
        return {**bad, **_values_behind(out, ref, expected_dtype), "bound": bound}
    result = _values(out.detach().to("cpu", torch.float64).reshape(ref.value.shape), ref, expected_dtype)
    result["bound"] = bound
    return result


def _values_behind(out: Any, ref: Reference, expected_dtype: torch.dtype) -> dict:
    """The value measures of an output whose metadata is wrong (compare), under `values`: the
    error/bound its values alone would have; none where its values cannot be read against the
    reference (not a tensor, another element count, a meta tensor)."""
    readable = isinstance(out, torch.Tensor) and out.device.type != "meta" and not out.dtype.is_complex
    if not readable or out.numel() != ref.value.numel():
        return {"max_rel": math.inf, "values": "not compared: the output cannot be read as the reference's elements"}
    try:
        got = out.detach().to("cpu").to(torch.float64).reshape(ref.value.shape)
    except (RuntimeError, TypeError):
        return {"max_rel": math.inf, "values": "not compared: the output cannot be read as float64"}
    measured = _values(got, ref, expected_dtype)
    measured.pop("ok")
    # The metadata problem is the check's problem: what the values alone show keeps its own keys.
    for key in ("ratio", "problem", "pattern", "where"):
        if key in measured:
            measured[f"values_{key}"] = measured.pop(key)
    measured["values"] = "compared as float64" + ("" if tuple(out.shape) == tuple(ref.value.shape) else ", row-major")
    return measured


def _values(got: torch.Tensor, ref: Reference, expected_dtype: torch.dtype) -> dict:
    """compare's measures of float64 values `got`, of the reference's shape."""
    value, tol = ref.value, ref.tolerance
    finite_ref = torch.isfinite(value)
    safe = torch.where(finite_ref, value, torch.zeros_like(value))
    diff = torch.where(torch.isfinite(got), (got - safe).abs(), torch.full_like(safe, math.inf))
    limit = torch.finfo(expected_dtype).max if expected_dtype.is_floating_point else torch.iinfo(expected_dtype).max
    saturated = (got.abs() >= limit) & (torch.sign(got) == torch.sign(safe)) & (safe.abs() + tol >= limit)
    diff = torch.where(finite_ref & saturated, torch.zeros_like(diff), diff)
    # Where the reference is non-finite: any non-finite output, but not an infinity of the other sign.
    finite_there = ~finite_ref & torch.isfinite(got)
    wrong_sign = torch.isinf(value) & torch.isinf(got) & (torch.sign(got) != torch.sign(value))
    diff = torch.where(finite_ref, diff, torch.where(finite_there | wrong_sign, math.inf, 0.0))
    ratio = (diff / tol).max().item() if diff.numel() else 0.0
    max_abs = diff.max().item() if diff.numel() else 0.0
    scale = safe.abs().max().item() if diff.numel() else 0.0
    result = {
        "ok": ratio <= 1.0,
        "ratio": ratio,
        "max_abs": max_abs,
        "max_rel": _relative(max_abs, scale),
        **off_counts(got, diff, tol, finite_ref),
    }
    if ratio > 1.0 and not (finite_there.any() or wrong_sign.any()):
        result.update(off_pattern(got, safe, tol, diff, finite_ref))
    if finite_there.any() or wrong_sign.any():
        result["problem"] = NONFINITE_POSITIONS if finite_there.any() else WRONG_SIGN_INFINITIES
        result["nonfinite_expected"] = int((~finite_ref).sum())
    return result


def parity(
    eager_out: Any,
    compiled_out: Any,
    tolerance: torch.Tensor,
    expected_shape: tuple[int, ...],
    expected_dtype: torch.dtype,
    bound: dict | None = None,
) -> dict:
    """Compiled against eager, for special scale values (on top of each side against the
    reference): the same NaN positions, the same signed infinities, and finite values within
    twice the reference tolerance (computed from the finite scales)."""

    extra = {"bound": dict(bound) if bound else {"model": "twice the reference tolerance"}}
    bad = check_metadata(compiled_out, expected_shape, expected_dtype)
    if bad:
        return {**bad, "max_rel": math.inf, **extra}
    e = eager_out.detach().to("cpu", torch.float64).reshape(tolerance.shape)
    c = compiled_out.detach().to("cpu", torch.float64).reshape(tolerance.shape)
    counts = {"nan": int(torch.isnan(e).sum()), "inf": int(torch.isinf(e).sum())}
    if not torch.equal(torch.isnan(e), torch.isnan(c)):
        return {"ok": False, "problem": NAN_POSITIONS_FROM_EAGER, "ratio": math.inf, **counts, **extra}
    if not torch.equal(torch.where(torch.isinf(e), e, 0.0), torch.where(torch.isinf(c), c, 0.0)):
        return {"ok": False, "problem": INFINITIES_FROM_EAGER, "ratio": math.inf, **counts, **extra}
    finite = torch.isfinite(e)
    diff = torch.where(finite, (e - c).abs(), torch.zeros_like(e))
    ratio = (diff / (2 * tolerance)).max().item() if diff.numel() else 0.0
    max_abs = diff.max().item() if diff.numel() else 0.0
    scale = torch.where(finite, e.abs(), torch.zeros_like(e)).max().item() if diff.numel() else 0.0
    ok = ratio <= 1.0
    result = {
        "ok": ok,
        "ratio": ratio,
        "max_abs": max_abs,
        "max_rel": _relative(max_abs, scale),
        "against": "eager",
        **counts,
        **extra,
    }
    if not ok:
        result["problem"] = FINITE_FROM_EAGER
    return result
