"""Kernels for the severity tiers, fast on a CPU: compiled paths that accept what eager refuses
(with the reference's result or a wrong one), and compiled paths that raise otherwise than eager.

A case is invalid input for them through a declaration its matrix entry adds (k_multiple: 64 at
K = 32: outside the declared support), or through params purpose "boundary".
"""

import torch


def _compiling() -> bool:
    check = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling
    return check()


def _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype):
    tokens = a.reshape(-1, a.shape[-1])
    out = (tokens.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], b.shape[-1])


def _eager_reason(scale_b) -> str:
    """A refusal worded after scale_b's form: three forms, three reasons."""
    if scale_b.dim() == 1:
        return "a one-dimensional scale_b is refused"
    if scale_b.numel() == 1:
        return "a single-element matrix scale_b is refused"
    return "a per-column scale_b is refused"


def lenient_right(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Eager refuses; the compiled path computes the reference's result (LENIENT on invalid input)."""
    if not _compiling():
        raise ValueError(_eager_reason(scale_b))
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def lenient_wrong(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Eager refuses; the compiled path forgets scale_b (LENIENT_MISMATCH)."""
    if not _compiling():
        raise ValueError(_eager_reason(scale_b))
    return _dequant_mm(a, b, scale_a, torch.ones_like(scale_b), bias, out_dtype)


def parity_one_lowering(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Eager refuses with a reason per scale_b form; the compiled path always fails one way, like
    an Inductor lowering assertion (ERROR_PARITY on valid input, BOUNDARY_PARITY on invalid)."""
    if _compiling():
        torch._check(False, lambda: "lowering: expect scale_a and scale_b to be either both scalars or both matrices")
    raise ValueError(_eager_reason(scale_b))
