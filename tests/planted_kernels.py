"""Small kernels written to produce each outcome class on any device, fast on a CPU.

They follow the kernel contract of torch._scaled_mm but compute in float32, so they run where
fp8 matmuls do not. `correct` (and `correct_custom_op`) is the reference implementation: it
passes every configuration the planted bugs are tested with. Each other kernel carries one
deliberate bug of a kind found in real scaled-mm kernels and wrappers.
"""

import weakref

import torch


def _compiling() -> bool:
    check = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling
    return check()


def _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype):
    tokens = a.flatten(0, -2)  # a 3-D activation is B x T tokens (reshape(-1, K) raises at K = 0)
    out = (tokens.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], b.shape[-1])


def _expand(scale, rows: int, cols: int):
    """A scale as a float32 multiplier of an operand of rows x cols: one element, a row or column
    of them, or 1x128 / 128x128 blocks (the last block of a dimension may be partial)."""
    s = scale.to(torch.float32)
    if s.dim() < 2:
        return s.reshape(1, 1)
    for dim, size in ((0, rows), (1, cols)):
        count = s.shape[dim]
        if count not in (1, size):
            block = 128 if count == -(-size // 128) else -(-size // count)
            s = s.repeat_interleave(block, dim=dim).narrow(dim, 0, size)
    return s


def _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype, k_used=None):
    """Like _dequant_mm, for every scale form (block scales too); only the first `k_used` products
    of each dot are summed when given."""
    tokens = a.flatten(0, -2).to(torch.float32)
    m, k = tokens.shape
    n = b.shape[-1]
    left = tokens * _expand(scale_a, m, k)
    right = b.to(torch.float32) * _expand(scale_b, k, n)
    if k_used is not None:
        left, right = left[:, :k_used], right[:k_used]
    out = left @ right
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], n)


def correct(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


# -- the spine's outcome classes ------------------------------------------------------------------


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
    """REFUSED: an op that refuses these shapes in eager and in its meta function alike, inside
    the support the kernel declares (UNSUPPORTED where a declaration excludes the case)."""
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


# -- planted bugs of real kernels and wrappers ----------------------------------------------------


def rows_on_wrong_axis(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: the per-token scale of `a` is applied per output column (invisible for
    tensorwise scales and whenever it broadcasts, i.e. M == N)."""
    out = (a.to(torch.float32) @ b.to(torch.float32)) * scale_a.reshape(1, -1) * scale_b
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


def swapped_scales(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: dequantises `a` with scale_b and `b` with scale_a (tensorwise scales commute,
    rowwise ones do not)."""
    return _dequant_mm(a, b, scale_b.reshape(-1, 1), scale_a.reshape(1, -1), bias, out_dtype)


def drops_bias(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: the bias epilogue is missing."""
    return _dequant_mm(a, b, scale_a, scale_b, None, out_dtype)


def ignores_out_dtype(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: always returns float32, whatever out_dtype asks for."""
    return _dequant_mm(a, b, scale_a, scale_b, bias, torch.float32)


def wrong_only_compiled(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH on the compiled side only: a compile-time fast path that forgets scale_b."""
    if _compiling():
        scale_b = torch.ones_like(scale_b)
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def refuses_m1(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """REFUSED: refuses a single token (decode with batch 1) in eager and compiled alike while
    declaring nothing, so M = 1 is inside its support; declared with min_m: 2, UNSUPPORTED."""
    if a.reshape(-1, a.shape[-1]).shape[0] == 1:
        raise ValueError("kernel needs at least 2 tokens")
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def flattens_without_reshape(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH (shape): flattens a 3-D activation to tokens and never reshapes the output back."""
    tokens = a.reshape(-1, a.shape[-1])
    return _dequant_mm(tokens, b, scale_a, scale_b, bias, out_dtype)


def reads_scale_from_storage_start(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH under offset and non-contiguous scale views: reads the scales as if they were
    contiguous from the start of their storage, as a kernel handed only data_ptr of the base
    does (tensor-parallel slices then read another rank's scales)."""

    def from_start(scale):
        strides, step = [], 1
        for size in reversed(scale.shape):
            strides.insert(0, step)
            step *= size
        return torch.as_strided(scale, scale.shape, strides, 0)

    return _dequant_mm(a, b, from_start(scale_a), from_start(scale_b), bias, out_dtype)


def compiled_scales_after_matmul(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH under special scale values: compiled applies the scales after the matmul (as a
    fused epilogue does), eager before it. Equal for finite scales; with an inf scale eager gives
    NaN (inf * 0 terms meet -inf) where compiled gives inf."""
    if not _compiling():
        return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)
    tokens = a.reshape(-1, a.shape[-1])
    out = (tokens.to(torch.float32) @ b.to(torch.float32)) * scale_a * scale_b
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], b.shape[-1])


def first_token_scale(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only for a per-token scale_a (M x 1) with M > 1: every token gets the first
    token's scale, as an epilogue that loads scale_a once per tile instead of once per row.
    Right for one-element scales, for M = 1, and for blocks along K."""
    if scale_a.dim() == 2 and scale_a.shape[0] > 1 and scale_a.shape[1] == 1:
        scale_a = scale_a[:1].expand(scale_a.shape[0], 1)
    return _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)


def drops_k_tail(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only when K has a tail: sums whole blocks of 128 along K and drops the partial last
    one, as a split-K loop without its remainder; K = 128 or a multiple of it is right."""
    k = a.shape[-1]
    return _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype, k_used=k // 128 * 128)


# -- custom ops: torch.library.opcheck runs on them ------------------------------------------------


def _custom_op(name: str, fake):
    """Define planted::<name> once per process (pytester re-imports this module) and return its
    OpOverload, the object a user hands to the matrix."""
    qualname = f"planted::{name}"
    if not hasattr(torch.ops.planted, name):

        @torch.library.custom_op(qualname, mutates_args=())
        def op(
            a: torch.Tensor,
            b: torch.Tensor,
            scale_a: torch.Tensor,
            scale_b: torch.Tensor,
            bias: torch.Tensor | None = None,
            out_dtype: torch.dtype | None = None,
            use_fast_accum: bool = False,
        ) -> torch.Tensor:
            return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)

        op.register_fake(fake)
    return getattr(torch.ops.planted, name).default


def _right_fake(a, b, scale_a, scale_b, bias=None, out_dtype=None, use_fast_accum=False):
    return a.new_empty((*a.shape[:-1], b.shape[-1]), dtype=out_dtype)


def _transposed_fake(a, b, scale_a, scale_b, bias=None, out_dtype=None, use_fast_accum=False):
    return a.new_empty((b.shape[-1], a.shape[0]), dtype=out_dtype)


def _rank_asserting_fake(a, b, scale_a, scale_b, bias=None, out_dtype=None, use_fast_accum=False):
    # What Inductor's scaled-mm lowering asserts for a 0-D scale against a [1] one.
    assert scale_a.dim() == scale_b.dim(), f"scale ranks differ: {scale_a.dim()} vs {scale_b.dim()}"
    return _right_fake(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum)


correct_custom_op = _custom_op("correct", _right_fake)
# OPCHECK_FAILED: the fake (meta) implementation returns N x M where the kernel returns M x N.
wrong_fake_shape = _custom_op("wrong_fake_shape", _transposed_fake)
_rank_asserting_op = _custom_op("rank_asserting", _rank_asserting_fake)


def asserts_0d_x_1d_under_compile(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """COMPILE_ONLY_ERROR: a wrapper around a custom op whose meta asserts equal scale ranks, so
    a 0-D scale against a [1] scale fails only when traced (the wrapper hides the op from
    opcheck, as wrappers do)."""
    return _rank_asserting_op(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum)


# -- the kernel contract: what a kernel may do to the harness ------------------------------------


def refuses_everything_type_error(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """REFUSED: raises on every call, as a wrapper with a stale signature does; inside its
    declared support, so the refusal is a failure, not a capability."""
    raise TypeError("fp8_gemm() got an unexpected keyword argument 'out_dtype'")


def refuses_everything_runtime_error(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """REFUSED: a library call that fails on every input."""
    raise RuntimeError("fp8 GEMM backend failed to initialise")


def internal_assert(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """INTERNAL_ERROR: an internal assert, eager and compiled alike, is a bug, never a refusal."""
    raise RuntimeError(
        'false INTERNAL ASSERT FAILED at "/pytorch/aten/src/ATen/native/cuda/Blas.cpp":1042, please report a '
        "bug to PyTorch. Scaling type not supported"
    )


def no_fast_accum(a, b, scale_a, scale_b, *, bias=None, out_dtype):
    """Correct, and has no use_fast_accum parameter: the harness must not pass one."""
    return _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def no_out_dtype(a, b, scale_a, scale_b, *, bias=None, use_fast_accum=False):
    """Cannot be called the way the harness calls kernels: a usage error naming out_dtype."""
    return _dequant_mm(a, b, scale_a, scale_b, bias, torch.bfloat16)


def exits(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """CRASH: calls sys.exit, which would end the process running the case."""
    import sys

    sys.exit(3)


def raises_keyboard_interrupt(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """CRASH in the isolated child: a KeyboardInterrupt the kernel raises itself."""
    raise KeyboardInterrupt


def returns_none(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: forgets to return its result."""
    _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)


def returns_tuple(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: returns (out, amax) as torch._scaled_mm did before 2.5."""
    out = _dequant_mm(a, b, scale_a, scale_b, bias, out_dtype)
    return out, out.abs().amax()


def returns_meta(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH: returns a tensor of the right shape and dtype on the meta device (no data)."""
    return torch.empty((*a.shape[:-1], b.shape[-1]), dtype=out_dtype, device="meta")


def wraps_scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A user's thin wrapper of torch._scaled_mm, declaring nothing: what the op refuses, the
    wrapper refuses inside its (undeclared, so full) support."""
    return torch._scaled_mm(
        a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum
    )


# -- input-space dimensions a synthetic matrix never reaches ---------------------------------------


def k_tail_of_32_dropped(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only at a K above one 32-block with a tail (48, 80 ...): a masked K loop in steps of
    32 that forgets the remainder; every K a multiple of 32 is right."""
    k = a.shape[-1]
    used = k if k <= 32 or k % 32 == 0 else k // 32 * 32
    return _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype, k_used=used)


def stale_second_m_tile(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only past 128 tokens: the rows of a second M tile take the first tile's last row,
    as a kernel whose tile loop stops at one (a prefill batch, M = 129)."""
    out = _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)
    flat = out.reshape(-1, out.shape[-1])
    if flat.shape[0] > 128:
        flat = torch.cat([flat[:128], flat[127:128].expand(flat.shape[0] - 128, -1)])
    return flat.reshape(out.shape)


def square_fast_path(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only where M = N: a dispatch table's square-tile entry writes the output
    transposed (right for symmetric products only)."""
    out = _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)
    if a.dim() == 2 and a.shape[0] == b.shape[1] and a.shape[0] > 1:
        return out.t().contiguous()
    return out


def half_scale_bits(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only for bf16 or fp16 scales (as a library passes them, in the activation's dtype):
    their bits are read as a 16-bit integer, as a kernel that loads every scale as raw storage."""

    def raw(scale):
        return scale if scale.dtype == torch.float32 else scale.view(torch.int16).to(torch.float32)

    return _dequant_blocks(a, b, raw(scale_a), raw(scale_b), bias, out_dtype)


def bias_promotes_output(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Wrong output dtype with an fp32 bias beside a bf16 or fp16 output: the epilogue adds the bias
    after the cast, so type promotion returns fp32."""
    out = _dequant_blocks(a, b, scale_a, scale_b, None, out_dtype)
    return out if bias is None else out + bias


def sanitizes_operands(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only with a NaN or inf in an operand: the kernel zeroes non-finite inputs (a
    saturating load), so an overflowed activation's row comes out finite instead of NaN."""
    clean = torch.nan_to_num(a.to(torch.float32), nan=0.0, posinf=0.0, neginf=0.0)
    return _dequant_blocks(clean, b, scale_a, scale_b, bias, out_dtype)


_DEQUANTISED_WEIGHTS: dict = {}


def caches_weight_by_pointer(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only when a weight's values change in place (a checkpoint reload, an RL weight
    sync): the dequantised weight is cached per weight tensor (by its data pointer, the entry
    holding a weak reference to it), as a prepacking cache does; every call with fresh tensors is
    right."""
    entry = _DEQUANTISED_WEIGHTS.get(b.data_ptr())
    if entry is None or entry[0]() is not b:
        entry = (weakref.ref(b), b.to(torch.float32))
        _DEQUANTISED_WEIGHTS[b.data_ptr()] = entry
    tokens = a.flatten(0, -2).to(torch.float32)
    m, k = tokens.shape
    n = b.shape[-1]
    out = (tokens * _expand(scale_a, m, k)) @ (entry[1] * _expand(scale_b, k, n))
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], n)


def sanitizes_weight(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only with a NaN or inf in the weight: its loads saturate non-finite values to zero
    (the activation's do not), so a corrupted weight column comes out finite."""
    clean = torch.nan_to_num(b.to(torch.float32), nan=0.0, posinf=0.0, neginf=0.0)
    return _dequant_blocks(a, clean, scale_a, scale_b, bias, out_dtype)


def shifted_last_n_tile(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only at N above one 64-wide tile and not a multiple of it (96): the last tile is
    computed shifted back to end at N (a full tile over [N - 64, N)), then stored from its own
    start instead of its end, so the tail columns hold the wrong ones."""
    out = _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)
    n = out.shape[-1]
    if n > 64 and n % 64:
        whole = n // 64 * 64
        columns = list(range(whole)) + [n - 64 + j - whole for j in range(whole, n)]
        out = out.index_select(-1, torch.tensor(columns, device=out.device))
    return out


_TILE_ROWS: dict = {}


def tile_config_cached_without_m(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """MISMATCH only when a later call has more tokens than the first of its (K, N): the tile
    config is tuned on the first call and cached per (K, N) without M, so one M tile (the first
    M rounded up to a power of two, at least 16) is all a later, larger call computes; the rows
    past it stay zero. Each first call of a shape is right."""
    out = _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)
    if _compiling():  # the cache lives on the eager path only
        return out
    flat = out.reshape(-1, out.shape[-1])
    key = (a.shape[-1], b.shape[-1], a.dtype, str(a.device))
    rows = _TILE_ROWS.setdefault(key, max(16, 1 << max(flat.shape[0] - 1, 0).bit_length()))
    if flat.shape[0] > rows:
        flat = torch.cat([flat[:rows], torch.zeros_like(flat[rows:])])
    return flat.reshape(out.shape)


_FIRST_TOKENS: dict = {}


def dies_at_a_second_m(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """CRASH only when a later call of a (K, N) has another token count than its first: the
    process exits, as a kernel reading past a buffer sized for the first M is killed."""
    tokens = a.numel() // max(a.shape[-1], 1)
    if _FIRST_TOKENS.setdefault((a.shape[-1], b.shape[-1]), tokens) != tokens and not _compiling():
        import os  # noqa: PLC0415

        os._exit(3)
    return _dequant_blocks(a, b, scale_a, scale_b, bias, out_dtype)
