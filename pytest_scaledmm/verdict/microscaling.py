"""Microscaled operands and scales (MX, NVFP4): how they are drawn and what they are worth in
float64.

- fp4 e2m1 operands (torch.float4_e2m1fn_x2) pack two values per byte along the contiguous
  dim, the first in the low nibble (torchao's pack_uint4); a nibble is a sign bit and one of
  E2M1_VALUES.
- e8m0 scales are bare exponents: 2^(e - 127), 255 is NaN.
- e4m3 scales (NVFP4's block scales) and fp32 ones convert to float64 exactly.

A two-level scale (NVFP4) is the pair (block scales, fp32 global scale); its multiplier is
their product. torch only; no imports from this package (repro scripts embed it).
"""

from __future__ import annotations

import torch

# The magnitudes of e2m1 codes 0-7; codes 8-15 are their negatives.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E8M0_BIAS = 127
E8M0_NAN = 255
FP4_TORCH_NAMES = {"fp4e2m1": "float4_e2m1fn_x2"}


def is_fp4(t: torch.Tensor) -> bool:

    packed = getattr(torch, "float4_e2m1fn_x2", None)
    return packed is not None and t.dtype == packed


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes 0-15 (rows x even cols) as fp4 e2m1 pairs (rows x cols/2), first in the low nibble."""

    codes = codes.to(torch.uint8)
    return (codes[..., ::2] | (codes[..., 1::2] << 4)).view(torch.float4_e2m1fn_x2)


def fp4_codes_to_float64(codes: torch.Tensor) -> torch.Tensor:
    """float64 values of uint8 e2m1 codes 0-15."""

    magnitude = torch.tensor(E2M1_VALUES, dtype=torch.float64)[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -magnitude, magnitude)


def _unpack_last(packed: torch.Tensor) -> torch.Tensor:

    raw = packed.contiguous().view(torch.uint8)
    codes = torch.stack((raw & 0xF, raw >> 4), dim=-1).reshape(*raw.shape[:-1], raw.shape[-1] * 2)
    return fp4_codes_to_float64(codes)


def operand_values(t: torch.Tensor) -> torch.Tensor:
    """An operand in float64 on the CPU. A 2-D fp4 operand is unpacked along its contiguous dim
    (a: M x K/2 row-major gives M x K; b: K/2 x N column-major gives K x N)."""

    t = t.detach().to("cpu")
    if not is_fp4(t):
        return t.to(torch.float64)
    if t.dim() == 2 and t.stride(-1) != 1:
        return _unpack_last(t.t()).t()
    return _unpack_last(t)


def scale_values(scale: torch.Tensor | tuple[torch.Tensor, ...] | list[torch.Tensor]) -> torch.Tensor:
    """A scale's multipliers in float64 on the CPU: e8m0 as powers of two from its bits, a
    two-level scale as its block scales times its global scale."""

    if isinstance(scale, (tuple, list)):
        values = scale_values(scale[0])
        for level in scale[1:]:
            values = values * scale_values(level).reshape(())
        return values
    scale = scale.detach().to("cpu")
    e8m0 = getattr(torch, "float8_e8m0fnu", None)
    if e8m0 is not None and scale.dtype == e8m0:
        bits = scale.view(torch.uint8).to(torch.float64)
        return torch.where(bits == E8M0_NAN, torch.full_like(bits, float("nan")), torch.exp2(bits - E8M0_BIAS))
    return scale.to(torch.float64)


def draw_fp4_operand(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    """rows x cols fp4 values (cols even), packed to rows x cols/2; every code equally likely."""

    if cols % 2:
        raise ValueError(f"fp4 operands pack pairs along K: K = {cols} is odd")
    return pack_fp4(torch.randint(0, 16, (rows, cols), generator=generator, dtype=torch.uint8))


def draw_block_scale(scale_dtype: str, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Block scales of a microscaling form: e8m0 exponents 2^-2 .. 2^2, or e4m3 values spread
    over several powers of two (exact in e4m3)."""

    if scale_dtype == "e8m0":
        bits = torch.randint(E8M0_BIAS - 2, E8M0_BIAS + 3, shape, generator=generator, dtype=torch.uint8)
        return bits.view(torch.float8_e8m0fnu)
    exponents = torch.randint(-2, 3, shape, generator=generator)
    values = torch.pow(2.0, exponents.float()) * (1 + torch.randint(0, 4, shape, generator=generator).float() / 8)
    return values.to(torch.float8_e4m3fn)


def draw_global_scale(generator: torch.Generator) -> torch.Tensor:
    """NVFP4's second-level fp32 per-tensor scale (0-D)."""

    return torch.pow(2.0, torch.randint(-3, 2, (), generator=generator).float()) * 1.25
