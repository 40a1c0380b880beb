"""Small kernels written to produce each outcome class on any device, fast on a CPU.

They follow the kernel contract of torch._scaled_mm but compute in float32, so they run where
fp8 matmuls do not.
"""

import torch


def _compiling() -> bool:
    check = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling
    return check()


def _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype):
    out = (a.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


def correct(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def ignores_scale_b(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: forgets one side's scale, eager and compiled alike."""
    return _dequant_mm(a, b, scale_a, torch.ones_like(scale_b), bias, out_dtype)


def asserts_rank_under_compile(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """COMPILE_ONLY_ERROR: like Inductor's lowering, asserts equal scale ranks only when compiled."""
    if _compiling():
        torch._check(scale_a.dim() == scale_b.dim(), lambda: "scale ranks differ")
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def refuses_only_in_eager(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """ERROR_PARITY: eager checks a constraint that the compiled path skips."""
    if not _compiling():
        raise ValueError("M must be a multiple of 16")
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def refuses_everywhere(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """UNSUPPORTED: an op that refuses these shapes in eager and in its meta function alike."""
    return torch.mm(a.to(torch.float32), b.to(torch.float32)[1:]).to(out_dtype)


def forces_eager(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """FALLBACK: a library that sets the force_eager stance on first use; torch.compile then
    returns eager results silently, fullgraph or not."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is not None:
        set_stance("force_eager")
    else:  # torch < 2.6
        torch._dynamo.config.disable = True
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)
