"""Kernels that hand the activation to a row-major GEMM with its leading dimension taken from the
strides, as C++ wrappers of BLAS and oneDNN do.

A row-major GEMM requires lda >= K; oneDNN's int8 GEMM silently rejects a call that breaks it and
leaves the output as it was (pytorch#195066: Inductor reshapes a single token to [1, K] with
stride 0 in its size-1 dimension, and torch._int_mm on CPU returned garbage). The stride of a
size-1 dimension is arbitrary, so `lda_from_stride` is wrong only on such an activation;
`lda_from_shape` takes K where the row dimension has size 1 (the upstream fix) and is right.
Both compute like torch._scaled_mm in float32, every scale form.
"""

import torch
from planted_kernels import _expand


def _row_major_gemm(a, b, scale_a, scale_b, bias, out_dtype, lda):
    tokens = a.flatten(0, -2)
    m, k = tokens.shape
    n = b.shape[-1]
    out = torch.zeros(m, n, dtype=torch.float32, device=a.device)  # the caller's output buffer
    if lda >= k:  # the GEMM's own descriptor check: a call with lda < K leaves `out` untouched
        left = tokens.to(torch.float32) * _expand(scale_a, m, k)
        out = left @ (b.to(torch.float32) * _expand(scale_b, k, n))
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], n)


def lda_from_stride(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """lda = the token dimension's stride, even where that dimension has size 1."""
    return _row_major_gemm(a, b, scale_a, scale_b, bias, out_dtype, a.stride(-2))


def lda_from_shape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """lda = K where the token dimension has size 1 (its stride means nothing there)."""
    lda = a.stride(-2) if a.shape[-2] > 1 else a.shape[-1]
    return _row_major_gemm(a, b, scale_a, scale_b, bias, out_dtype, lda)
