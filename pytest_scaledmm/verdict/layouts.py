"""Operand layouts: the same operand values in the memory a serving framework hands a kernel.

- dense: a row-major, b column-major, each alone in its storage;
- a_padded: a row-major with a row stride larger than K (a padded activation buffer);
- a_offset: a a column slice of a wider buffer at a storage offset (q of a fused QKV output:
  row stride 3K, offset K);
- b_row_major: b row-major (K x N contiguous), as a weight stored untransposed;
- b_padded: b column-major with a leading dimension larger than K;
- a_token_stride0: a single token (M = 1) whose size-1 dimensions have stride 0, as Inductor
  emits when it reshapes one token (a [1, K] row as strides (0, 1); a [1, 1, K] token as
  (0, 0, 1)): the same memory, strides a kernel that reads stride(0) as the row pitch gets wrong
  (pytorch#195066 on oneDNN's int8 path); drawn only where M = 1;
- scale_on_host: a one-element scale_a on the CPU while the operands are on the GPU (a scalar
  handed between processes); on the CPU it is the dense layout.

Unused storage holds NaN (fp8) or -128 (int8), so a kernel that reads past a view's strides or
offset computes garbage, not a near miss. No torch import at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

OPERAND_LAYOUTS = ("dense", "a_padded", "a_offset", "b_row_major", "b_padded", "scale_on_host", "a_token_stride0")
TOKEN_STRIDE0 = "a_token_stride0"
DENSE = "dense"
PAD = 16  # elements of padding: keeps 16-byte row alignment, as allocators and cuBLASLt want


def _filled(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    import torch  # noqa: PLC0415  lazy: torch-free collection

    if like.dtype == torch.int8:
        return torch.full(shape, -128, dtype=torch.int8, device=like.device)
    return torch.full(shape, float("nan"), dtype=torch.float32, device=like.device).to(like.dtype)


def place_a(a: torch.Tensor, layout: str) -> torch.Tensor:
    """a (M x K, row-major) in `layout`, on its device."""
    m, k = a.shape
    if layout == "a_padded":
        buffer = _filled((m, k + PAD), a)
        buffer[:, :k] = a
        return buffer[:, :k]
    if layout == "a_offset":
        buffer = _filled((m, 3 * k), a)
        buffer[:, k : 2 * k] = a
        return buffer[:, k : 2 * k]
    return a


def place_token(a: torch.Tensor, layout: str) -> torch.Tensor:
    """a (2-D or its 3-D view) with stride 0 in each size-1 dimension for a_token_stride0; any
    other layout, or an `a` without a size-1 dimension, as it is."""
    if layout != TOKEN_STRIDE0:
        return a
    strides = [0 if size == 1 else stride for size, stride in zip(a.shape, a.stride())]
    return a.as_strided(a.shape, strides, a.storage_offset())


def place_b(b: torch.Tensor, layout: str) -> torch.Tensor:
    """b (K x N, column-major) in `layout`, on its device."""
    k, n = b.shape
    if layout == "b_row_major":
        return b.contiguous()
    if layout == "b_padded":
        buffer = _filled((n, k + PAD), b)
        buffer[:, :k] = b.t()
        return buffer[:, :k].t()
    return b


def place_scale_a(
    scale: torch.Tensor | tuple[torch.Tensor, ...], layout: str
) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """scale_a on the host for scale_on_host when it has one element, else as it is."""
    if layout == "scale_on_host" and not isinstance(scale, tuple) and scale.numel() == 1:
        return scale.to("cpu")
    return scale
