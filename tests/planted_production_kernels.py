"""Kernels that are right on synthetic data and wrong on production data, each in one way.

Each computes like torch._scaled_mm in float32 (every scale form, block scales included) with one
deliberate bug that only the values, layouts or calls of production show: full-range operands,
real quantiser scales, outputs near their dtype's limits, special values in scale_b, strided
views, a second call. `correct` is the same computation without a bug.
"""

import torch
from planted_kernels import _expand

E4M3_EXPONENT_15 = 256.0  # e4m3fn values from here to 448 have the all-ones exponent field
FP16_MAX = 65504.0
FP16_SMALLEST_NORMAL = 2.0**-14


def _kernel(a, b, scale_a, scale_b, bias, out_dtype, *, read_a=None, read_b=None, scales=None, epilogue=None):
    tokens = a.reshape(a.shape[:-1].numel(), a.shape[-1])
    m, k = tokens.shape
    n = b.shape[-1]
    left = read_a(tokens) if read_a else tokens.to(torch.float32)
    right = read_b(b) if read_b else b.to(torch.float32)
    sa, sb = _expand(scale_a, m, k), _expand(scale_b, k, n)
    if scales:
        sa, sb = scales(sa, sb, scale_b)
    out = (left * sa) @ (right * sb)
    if bias is not None:
        out = out + bias.to(torch.float32)
    if epilogue:
        out = epilogue(out, scale_a, scale_b)
    return out.to(out_dtype).reshape(*a.shape[:-1], n)


def correct(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return _kernel(a, b, scale_a, scale_b, bias, out_dtype)


def clamps_at_fnuz_max(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Clamps fp8 operands at 240, e4m3fnuz's maximum, whatever their dtype."""
    clamp = lambda t: t.to(torch.float32).clamp(-240.0, 240.0)  # noqa: E731
    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, read_a=clamp, read_b=clamp)


def exponent_15_is_nan(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Decodes e4m3fn's all-ones exponent field as NaN (the IEEE-like e4m3 rule)."""

    def decode(t):
        values = t.to(torch.float32)
        if t.dtype != torch.float8_e4m3fn:
            return values
        return torch.where(values.abs() >= E4M3_EXPONENT_15, torch.full_like(values, float("nan")), values)

    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, read_a=decode, read_b=decode)


def clamps_output_to_fp16_range(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Clamps every output to +-65504 (an fp16 epilogue reused for bf16 and fp32)."""
    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, epilogue=lambda out, *_: out.clamp(-FP16_MAX, FP16_MAX))


def flushes_tiny_scales(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Flushes scales below fp16's smallest normal (2^-14) to zero."""

    def flush(sa, sb, _):
        return (
            torch.where(sa.abs() < FP16_SMALLEST_NORMAL, torch.zeros_like(sa), sa),
            torch.where(sb.abs() < FP16_SMALLEST_NORMAL, torch.zeros_like(sb), sb),
        )

    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, scales=flush)


def ignores_scale_b_sign(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, scales=lambda sa, sb, _: (sa, sb.abs()))


def nan_for_pruned_channel(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """NaN in an output channel whose per-channel weight scale is zero (a pruned channel)."""

    def epilogue(out, _, scale_b):
        if scale_b.numel() <= 1:
            return out
        zero = _expand(scale_b, 1, out.shape[-1]) == 0
        return torch.where(zero.expand_as(out), torch.full_like(out, float("nan")), out)

    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, epilogue=epilogue)


def nan_for_zero_scale_a(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """NaN where scale_a is zero (it divides by the activation scale on the way)."""

    def epilogue(out, scale_a, _):
        rows = _expand(scale_a, out.shape[0], 1)
        return torch.where((rows == 0).expand_as(out), torch.full_like(out, float("nan")), out)

    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, epilogue=epilogue)


def ignores_scale_a_sign(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return _kernel(a, b, scale_a, scale_b, bias, out_dtype, scales=lambda sa, sb, _: (sa.abs(), sb))


_BUFFERS: dict = {}


def one_output_buffer(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Hands every caller the same preallocated output buffer per shape (a CUDA-graph habit)."""
    out = _kernel(a, b, scale_a, scale_b, bias, out_dtype)
    key = (tuple(out.shape), out.dtype, out.device)
    if key not in _BUFFERS:
        _BUFFERS[key] = torch.empty_like(out)
    return _BUFFERS[key].copy_(out)


def reads_a_with_pitch_k(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Reads `a` as if it were contiguous from the start of its storage (pitch K, offset 0)."""
    k = a.shape[-1]
    dense = a.as_strided(a.shape, torch.empty(a.shape, device="meta").stride(), 0)
    del k
    return _kernel(dense, b, scale_a, scale_b, bias, out_dtype)


def first_column_block_of_scale_b(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Uses column block 0 of a 128x128 block scale_b for every column block."""
    n = b.shape[-1]
    if scale_b.dim() == 2 and scale_b.shape[1] == -(-n // 128) and scale_b.shape[1] > 1 and scale_b.shape[1] != n:
        scale_b = scale_b[:, :1].expand(-1, scale_b.shape[1])
    return _kernel(a, b, scale_a, scale_b, bias, out_dtype)
