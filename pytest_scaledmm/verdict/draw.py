"""The inputs of one case and its expected output shape.

Every tensor is drawn on the CPU from a generator seeded by the case id and then moved, so the
same case sees the same numbers on any device and in any process; nothing is zeros.

Layout axes change how the same values are laid out, never the values (except `expanded`, which
repeats one value): `scale_layout` applies to both scales, `activation_rank` to `a`, and
`special_scale` writes one special value into the first element of `scale_a`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from .activation import (
    balance_range,
    is_dynamic,
    make_activation,
    prepare_draw,
)
from .case_axes import CaseParams
from .grouped import draw_grouped, grouped_shape
from .layouts import place_a, place_b, place_scale_a, place_token
from .microscaling import (
    FP4_TORCH_NAMES,
    draw_block_scale,
    draw_fp4_operand,
    draw_global_scale,
    operand_values,
    scale_values,
)
from .regimes import (
    NEAR_LIMIT_TARGET,
    OUT_HEADROOM,
    cancel,
    full_range_operands,
    power_of_two_at_most,
    real_scale_factors,
    regime_of,
    special_operand_of,
)
from .scale_forms import WHOLE, scale_form

FP8_TORCH_NAMES = {
    "e4m3fn": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
}
OUT_TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
FP8_OUT_LIMIT = 224.0  # an fp8 (e4m3, max 448) output's values are kept below this, scale_result included
# torch._scaled_mm's output scale: multiplies the fp32 result before its conversion to an fp8
# output (cuBLASLt's D scale; pytorch#190449); not used for other outputs.
SCALE_RESULTS = {"one": 1.0, "two": 2.0, "quarter": 0.25}
SPECIAL_VALUES = {"zero": 0.0, "inf": math.inf, "nan": math.nan}  # "negative" negates the element


def torch_dtype(name: str) -> torch.dtype | None:

    if name == "int8":
        return torch.int8
    attr = FP8_TORCH_NAMES.get(name) or FP4_TORCH_NAMES.get(name) or OUT_TORCH_NAMES[name]
    return getattr(torch, attr, None)


def activation_batches(params: CaseParams) -> int:
    """A 3-D activation is (B, M/B, K) with B = 2 when M is even, else B = 1 (so M = 1 and odd M
    still get a 3-D tensor)."""
    if params.activation_rank != 3:
        return 0
    return 2 if params.m % 2 == 0 else 1


def expected_shape(params: CaseParams) -> tuple[int, ...]:
    """(M, N) for 2-D activations, (B, M/B, N) for 3-D ones: the leading dims of `a` are kept.
    A grouped case's: grouped.grouped_shape."""
    if params.grouped:
        return grouped_shape(params)
    m, n = params.m, params.n
    batches = activation_batches(params)
    return (batches, m // batches, n) if batches else (m, n)


@dataclass
class CaseInputs:
    a: Any
    b: Any
    scale_a: Any
    scale_b: Any
    bias: Any | None
    out_dtype: Any
    use_fast_accum: bool
    finite_scale_a: Any = None  # scale_a before the special value, for tolerances; on the CPU
    # Tensors the kernel is passed by keyword after bias, in order (offs, scale_result).
    extras: dict = field(default_factory=dict)
    finite_scale_b: Any = None  # scale_b before a special value written into it; on the CPU
    # A dynamic kernel's high-precision activation: a * scale_a, exact (activation.py).
    activation: Any = None

    def args(self) -> tuple[Any, ...]:
        return (self.a, self.b, self.scale_a, self.scale_b, self.bias, *self.extras.values())


def scale_result_of(params: CaseParams) -> float | None:
    """The case's scale_result value, None when it passes none."""
    return SCALE_RESULTS.get(params.scale_result)


def bias_dtype_name(params: CaseParams) -> str:
    """The bias's dtype: the `bias_dtype` axis, else the output's (bf16 for an fp8 output)."""
    chosen = params.bias_dtype
    if chosen != "out":
        return chosen
    return params.out_dtype if params.out_dtype in OUT_TORCH_NAMES else "bf16"


def _operand(side: str, m: int, k: int, n: int) -> tuple[int, int]:
    """(rows, cols) of the operand a scale dequantises: a is M x K, b is K x N."""
    return (m, k) if side == "a" else (k, n)


def _scale_tensor(
    form_id: str,
    side: str,
    m: int,
    k: int,
    n: int,
    generator: torch.Generator,
    grid: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """One element per block of the operand (scale_forms.py), in the form's memory order; `grid`
    (rows x cols of the form's grid) gives the values instead of a draw."""

    def draw(*shape: int) -> torch.Tensor:
        # A spread over several powers of two, so a scale applied on the wrong axis shows.
        exponents = torch.randint(-2, 3, shape, generator=generator)
        return torch.pow(2.0, exponents.float()) * (1 + torch.rand(shape, generator=generator) * 0.5)

    form = scale_form(form_id)
    operand = _operand(side, m, k, n)
    if form.scale_dtype != "fp32":  # microscaling: e8m0 or e4m3 block scales (and a global one)
        blocks = draw_block_scale(form.scale_dtype, form.grid(side, *operand), generator)
        return (blocks, draw_global_scale(generator)) if form.global_scale else blocks
    rows, cols = form.grid(side, *operand)
    if grid is not None:
        scale = grid.t().contiguous().t() if form.column_major else grid.contiguous()
    else:
        scale = draw(cols, rows).t() if form.column_major else draw(rows, cols)
    return scale if form.rank == 2 else scale.reshape(form.shape(side, *operand))


def _grid_of(scale: torch.Tensor, form_id: str, side: str, m: int, k: int, n: int) -> torch.Tensor:
    """A scale's values as its form's (rows x cols) grid, float32."""
    form = scale_form(form_id)
    return scale.reshape(form.grid(side, *_operand(side, m, k, n))).float()


def _with_special(scale: torch.Tensor, special: str) -> torch.Tensor:
    if special == "none":
        return scale
    scale = scale.clone()
    first = (0,) * scale.dim()
    scale[first] = -scale[first] if special == "negative" else SPECIAL_VALUES[special]
    return scale


def _extent(t: torch.Tensor) -> int:
    """Elements of storage a view spans from its first element."""
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()) if size > 0)


def lay_out(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same scale values in another memory layout, on the same device. Unused storage is NaN,
    so a kernel that reads past a view's strides or offset produces NaN, not a near miss.

    - noncontiguous: every stride doubled, as a strided slice of a wider tensor;
    - offset: the same strides starting one shard into the storage, as tensor-parallel rank 1
      of 2 sees its slice of a sharded scale;
    - expanded: stride 0 everywhere: one value broadcast to the form's shape (per-tensor scale
      expanded to rowwise, as frameworks do); a 0-D scale stays as it is.
    """

    if layout == "contiguous":
        return t
    if layout == "expanded":
        return t.reshape(-1)[0].clone().expand(t.shape) if t.dim() and t.numel() else t
    extent = _extent(t)
    if layout == "offset":
        buffer = torch.full((2 * extent,), math.nan, dtype=t.dtype, device=t.device)
        view = buffer.as_strided(t.shape, t.stride(), extent)
    elif layout == "noncontiguous":
        buffer = torch.full((2 * extent,), math.nan, dtype=t.dtype, device=t.device)
        view = buffer.as_strided(t.shape, tuple(2 * s for s in t.stride()), 0)
    else:
        raise ValueError(layout)
    view.copy_(t)
    return view


# _move keeps a tensor a tensor, and an optional one (a bias) optional.
_Moved = TypeVar("_Moved", torch.Tensor, torch.Tensor | None)


def _move(t: _Moved, device: str) -> _Moved:
    """To the device, keeping strides (column-major b, outer-dim-major block scales)."""

    if t is None or device == "cpu":
        return t
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device).copy_(t)


def _mean_abs(scale: torch.Tensor | tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The mean |multiplier| of a scale (a float32 tensor as the scale's own mean for fp32 scales)."""
    if isinstance(scale, tuple) or scale.element_size() == 1:
        return scale_values(scale).abs().mean().float()
    return scale.abs().mean()


def _each(
    scale: torch.Tensor | tuple[torch.Tensor, ...], fn: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """fn of a scale, or of each level of a two-level (NVFP4) one."""
    return tuple(fn(level) for level in scale) if isinstance(scale, tuple) else fn(scale)


def _placed(
    scale: torch.Tensor | tuple[torch.Tensor, ...], device: str, layout: str
) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """A scale on the device in its layout; a two-level scale level by level."""
    return _each(scale, lambda t: lay_out(_move(t, device), layout))


def _draw_operands(params: CaseParams, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(a M x K, b K x N column-major) of the standard regime."""

    m, k, n = params.m, params.k, params.n
    if params.dtype_a == "int8":
        a = torch.randint(-127, 128, (m, k), generator=generator, dtype=torch.int8)
        b = torch.randint(-127, 128, (n, k), generator=generator, dtype=torch.int8).t()
    elif FP4_TORCH_NAMES.keys() & {params.dtype_a, params.dtype_b}:
        # Packed pairs along K: a is M x K/2, b the transpose of N x K/2.
        a = draw_fp4_operand(m, k, generator)
        b = draw_fp4_operand(n, k, generator).t()
    else:
        a = (torch.randn(m, k, generator=generator) * 2).to(torch_dtype(params.dtype_a))
        b = (torch.randn(n, k, generator=generator) * 2).to(torch_dtype(params.dtype_b)).t()  # K x N, column-major
    return a, b


def _operands_and_scales(
    params: CaseParams, generator: torch.Generator
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor | tuple[torch.Tensor, ...], torch.Tensor | tuple[torch.Tensor, ...]
]:
    """(a, b, scale_a, scale_b) of the case's value regime (regimes.py), on the CPU."""
    m, k, n = params.m, params.k, params.n
    regime = regime_of(params)
    if regime == "full_range":
        a, b, grid_a, grid_b = full_range_operands(params, generator)
        return (
            a,
            b,
            _scale_tensor(params.scale_a, "a", m, k, n, generator, grid_a),
            _scale_tensor(params.scale_b, "b", m, k, n, generator, grid_b),
        )
    a, b = _draw_operands(params, generator)
    if regime == "cancelling":
        a, b = cancel(a, b, generator)
    # A tensor, or an NVFP4 (block, global) pair: the fp32-only steps below are guarded by the
    # case's dtypes and forms, which mypy cannot follow.
    scale_a: Any = _scale_tensor(params.scale_a, "a", m, k, n, generator)
    scale_b: Any = _scale_tensor(params.scale_b, "b", m, k, n, generator)
    if params.dtype_a == "int8":
        # int8 values span +-127, so dequantisation scales are ~1/127 (absmax / 127 in practice);
        # larger ones overflow fp16 outputs for any K worth testing.
        scale_a, scale_b = scale_a / 127, scale_b / 127
    if regime == "real_scales":
        grid_a, grid_b = (
            _grid_of(s, form, side, m, k, n)
            for s, side, form in ((scale_a, "a", params.scale_a), (scale_b, "b", params.scale_b))
        )
        factor_a, factor_b = real_scale_factors(grid_a, grid_b, generator)
        if params.dtype_a == "int8":
            factor_a = factor_a * 127  # its scales were divided by 127 above: large means above 2^10 still
        scale_a = _scale_tensor(params.scale_a, "a", m, k, n, generator, grid_a * factor_a)
        scale_b = _scale_tensor(params.scale_b, "b", m, k, n, generator, grid_b * factor_b)
    return a, b, scale_a, scale_b


def _dequantised_draw(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor | tuple[torch.Tensor, ...],
    scale_b: torch.Tensor | tuple[torch.Tensor, ...],
    params: CaseParams,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(A M x K, B K x N) in float64 of operands and scales still being drawn (reference.dequantised
    reads a finished CaseInputs)."""
    m, k, n = params.m, params.k, params.n
    return (
        operand_values(a) * expand_scale(scale_a, params.scale_a, "a", m, k),
        operand_values(b) * expand_scale(scale_b, params.scale_b, "b", k, n),
    )


def _peak(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor | tuple[torch.Tensor, ...],
    scale_b: torch.Tensor | tuple[torch.Tensor, ...],
    params: CaseParams,
) -> float:
    """An upper bound of every |output| before bias: max of (|A| @ |B|) of the dequantised operands."""
    if not (params.m and params.k and params.n):
        return 0.0
    big_a, big_b = _dequantised_draw(a, b, scale_a, scale_b, params)
    return float((big_a.abs() @ big_b.abs()).max())


def second_call_seed(seed: int) -> int:
    """The input seed of a case's second call (other values, the same shape), from its own seed."""
    return zlib.crc32(f"{seed}::second".encode())


@dataclass
class _Draw:
    """A case's tensors on the CPU while each production dimension (DRAW_STEPS) does its part.
    Scales are tensors or NVFP4 (block, global) pairs; the tensor-only steps are guarded by checks
    (fp32 scales, the case's forms) that mypy cannot follow."""

    a: torch.Tensor
    b: torch.Tensor
    scale_a: Any
    scale_b: Any
    bias: torch.Tensor | None = None
    finite_scale_a: Any = None  # before a special value: what tolerances read
    finite_scale_b: Any = None

    @property
    def fp32_scales(self) -> bool:
        return not isinstance(self.scale_a, tuple) and self.scale_a.dtype == torch.float32


def _dynamic_activation_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    """A kernel that quantises its activation itself: a drawn so that its quantiser's grid holds it."""
    if is_dynamic(params):
        draw.a, draw.scale_a = prepare_draw(draw.a, draw.scale_a, params)


def _output_headroom_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    """Outputs stay representable: a power of two on a scale (exact) keeps the peak below the
    headroom of the output dtype."""
    regime, out = regime_of(params), params.out_dtype
    wide = regime != "standard" or is_dynamic(params)
    if not (wide and draw.fp32_scales and out not in FP8_TORCH_NAMES and out in OUT_HEADROOM):
        return
    peak = _peak(draw.a, draw.b, draw.scale_a, draw.scale_b, params)
    if peak > OUT_HEADROOM[out]:
        factor = power_of_two_at_most(OUT_HEADROOM[out] / peak)
        if regime == "real_scales":  # scale_b only gets tinier; scale_a stays above 2^10
            draw.scale_b = draw.scale_b * factor
        else:
            draw.scale_a = draw.scale_a * factor


def _fp8_output_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    """An fp8 output: scale_a shrunk so that the result fits the fp8 range (near_limit's own)."""
    if params.out_dtype in FP8_TORCH_NAMES and regime_of(params) != "near_limit":
        draw.scale_a = draw.scale_a * _fp8_out_shrink(draw.a, draw.b, draw.scale_a, draw.scale_b, params)


def _bias_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    if not params.bias:
        return
    if regime_of(params) == "standard":
        # On the scale of the output (entries of a and b have std 2): a smaller bias would sit
        # below a bf16 output's resolution and a kernel that drops it would pass.
        spread: torch.Tensor | float = 4 * math.sqrt(params.k) * _mean_abs(draw.scale_a) * _mean_abs(draw.scale_b)
        spread = spread if math.isfinite(spread) else 1.0  # an empty dim: no scale element
    else:
        spread = _output_spread(draw.a, draw.b, draw.scale_a, draw.scale_b, params)
    draw.bias = (torch.randn(params.n, generator=generator) * spread).to(torch_dtype(bias_dtype_name(params)))


def _near_limit_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    if regime_of(params) == "near_limit" and draw.fp32_scales:
        draw.scale_a, draw.bias = _near_limit(draw.a, draw.b, draw.scale_a, draw.scale_b, draw.bias, params)


def _dynamic_range_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    if is_dynamic(params):
        draw.scale_a, draw.scale_b = balance_range(draw.scale_a, draw.scale_b, draw.a, params)


def _scale_dtype_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    """As a library passes them: in the activation's dtype; the reference reads these values."""
    if params.scale_dtype != "fp32" and not isinstance(draw.scale_a, tuple):
        dtype = torch_dtype(params.scale_dtype)
        draw.scale_a, draw.scale_b = draw.scale_a.to(dtype), draw.scale_b.to(dtype)


def _expanded_layout_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    """An expanded scale repeats one value: the reference must see the repeated value too."""
    layout = params.scale_layout
    if layout == "expanded":
        draw.scale_a, draw.scale_b = (
            _each(s, lambda t: lay_out(t, layout).clone()) for s in (draw.scale_a, draw.scale_b)
        )


def _special_scale_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    draw.finite_scale_a, draw.finite_scale_b = draw.scale_a, draw.scale_b
    if params.special_side == "b":
        draw.scale_b = _with_special(draw.scale_b, params.special_scale)
    else:
        draw.scale_a = _with_special(draw.scale_a, params.special_scale)


def _special_operand_step(draw: _Draw, params: CaseParams, generator: torch.Generator) -> None:
    """A non-finite element in `a` (a NaN from an overflowed activation) and/or `b`: the reference
    reads them too, their row / column of the output is non-finite."""
    value, operands = special_operand_of(params)
    if not (operands and draw.a.numel() and draw.b.numel()):
        return
    if "a" in operands:
        draw.a = draw.a.clone()
        draw.a[0, 0] = torch.tensor(float(value)).to(draw.a.dtype)
    if "b" in operands:
        draw.b = draw.b.clone()
        draw.b[-1, -1] = torch.tensor(float(value)).to(draw.b.dtype)


# What each production dimension does to a case's drawn tensors, in this order (later steps read
# what earlier ones made: the bias reads the shrunk scales, the special value goes in last).
DrawStep = Callable[[_Draw, CaseParams, torch.Generator], None]
DRAW_STEPS: tuple[DrawStep, ...] = (
    _dynamic_activation_step,
    _output_headroom_step,
    _fp8_output_step,
    _bias_step,
    _near_limit_step,
    _dynamic_range_step,
    _scale_dtype_step,
    _expanded_layout_step,
    _special_scale_step,
    _special_operand_step,
)


def make_inputs(params: CaseParams, seed: int, device: str) -> CaseInputs:
    """The case's inputs from its seed: operands and scales drawn (value regimes), each
    production dimension's part (DRAW_STEPS), then placed on the device in the case's layouts."""
    generator = torch.Generator().manual_seed(seed)
    if params.grouped:
        return _grouped_inputs(params, generator, device)
    draw = _Draw(*_operands_and_scales(params, generator))
    for step in DRAW_STEPS:
        step(draw, params, generator)
    return _placed_inputs(draw, params, device)


def _placed_inputs(draw: _Draw, params: CaseParams, device: str) -> CaseInputs:
    """The drawn tensors on the device: operands in their layout (a 3-D activation as [B, T, K]),
    scales in theirs, the output scale among the keyword tensors."""
    m, k = params.m, params.k
    layout, operand_layout = params.scale_layout, params.operand_layout
    scale_a, finite_scale_a = draw.scale_a, draw.finite_scale_a
    activation = None
    if is_dynamic(params):
        activation = make_activation(draw.a, expand_scale(scale_a, params.scale_a, "a", m, k), params)
    a = place_a(_move(draw.a, device), operand_layout)
    batches = activation_batches(params)
    if batches:
        a = a.view(batches, m // batches, k)
        activation = None if activation is None else activation.view(batches, m // batches, k)
        if params.scale_keepdim and scale_a.numel() == m:
            # As amax(dim=-1, keepdim=True) of the 3-D activation gives it: [B, T, 1].
            scale_a, finite_scale_a = (s.reshape(batches, m // batches, 1) for s in (scale_a, finite_scale_a))
    extras = {}
    if scale_result_of(params) is not None:
        extras["scale_result"] = _move(torch.tensor(scale_result_of(params)), device)
    if activation is not None:
        activation = place_a(_move(activation.reshape(m, k), device), operand_layout).view(*(activation.shape))
    return CaseInputs(
        place_token(a, operand_layout),
        place_b(_move(draw.b, device), operand_layout),
        place_scale_a(_placed(scale_a, device, layout), operand_layout),
        _placed(draw.scale_b, device, layout),
        _move(draw.bias, device),
        torch_dtype(params.out_dtype),
        bool(params.use_fast_accum),
        finite_scale_a,
        extras,
        draw.finite_scale_b,
        None if activation is None else place_token(activation, operand_layout),
    )


def _output_spread(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor | tuple[torch.Tensor, ...],
    scale_b: torch.Tensor | tuple[torch.Tensor, ...],
    params: CaseParams,
) -> float:
    """The rms of the exact product's elements, estimated from the dequantised operands' rms:
    a bias on the output's scale."""
    if not (params.m and params.k and params.n):
        return 1.0
    big_a, big_b = _dequantised_draw(a, b, scale_a, scale_b, params)
    spread = float(big_a.pow(2).mean().sqrt() * big_b.pow(2).mean().sqrt()) * math.sqrt(params.k)
    return spread if math.isfinite(spread) and spread > 0 else 1.0


def _near_limit(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor | tuple[torch.Tensor, ...],
    bias: torch.Tensor | None,
    params: CaseParams,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(scale_a, bias) times one power of two that puts the largest exact |output| (bias
    included, scale_result applied) in (target/2, target] of NEAR_LIMIT_TARGET."""
    if not (params.m and params.n):
        return scale_a, bias
    big_a, big_b = _dequantised_draw(a, b, scale_a, scale_b, params)
    value = big_a @ big_b
    if bias is not None:
        value = value + bias.double()
    peak = float(value.abs().max()) * (scale_result_of(params) or 1.0 if params.out_dtype in FP8_TORCH_NAMES else 1.0)
    target = NEAR_LIMIT_TARGET.get(params.out_dtype)
    if not target or not peak or not math.isfinite(peak):
        return scale_a, bias
    factor = power_of_two_at_most(target / peak)
    return scale_a * factor, None if bias is None else (bias.double() * factor).to(bias.dtype)


def _fp8_out_shrink(
    a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, params: CaseParams
) -> float:
    """A power of two that keeps every output of an fp8 case, scale_result and bias included,
    below FP8_OUT_LIMIT (an upper bound from |a| @ |b|), so that a right result never saturates."""
    if not (a.numel() and b.numel()):
        return 1.0
    peak = (a.float().abs() @ b.float().abs()).max().item() * scale_a.abs().max().item() * scale_b.abs().max().item()
    peak *= 2 * max(1.0, scale_result_of(params) or 1.0)  # room for the bias (about 4 sqrt(K) spreads)
    return 2.0 ** -max(0, math.ceil(math.log2(peak / FP8_OUT_LIMIT))) if peak > 0 else 1.0


def expand_scale(
    scale: torch.Tensor | tuple[torch.Tensor, ...], form_id: str, side: str, rows: int, cols: int
) -> torch.Tensor:
    """The scale as a float64 (rows x cols) multiplier of the operand it dequantises: each
    element repeated over its block."""

    form = scale_form(form_id)
    row_block, col_block = form.block(side)
    s = scale_values(scale).reshape(form.grid(side, rows, cols))
    s = s.expand(rows, -1) if row_block is WHOLE else s.repeat_interleave(row_block, dim=0)[:rows]
    return s.expand(-1, cols) if col_block is WHOLE else s.repeat_interleave(col_block, dim=1)[:, :cols]


def _grouped_inputs(params: CaseParams, generator: torch.Generator, device: str) -> CaseInputs:
    """A grouped case's operands and rowwise scales (grouped.py), `offs` in the extras."""

    dtypes = torch_dtype(params.dtype_a), torch_dtype(params.dtype_b)
    a, b, scale_a, scale_b, offs = draw_grouped(params, generator, *dtypes)
    extras = {} if offs is None else {"offs": _move(torch.tensor(offs, dtype=torch.int32), device)}
    return CaseInputs(
        _move(a, device),
        _move(b, device),
        _move(scale_a, device),
        _move(scale_b, device),
        None,
        torch_dtype(params.out_dtype),
        bool(params.use_fast_accum),
        scale_a,
        extras,
    )
