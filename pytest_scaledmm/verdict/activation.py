"""Dynamic activations: a kernel that takes the high-precision activation x and quantises it
itself (torchao's dynamic-activation configs, vLLM's per-token fp8 quantisation).

The harness hands it x = a * scale_a, exact in the activation dtype, so the case's float64
reference is exact for x. What the kernel does with x is bounded soundly in two ways:

- An element whose quotient by its group's scale (amax / the declared divisor) lies on the
  dtype's grid is quantised exactly whatever rounding the scale's computation makes (its quotient
  is far from a tie): it costs 2^-22 of |x| when the scale is exact in fp32 and in x's dtype
  (torchao computes it in x's dtype), 2^-8 otherwise (one rounding in a 16-bit dtype).
- Any other element is rounded by the quantiser, bounded by half an ulp (fp8; at least half the
  least subnormal of the group's scale) or half the scale (int8).
The per-element costs go through |B| into the bound; a case where every element maps exactly is
"exact" in its bound, else "requantised".

The draw makes exact mapping the rule: scale_a is rounded down to a power of two and each
quantisation group (an element of scale_a's grid) gets one element at the dtype's largest value;
for a divisor off the grid (torchao's int8 127.5) that element is set in x to divisor * scale,
so that only it is rounded.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .case_axes import CaseParams
from .microscaling import is_fp4, operand_values, scale_values
from .scale_forms import WHOLE, scale_form

DYNAMIC = "dynamic"
SCALE_ROUNDING = 2.0**-22  # a few fp32 roundings of a power-of-two scale's computation
SCALE_ROUNDING_16BIT = 2.0**-8  # a scale computed in bf16 (torchao computes amax / max in x's dtype)
# fp8: (relative half ulp of a normal, half the least subnormal) in units of the scale.
FP8_ROUNDING = {
    "e4m3fn": (2.0**-4, 2.0**-10),
    "e4m3fnuz": (2.0**-4, 2.0**-11),
    "e5m2": (2.0**-3, 2.0**-17),
    "e5m2fnuz": (2.0**-3, 2.0**-18),
}
DTYPE_MAX = {"e4m3fn": 448.0, "e4m3fnuz": 240.0, "e5m2": 57344.0, "e5m2fnuz": 57344.0, "int8": 127.0}
ACTIVATION_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
ACTIVATION_HEADROOM = {"fp16": 2.0**15, "bf16": 2.0**120, "fp32": 2.0**120}


def is_dynamic(params: CaseParams) -> bool:
    return params.dynamic_activation


def activation_dtype_name(params: CaseParams) -> str:
    """x's dtype: the output's, bf16 for an fp8 output."""
    return params.out_dtype if params.out_dtype in ACTIVATION_DTYPES else "bf16"


def divisor(params: CaseParams) -> float:
    """What the kernel's quantiser divides a group's amax by."""
    declared = params.activation_divisor
    return float(declared) if declared else DTYPE_MAX.get(params.dtype_a, 448.0)


# The finest groups a quantiser uses (one token's 1 x 128 block): every one holds the dtype's
# largest value, so a finer quantiser than the case's form maps exactly too.
FINEST = (1, 128)


def _group_ids(params: CaseParams, m: int, k: int, blocks: tuple | None = None) -> tuple[torch.Tensor, int]:
    """(M x K int64 group index of each element of a, number of groups) from scale_a's grid, or
    from `blocks` (rows, cols) when given."""

    row_block, col_block = blocks or scale_form(params.scale_a).block("a")
    rows = torch.zeros(m, dtype=torch.int64) if row_block is WHOLE else torch.arange(m) // row_block
    cols = torch.zeros(k, dtype=torch.int64) if col_block is WHOLE else torch.arange(k) // col_block
    width = int(cols.max()) + 1 if k else 1
    ids = rows[:, None] * width + cols[None, :]
    return ids, (int(ids.max()) + 1 if ids.numel() else 0)


def _group_amax(values: torch.Tensor, ids: torch.Tensor, groups: int) -> torch.Tensor:

    flat = values.abs().reshape(-1)
    return torch.zeros(groups, dtype=flat.dtype).scatter_reduce_(0, ids.reshape(-1), flat, "amax", include_self=True)


def prepare_draw(
    a: torch.Tensor, scale_a: torch.Tensor | tuple[torch.Tensor, ...], params: CaseParams
) -> tuple[torch.Tensor, torch.Tensor | tuple[torch.Tensor, ...]]:
    """(a, scale_a) the declared quantiser maps exactly where it can: scale_a floored to powers
    of two and spread over 16x (element i of its grid times 2^-(i % 5): a quantiser coarser
    than the case's form loses the smaller groups' low bits), and the largest |element| of each
    token's 1 x 128 block set to the dtype's largest value."""

    if isinstance(scale_a, tuple) or scale_a.dtype != torch.float32 or not a.numel() or is_fp4(a):
        return a, scale_a
    positive = scale_a > 0
    floored = torch.where(positive, torch.exp2(torch.floor(torch.log2(scale_a.abs().clamp_min(1e-38)))), scale_a)
    spread = torch.exp2(-(torch.arange(floored.numel()) % 5).to(torch.float32)).reshape(floored.shape)
    floored = floored * spread
    # The largest element goes to the dtype's maximum; a divisor off the grid (127.5) is set on x
    # itself by make_activation.
    target = DTYPE_MAX.get(params.dtype_a, 448.0)
    m, k = a.shape
    values = operand_values(a).reshape(m, k).clone()
    ids, groups = _group_ids(params, m, k, FINEST)
    amax = _group_amax(values, ids, groups)
    at_max = values.abs().reshape(-1) == amax[ids.reshape(-1)]
    first = torch.full((groups,), -1, dtype=torch.int64)
    where = at_max.nonzero().flatten().flip(0)  # scatter keeps the last write: the first element
    first.scatter_(0, ids.reshape(-1)[where], where)
    flat = values.reshape(-1)
    chosen = first[first >= 0]
    top = torch.full_like(flat[chosen], target)
    flat[chosen] = torch.where(flat[chosen] < 0, -top, top)
    return flat.reshape(m, k).to(a.dtype), floored


def balance_range(
    scale_a: torch.Tensor | tuple[torch.Tensor, ...],
    scale_b: torch.Tensor | tuple[torch.Tensor, ...],
    a: torch.Tensor,
    params: CaseParams,
) -> tuple[torch.Tensor | tuple[torch.Tensor, ...], torch.Tensor | tuple[torch.Tensor, ...]]:
    """(scale_a, scale_b) with a power of two moved from scale_a to scale_b where x would leave
    the activation dtype's range: the product, and so the output, is unchanged."""

    if isinstance(scale_a, tuple) or isinstance(scale_b, tuple) or not a.numel() or scale_a.dtype != torch.float32:
        return scale_a, scale_b
    headroom = ACTIVATION_HEADROOM[activation_dtype_name(params)]
    peak = float(operand_values(a).abs().max()) * float(scale_values(scale_a).abs().max())
    if not math.isfinite(peak) or peak <= headroom:
        return scale_a, scale_b
    factor = 2.0 ** math.ceil(math.log2(peak / headroom))
    return scale_a / factor, scale_b * factor


def make_activation(a: torch.Tensor, expanded_scale_a: torch.Tensor, params: CaseParams) -> torch.Tensor:
    """x = a * scale_a in the activation dtype (M x K, or a's 3-D shape), on the CPU."""

    m, k = params.m, params.k
    quantised = operand_values(a).reshape(m, k)
    values = quantised * expanded_scale_a
    top, target = DTYPE_MAX.get(params.dtype_a, 448.0), divisor(params)
    if target != top and values.numel():
        # A quantiser that divides by a value off the dtype's grid (torchao's int8: 127.5): the
        # group's largest element at +-divisor * scale makes its scale the case's, a power of two;
        # that one element is then rounded by the quantiser, the others map exactly.
        at_top = quantised.abs() == top
        values = torch.where(at_top, torch.sign(quantised) * target * expanded_scale_a, values)
    x = values.to(getattr(torch, ACTIVATION_DTYPES[activation_dtype_name(params)]))
    return x.reshape(a.shape) if a.dim() == 3 else x


def quantisation_term(params: CaseParams, x: torch.Tensor, big_b: torch.Tensor) -> tuple[torch.Tensor, str]:
    """(M x N float64 bound on what quantising x costs through B, "exact" or "requantised").
    `x` is the activation as float64 M x K, `big_b` the dequantised K x N weight."""

    m, k = x.shape
    if not x.numel() or not big_b.numel():
        return torch.zeros(m, big_b.shape[1], dtype=torch.float64), "exact"
    ids, groups = _group_ids(params, m, k)
    finite = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
    group_scale = (_group_amax(finite, ids, groups) / divisor(params))[ids]
    safe = torch.where(group_scale > 0, group_scale, torch.ones_like(group_scale))
    ratio = finite / safe
    # A scale exact in fp32 and in x's own dtype is exact however the kernel computes it
    # (torchao divides in x's dtype); another may be rounded once in a 16-bit dtype before use.
    own = getattr(torch, ACTIVATION_DTYPES[activation_dtype_name(params)])
    exact_scale = (group_scale.to(torch.float32).double() == group_scale) & (
        group_scale.to(own).double() == group_scale
    )
    scale_error = torch.where(
        exact_scale, torch.full_like(group_scale, SCALE_ROUNDING), torch.full_like(group_scale, SCALE_ROUNDING_16BIT)
    )
    name = params.dtype_a
    top = DTYPE_MAX.get(name, 448.0)
    if name == "int8":
        on_grid = (torch.round(ratio) == ratio) & (ratio.abs() <= top)
        rounding = group_scale / 2
    else:
        on_grid = (ratio.to(getattr(torch, f"float8_{name}")).double() == ratio) & (ratio.abs() <= top)
        relative, subnormal = FP8_ROUNDING.get(name, FP8_ROUNDING["e5m2"])
        rounding = torch.maximum(finite.abs() * relative, group_scale * subnormal)
    # Each element on the grid maps exactly (its quotient is far from a tie); the others are
    # rounded by the quantiser.
    err = finite.abs() * scale_error + torch.where(on_grid, torch.zeros_like(rounding), rounding)
    how = "exact" if bool((on_grid & exact_scale).all()) else "requantised"
    return err @ big_b.abs(), how


def requantised_growth(params: CaseParams) -> float:
    """How much larger than x's the quantised activation's magnitudes may be (the matmul terms
    of the bound are computed from x)."""
    name = params.dtype_a
    return 1.0 + (FP8_ROUNDING.get(name, (0.0, 0.0))[0] if name != "int8" else 2.0**-7)


def dynamic_activation(params: CaseParams, inputs: Any) -> torch.Tensor | None:
    """The float64 M x K activation a dynamic kernel was given, or None."""
    if not is_dynamic(params) or getattr(inputs, "activation", None) is None:
        return None
    return inputs.activation.detach().to("cpu").double().reshape(params.m, params.k)
