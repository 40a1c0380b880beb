"""Kernels that are wrong in ways only the numbers show: each runs the same in eager and compiled
code, so only the float64 reference (not compiled-vs-eager parity) can catch it. They follow
the kernel contract of torch._scaled_mm and compute in float32, like tests/planted_kernels.py.
"""

import torch

SPLIT_K_FROM = 1024  # where the split-K kernels below switch paths


def _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype, factor=1.0):
    tokens = a.reshape(-1, a.shape[-1])
    out = (tokens.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    if factor != 1.0:
        out = out * factor
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], b.shape[-1])


def ignores_scale_sign(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Dequantises with |scale| (a scale stored as a magnitude and an exponent, sign dropped):
    right for every positive scale, wrong for a negative one."""
    return _dequant_mm(a, b, scale_a.abs(), scale_b.abs(), bias, out_dtype)


def nan_on_zero_scale(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Pre-scales `a` by scale_a**2 for range and divides one scale_a back out of the result:
    right for every non-zero scale, 0/0 = NaN for a zero one."""
    tokens = a.reshape(-1, a.shape[-1])
    out = (tokens.to(torch.float32) * (scale_a * scale_a)) @ (b.to(torch.float32) * scale_b) / scale_a
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], b.shape[-1])


def zeros_at_large_k(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """From K = 1024 on, a split-K path that never writes its output: zeros."""
    if a.shape[-1] >= SPLIT_K_FROM:
        return torch.zeros(*a.shape[:-1], b.shape[-1], dtype=out_dtype, device=a.device)
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def half_the_answer(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """From K = 1024 on, a split-K path that averages its two partial sums instead of adding
    them: 0.5x the product."""
    factor = 0.5 if a.shape[-1] >= SPLIT_K_FROM else 1.0
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype, factor)


def _uniform(error: float):
    def kernel(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
        return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype, 1.0 + error)

    kernel.__doc__ = f"Every output {error:.0%} too large (a scale folded in with a wrong constant)."
    return kernel


uniform_error_1pct = _uniform(0.01)
uniform_error_2pct = _uniform(0.02)
uniform_error_5pct = _uniform(0.05)
