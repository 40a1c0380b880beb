"""Kernels that each break one check of the call contract (pytest_scaledmm/verdict/call_contract.py,
the value and input checks of every call) while their values match the reference, and `correct`,
their twin that breaks none.

The calls a process makes are counted in `_CALLS` (under torch.compile Dynamo replays the count
and guards on it: each call compiles anew, fullgraph too): a kernel wrong only "on a later call"
is right on the first call of a process, as a fresh replay's first call is.
"""

import torch
from planted_kernels import _dequant_mm

_CALLS = [0]


def _later_call() -> int:
    """This process's calls so far, this one included; 1 on the first."""
    _CALLS[0] += 1
    return _CALLS[0]


def correct(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def column_major(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right values, column-major: a kernel that computes the transposed problem (swap-AB) and
    hands back the transpose's view."""
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype).mT.contiguous().mT


def padded_rows(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right values in a view of a wider buffer, each row padded to a multiple of 64 elements (a
    vector-store alignment), returned without the copy that makes it dense."""
    out = _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)
    n = out.shape[-1]
    wide = torch.zeros(*out.shape[:-1], n + 64 - n % 64, dtype=out.dtype, device=out.device)
    wide[..., :n] = out
    return wide[..., :n]


def _rescaled_after_first(scale_a):
    # A kernel that folds its scale into a cached buffer in place once it has run: the caller's.
    if _later_call() > 1:
        scale_a.mul_(2.0)


def writes_scale_a_later(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right values; from the second call of its process on, it writes into scale_a afterwards."""
    out = _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)
    _rescaled_after_first(scale_a)
    return out


def _split_k_jitter(out):
    # An fp32 output reduced with atomics on alternate calls from the third on: one ulp apart.
    if _later_call() > 2 and _CALLS[0] % 2 and out.dtype == torch.float32:
        return torch.nextafter(out, torch.full_like(out, float("inf")))
    return out


def nondeterministic_later(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Within the reference's bound every time, but from its process's third call on two calls
    with the same inputs give an fp32 output one ulp apart."""
    return _split_k_jitter(_dequant_mm(a, b, scale_a, scale_b, bias, out_dtype))


def nan_tail_rows(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """NaN in the rows past the first 16-row tile: a tail tile that reads uninitialised memory."""
    out = _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)
    if out.dtype.is_floating_point and out.shape[0] > 16:
        out = out.clone()
        out[16:] = float("nan")
    return out


def _as_cached(out, out_dtype):
    # A dispatch cache keyed on the shape alone hands a later call the first call's fp32 kernel.
    return out.to(torch.float32) if _later_call() > 1 else out.to(out_dtype)


def float32_on_later_calls(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right values; from its process's second call on it returns float32 whatever out_dtype."""
    return _as_cached(_dequant_mm(a, b, scale_a, scale_b, bias, torch.float32), out_dtype)
