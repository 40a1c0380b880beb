"""Kernels that fail the same way in two releases, only worse in the second: one side that starts
raising behind an old mismatch of the other, one NaN becoming all NaN, one element off becoming
every element off. Same class and signature each pair; only each side's outcome and the counts
tell them apart."""

import torch
from planted_kernels import _compiling, correct


def eager_off(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # Eager's epilogue is wrong, the compiled graph right (torchao's int8 fp16 epilogue was so).
    out = correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
    return out if _compiling() else out * 1.1


def eager_off_compile_raises(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    if _compiling():
        raise RuntimeError("lowering of the fused epilogue failed")
    return correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype) * 1.1


def one_nan(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
    return torch.where(torch.arange(out.numel()).reshape(out.shape) == 0, torch.nan, out).to(out_dtype)


def all_nan(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return torch.full_like(correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype), torch.nan)


def one_off(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
    first = torch.arange(out.numel()).reshape(out.shape) == 0
    return torch.where(first, out * 1.1, out).to(out_dtype)


def all_off(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # 10 % up and down in turn: every element off, by no one constant factor.
    out = correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
    turn = torch.arange(out.numel()).reshape(out.shape) % 2
    return (out * (1.1 - 0.2 * turn)).to(out_dtype)


def eager_off_compile_raises_otherwise(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # The same error type as eager_off_compile_raises, another message: another failure.
    if _compiling():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype) * 1.1


_FIRST_INPUTS: dict = {}


def eager_off_later_calls_raise(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # eager_off, and eager raises on the serving loop's other inputs (a cache keyed on the first
    # call's data): only the later calls tell it from eager_off.
    out = correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
    if _compiling():
        return out
    first = _FIRST_INPUTS.setdefault(tuple(a.shape), float(a.float().sum()))
    if float(a.float().sum()) != first:
        raise RuntimeError("cached workspace of another batch")
    return out * 1.1


def eager_exits(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # A CRASH: eager ends the process; the compiled side is right.
    if not _compiling():
        raise SystemExit(3)
    return correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)


def eager_exits_compile_raises(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    if not _compiling():
        raise SystemExit(3)
    raise RuntimeError("lowering of the fused epilogue failed")
