"""Value regimes: the numbers a case's operands and scales hold, as production quantisers make them.

A regime changes values, never shapes or layouts; every value it draws is exactly what the
reference (reference.py) dequantises, so each regime keeps an exact float64 reference and
the same bound. `standard` is the synthetic draw (a small normal, scales in 2^[-2, 2]).

- full_range: operands quantised from a high-precision tensor, each scale block's amax mapped to
  the dtype's maximum (448 for e4m3fn, 240 for e4m3fnuz, 57344 for e5m2, 127 for int8, -128
  reached as clipped schemes do); activations with outlier channels 100x the rest and a few
  subnormals; the scales are the quantiser's amax / max.
- real_scales: scales as real quantisers make them: scale_b tiny (below 2^-14, a weight with
  amax 0.02), scale_a large (above 2^10), each per-channel or per-block scale spanning four
  decades in one tensor.
- near_limit: outputs near the output dtype's limits while the exact result stays inside them
  (fp16 within a factor of two of 65504, bf16 and fp32 about 2^64, fp8 past 448 before
  scale_result brings it back).
- cancelling: sums that cancel: most pairs of K products are exact negatives of each other, so
  the result is near zero while its terms are large (a low-precision accumulator shows).

No torch import at module level: generation reads REGIMES without torch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .case_axes import CaseParams
from .scale_forms import WHOLE, scale_form

if TYPE_CHECKING:
    import torch

REGIMES = ("standard", "full_range", "real_scales", "near_limit", "cancelling")
STANDARD = "standard"
# Largest finite value of each operand dtype (what a quantiser maps amax to).
QMAX = {"e4m3fn": 448.0, "e5m2": 57344.0, "e4m3fnuz": 240.0, "e5m2fnuz": 57344.0, "int8": 127.0}
FP8_DTYPES = {
    "e4m3fn": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
}
OUTLIER_FACTOR = 100.0  # LLM activation outlier channels, against the median channel
TINY_SCALE = 2.0**-20  # scale_b multiplier of real_scales: every element below 2^-14
LARGE_SCALE = 2.0**16  # scale_a multiplier of real_scales: every element above 2^10
DECADES = 2.0  # per-element spread of a multi-element scale: 2 * DECADES decades
# Output peaks near_limit aims at (the largest |value| lands in (target/2, target]).
NEAR_LIMIT_TARGET = {"fp16": 60000.0, "bf16": 2.0**64, "fp32": 2.0**64, "e4m3fn": 336.0}
# Any regime keeps outputs this far below the output dtype's largest value (near_limit aside).
OUT_HEADROOM = {"fp16": 65504.0 / 8, "bf16": 2.0**100, "fp32": 2.0**100}
CANCEL_SHARE = 7 / 8  # share of K pairs that cancel exactly


def regime_of(params: CaseParams) -> str:
    return params.value_regime


def _block_amax(x: torch.Tensor, block: tuple, whole: object) -> torch.Tensor:
    """Per scale block of a (rows x cols) float tensor: the amax over the block (a partial last
    block counts what it has)."""
    import torch  # noqa: PLC0415  lazy: torch-free collection

    rows, cols = x.shape
    rb = max(rows if block[0] is whole else block[0], 1)
    cb = max(cols if block[1] is whole else block[1], 1)
    # A whole dimension is one block even when it is empty (the scale still has its element).
    gr = 1 if block[0] is whole else -(-rows // rb)
    gc = 1 if block[1] is whole else -(-cols // cb)
    padded = torch.zeros(gr * rb, gc * cb, dtype=x.dtype)
    padded[:rows, :cols] = x.abs()
    return padded.reshape(gr, rb, gc, cb).amax(dim=(1, 3))


def _expand(grid: torch.Tensor, block: tuple, whole: object, rows: int, cols: int) -> torch.Tensor:
    rb = rows if block[0] is whole else block[0]
    cb = cols if block[1] is whole else block[1]
    return grid.repeat_interleave(max(rb, 1), dim=0)[:rows].repeat_interleave(max(cb, 1), dim=1)[:, :cols]


def _last_of_each(indices: torch.Tensor) -> torch.Tensor:
    """The positions in `indices` of each distinct value's last occurrence."""
    import torch  # noqa: PLC0415  lazy: torch-free collection

    distinct, inverse = torch.unique(indices, return_inverse=True)
    positions = torch.arange(len(indices))
    return torch.zeros(len(distinct), dtype=torch.long).scatter_reduce(0, inverse, positions, reduce="amax")


def quantise(
    x: torch.Tensor, dtype_name: str, block: tuple, whole: object, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale grid): x (rows x cols, float64) quantised per block as a real quantiser does:
    scale = amax / max of the dtype, q = x / scale rounded into the dtype; int8 clips at -128 as
    asymmetric schemes do, and a few elements are set to the dtype's smallest subnormal's
    neighbourhood (fp8) or -128 (int8), so every full-range tensor holds both ends."""
    import torch  # noqa: PLC0415  lazy: torch-free collection

    qmax = QMAX[dtype_name]
    amax = _block_amax(x, block, whole)
    grid = torch.where(amax > 0, amax / qmax, torch.ones_like(amax)).to(torch.float32)
    rows, cols = x.shape
    scaled = x / _expand(grid.double(), block, whole, rows, cols)
    if dtype_name == "int8":
        q = scaled.round().clamp(-128, 127)
        if q.numel():
            picks = torch.randint(0, q.numel(), (max(1, q.numel() // 64),), generator=generator)
            q.view(-1)[picks] = -128.0
        return q.to(torch.int8), grid
    dtype = getattr(torch, FP8_DTYPES[dtype_name])
    q = scaled.clamp(-qmax, qmax)
    if q.numel():
        subnormal = torch.finfo(dtype).smallest_normal / 2
        picks = torch.randint(0, q.numel(), (max(1, q.numel() // 64),), generator=generator)
        signs = torch.randint(0, 2, picks.shape, generator=generator).double() * 2 - 1
        # An element picked twice takes its last draw, as one thread writes them: a parallel
        # write of repeated indices keeps any, and the tensors would differ by thread count.
        last = _last_of_each(picks)
        q.view(-1)[picks[last]] = subnormal * signs[last]
    return q.to(torch.float32).to(dtype), grid


def full_range_operands(
    params: CaseParams, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a M x K, b K x N column-major, scale grid of a, scale grid of b) for full_range: an
    activation with outlier channels and a weight, each quantised per its scale form's blocks."""
    import torch  # noqa: PLC0415  lazy: torch-free collection

    m, k, n = params.m, params.k, params.n
    x = torch.randn(m, k, generator=generator, dtype=torch.float64)
    if k:
        outliers = torch.randperm(k, generator=generator)[: max(1, k // 32)]
        x[:, outliers] *= OUTLIER_FACTOR
    w = torch.randn(n, k, generator=generator, dtype=torch.float64) * 0.05
    form_a, form_b = scale_form(params.scale_a), scale_form(params.scale_b)
    a, grid_a = quantise(x, params.dtype_a, form_a.block("a"), WHOLE, generator)
    if m >= 2 and k and params.dtype_a != "int8":
        # One token of subnormals only (the row with the smallest amax, so each block keeps its
        # maximum): a kernel that flushes subnormal operands zeroes that output row.
        row = int(x.abs().amax(dim=1).argmin())
        subnormal = torch.finfo(a.dtype).smallest_normal / 2
        signs = torch.randint(0, 2, (k,), generator=generator).float() * 2 - 1
        a[row] = (signs * subnormal).to(a.dtype)
    # b's blocks are over (K x N): quantise its transpose with the block transposed.
    block_b = form_b.block("b")
    bt, grid_bt = quantise(w, params.dtype_b, (block_b[1], block_b[0]), WHOLE, generator)
    return a, bt.t(), grid_a, grid_bt.t().contiguous()


def real_scale_factors(
    grid_a: torch.Tensor, grid_b: torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multipliers of real_scales for the scale grids (float32 tensors, one element per block):
    scale_a large and spread upwards, scale_b tiny and spread downwards, so every element of
    scale_a stays above 2^10 and every one of scale_b below 2^-14; a multi-element scale spans
    four decades."""
    import torch  # noqa: PLC0415  lazy: torch-free collection

    def spread(grid: torch.Tensor, sign: int) -> torch.Tensor:
        if grid.numel() <= 1:
            return torch.ones_like(grid)
        exponents = torch.rand(grid.shape, generator=generator) * 2 * DECADES * sign
        return torch.pow(10.0, exponents).float()

    return LARGE_SCALE * spread(grid_a, 1), TINY_SCALE * spread(grid_b, -1)


CANCEL_BLOCK = 128  # partners stay inside one block of K, where every scale form has one scale


def _partners(k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, second) indices along K that cancel: inside each block of CANCEL_BLOCK, element i
    of its first half with element i of its second half, so that a partial sum holds the large
    terms long before their partners cancel them (a chunked low-precision sum shows)."""
    import torch  # noqa: PLC0415  lazy: torch-free collection

    firsts, seconds = [], []
    for start in range(0, k, CANCEL_BLOCK):
        width = min(CANCEL_BLOCK, k - start)
        half = width // 2
        firsts.append(torch.arange(start, start + half))
        seconds.append(torch.arange(start + half, start + 2 * half))
    return torch.cat(firsts), torch.cat(seconds)


def cancel(a: torch.Tensor, b: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """a (M x K) and b (K x N) whose K products cancel in pairs: a's partner column repeats the
    first's and b's partner row negates the first's, for CANCEL_SHARE of the pairs; the other
    pairs keep 7/8 of a's value, so a small residual is left. Partners are half a block apart
    and never straddle a scale block (_partners)."""
    import torch  # noqa: PLC0415  lazy: torch-free collection

    k = a.shape[1]
    if k < 2:
        return a, b
    first, second = _partners(k)
    pairs = first.numel()
    af = a.to(torch.float32)
    bf = b.to(torch.float32)
    cancelled = torch.rand(pairs, generator=generator) < CANCEL_SHARE
    keep = torch.where(cancelled, torch.ones(pairs), torch.full((pairs,), 0.875))
    af[:, second] = af[:, first] * keep
    bf[second, :] = -bf[first, :]
    if a.dtype == torch.int8:
        return af.round().clamp(-127, 127).to(torch.int8), bf.round().clamp(-127, 127).to(
            torch.int8
        ).t().contiguous().t()
    return af.to(a.dtype), bf.to(b.dtype).t().contiguous().t()


def power_of_two_at_most(ratio: float) -> float:
    """The largest power of two not above `ratio` (> 0)."""
    return 2.0 ** math.floor(math.log2(ratio))


# Non-finite operand elements: the value, in a[0, 0]; "_b": in b[-1, -1] instead; "_ab": in both.
SPECIAL_OPERANDS = ("none", "nan", "inf", "nan_b", "inf_b", "nan_ab", "inf_ab")


def special_operand_of(params: CaseParams) -> tuple[str, str]:
    """(value, operands) of a case's non-finite operand elements, or ("none", ""): `special_operand`
    is the value ("nan", "inf": in a[0, 0]), with "_b" when it sits in b[-1, -1] instead, "_ab"
    when in both."""
    value, _, operands = str(params.special_operand).partition("_")
    return value, "" if value == "none" else operands or "a"
