"""Kernels for the declaration hints (tests/test_declaration_hints.py): a plain wrapper of
torch._scaled_mm that passes every input on as given, so that torch refuses what it refuses;
one that refuses the same inputs in words of its own; one that casts its scales as callers
should and returns twice the product."""

import torch


def plain(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum)


def own_words(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    if scale_a.dtype != torch.float32 or scale_b.dtype != torch.float32:
        raise ValueError("own_words takes fp32 scales only")
    return plain(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum)


def doubled(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = plain(a, b, scale_a.float(), scale_b.float(), bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum)
    return out * 2
