"""Kernels whose state outlives a call: right on every call a single case makes (in a fresh
process, alone), wrong only on a later case that meets what an earlier one left behind. Each keys
a cache on part of what decides its result; `keyed_on_everything` is their correct twin.

Dynamo traces the lookups (a global dict's setdefault) and guards on the dict, so the eager and
the compiled side share one cache, as a kernel library's Python dispatch would.
"""

from planted_kernels import _dequant_mm

_OUT_DTYPES: dict = {}
_EPILOGUES: dict = {}


def _chosen_out_dtype(key, out_dtype):
    return _OUT_DTYPES.setdefault(key, out_dtype)


def _chosen_epilogue(key, has_bias):
    return _EPILOGUES.setdefault(key, has_bias)


def out_dtype_keyed_on_shape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A tile config cached per (K, N), the output dtype with it: a later case at that weight
    shape with another out_dtype gets the first one's."""
    dtype = _chosen_out_dtype((a.shape[-1], b.shape[-1]), out_dtype)
    return _dequant_mm(a, b, scale_a, scale_b, bias, dtype)


def epilogue_keyed_on_weight_shape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A fused epilogue chosen on the first call at a (K, N): chosen without a bias, a later
    case's bias is dropped."""
    with_bias = _chosen_epilogue((a.shape[-1], b.shape[-1]), bias is not None)
    return _dequant_mm(a, b, scale_a, scale_b, bias if with_bias else None, out_dtype)


def keyed_on_everything(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """The twin: its cache keys on everything the choice depends on."""
    key = (a.shape[-1], b.shape[-1], out_dtype, bias is not None)
    dtype = _chosen_out_dtype(key, out_dtype)
    with_bias = _chosen_epilogue(key, bias is not None)
    return _dequant_mm(a, b, scale_a, scale_b, bias if with_bias else None, dtype)
