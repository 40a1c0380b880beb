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


_PACKED: dict = {}
_WORKSPACES: dict = {}


def _k_used(n, k):
    return _PACKED.setdefault(n, k)


def k_split_keyed_on_n(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A split-K plan cached on N alone, as a layer's output width: a later call at the same N and
    a larger K reduces only the first call's K (its tail dropped)."""
    k = min(a.shape[-1], _k_used(b.shape[-1], a.shape[-1]))
    return _dequant_mm(a[..., :k], b[:k], scale_a, scale_b, bias, out_dtype)


def output_buffer_per_shape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """An output workspace cached per (M, N) and reused: made in the first call's dtype, so a
    call with another output dtype at that shape is written into the wrong dtype."""
    tokens = a.flatten(0, -2)
    result = _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype).reshape(tokens.shape[0], b.shape[-1])
    buffer = _WORKSPACES.setdefault((tokens.shape[0], b.shape[-1]), result)
    return buffer.copy_(result).clone().reshape(*a.shape[:-1], b.shape[-1])


def scale_form_keyed_on_shape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A dispatch choice cached per (K, N): whether scale_a is one value. A later case at that
    weight shape with a rowwise scale_a gets the per-tensor path (its first row's scale only);
    no single case calls with two scale forms, so only the order of cases shows it."""
    per_tensor = _chosen_epilogue(("form", a.shape[-1], b.shape[-1]), scale_a.numel() == 1)
    return _dequant_mm(a, b, scale_a.reshape(-1)[:1] if per_tensor else scale_a, scale_b, bias, out_dtype)


def stale_epilogue_per_weight_shape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A fused epilogue chosen on the first call at a (K, N), its bias captured: a later case
    there without a bias gets the first's added, one with a bias after a case without has it
    dropped: the sequence's step that adds or drops the bias shows it within one case."""
    chosen = _EPILOGUES.setdefault(("stale", a.shape[-1], b.shape[-1]), bias)
    used = None if chosen is None else bias if bias is not None else chosen
    return _dequant_mm(a, b, scale_a, scale_b, used, out_dtype)


_SEEN: dict = {}


def refuses_after_another_n(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A scale workspace sized on the first call's N: a later call at another N is refused with
    torch's own words, though as a first call that N is fine."""
    first = _SEEN.setdefault(("n", a.shape[-1]), b.shape[-1])
    if b.shape[-1] != first:
        raise ValueError("Invalid scaling configuration: the workspace holds another N")
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def exits_on_the_first_shape_again(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Ends its process when the first shape comes back after another (a freed workspace)."""
    import os

    shapes = _SEEN.setdefault("shapes", [])
    shape = (a.shape[-1], b.shape[-1])
    if shapes and shape == shapes[0] and shapes[-1] != shape:
        os._exit(3)
    shapes.append(shape)
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def scale_buffer_per_weight_shape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """An epilogue made per (K, N) for the first call's form of scale_a (one value, or one per
    row): a later case at that weight shape with the other form gets the first row's scale only,
    or is refused. No case's call sequence changes the scale form, so only the order of cases
    shows it (either order)."""
    per_tensor = _EPILOGUES.setdefault(("scale", a.shape[-1], b.shape[-1]), scale_a.numel() == 1)
    if per_tensor and scale_a.numel() != 1:
        scale_a = scale_a.reshape(-1)[:1]
    elif not per_tensor and scale_a.numel() == 1:
        raise ValueError("the epilogue holds one scale per row")
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def forget():
    """Empty every cache above (tests that run these kernels in their own process)."""
    for cache in (_OUT_DTYPES, _EPILOGUES, _PACKED, _WORKSPACES, _SEEN):
        cache.clear()
