"""Kernels for the compile-path tests: correct at the case's own M, and either specialising on M
under torch.compile (Dynamo guards on a Python branch and recompiles) or wrong at another M."""

import torch


def _compiling() -> bool:
    check = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling
    return check()


def _product(a, b, scale_a, scale_b, bias, out_dtype):
    out = (a.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


def branches_on_m(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right everywhere, but a Python branch on M makes Dynamo guard on it: a recompile."""
    out = _product(a, b, scale_a, scale_b, bias, out_dtype)
    if a.shape[0] > 20:
        out = out + 0
    return out


def wrong_beyond_m(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Right for M <= 20 (every case's own M in these tests), off by half beyond in the compiled
    graph only (the eager call at another M is right)."""
    out = _product(a, b, scale_a, scale_b, bias, out_dtype)
    if a.shape[0] > 20 and _compiling():
        out = out * 1.5
    return out


def fused_epilogue_wrong_for_1d_pair_bias_fp16(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A 4-way epilogue bug: only compiled, with a 1-D scale on both sides, a bias and an fp16
    output, the bias is added twice (each alone, and every pair and triple of them, is right)."""
    out = _product(a, b, scale_a, scale_b, bias, out_dtype)
    if _compiling() and scale_a.dim() == scale_b.dim() == 1 and bias is not None and out_dtype == torch.float16:
        out = out + bias
    return out
