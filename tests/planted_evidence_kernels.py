"""Kernels whose evidence a first problem used to hide: a compiled side that kills its process
behind an eager side that is right or off, and an output of the wrong dtype whose values are right
or far off (tests/test_evidence.py)."""

import os

import torch


def _right(a, b, scale_a, scale_b, bias, out_dtype):
    out = (a.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    return out if bias is None else out + bias.to(torch.float32)


@torch.library.custom_op("planted_evidence::abort_when_run", mutates_args=())
def abort_when_run(x: torch.Tensor) -> torch.Tensor:
    """Kills its process when the compiled code runs it (a segfaulting generated kernel, say)."""
    os.abort()


@abort_when_run.register_fake
def _(x):
    return torch.empty_like(x)


def compiled_aborts(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right eagerly; the compiled code kills its process. Traced, the op enters the graph."""
    out = _right(a, b, scale_a, scale_b, bias, out_dtype).to(out_dtype)
    return abort_when_run(out) if torch.compiler.is_compiling() else out


def compiled_aborts_eager_off(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """The same crash, and the eager side now 25 % off."""
    out = (_right(a, b, scale_a, scale_b, bias, out_dtype) * 1.25).to(out_dtype)
    return abort_when_run(out) if torch.compiler.is_compiling() else out


def fp32_out(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right values, in fp32 whatever out_dtype asks."""
    return _right(a, b, scale_a, scale_b, bias, out_dtype)


def fp32_out_far_off(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """fp32 as before, and the values 1000x off."""
    return _right(a, b, scale_a, scale_b, bias, out_dtype) * 1000
