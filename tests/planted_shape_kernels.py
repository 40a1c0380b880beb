"""Kernels wrong only at a shape class past what a matrix usually lists: M past a launch grid's
65535 limit, a K % 512 tail past 4096, N % 8 != 0. `correct_shapes` is their correct twin."""

from planted_kernels import _dequant_blocks

GRID_LIMIT = 65535


def correct_shapes(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)


def rows_past_grid_limit(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # A grid of one program per row: rows past the grid's limit are never written.
    out = _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)
    rows = out.reshape(-1, out.shape[-1])
    if rows.shape[0] > GRID_LIMIT:
        rows[GRID_LIMIT:] = 0
    return rows.reshape(out.shape)


def drops_k_tail_past_4096(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # A split-K of 512-wide slices past 4096: the partial last slice is not summed.
    k = a.shape[-1]
    k_used = k - k % 512 if k > 4096 else None
    return _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype, k_used=k_used)


def zero_n_vector_tail(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    # 8-wide vector stores: the columns of a partial last vector are never written.
    out = _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)
    n = out.shape[-1]
    if n % 8:
        out = out.clone()
        out[..., n - n % 8 :] = 0
    return out
