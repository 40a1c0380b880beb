"""Grouped GEMM cases (torch._scaled_grouped_mm): group sizes, offsets, operands, output shape and
the float64 products of each group (draw.py and reference.py turn them into the case's inputs and reference).

Three layouts, G = `groups`, rowwise scales (one per row of a, one per column of b, per group):

- 2d3d: a [G*M, K] split along M by `offs`, b [G, K, N]; scale_a [G*M], scale_b [G, N];
  output [G*M, N] (rows of a group times that group's b).
- 3d3d: a [G, M, K], b [G, K, N], no offsets; scale_a [G, M], scale_b [G, N]; output [G, M, N].
- 2d2d: a [M, G*K], b [G*K, N] split along K by `offs`; scale_a [G*M], scale_b [G*N];
  output [G, M, N] (group g sums over its own K slice, an empty slice gives zeros).

`group_sizes` splits the G*M rows (2d2d: the G*K columns) into groups, every size a multiple of
16 (the op's alignment): `even` M each; `jagged` half of every even group's share moved to the
next; `empty` every odd group empty, its share on the group before. The offsets are the int32
cumulative ends. A 3d3d case has no offsets: its groups are always even.

Standard library and torch only, and no imports from this package: draw.py and reference.py build on it.
"""

from __future__ import annotations

import torch

from .case_axes import CaseParams

ALIGN = 16  # group sizes are multiples of this


def group_count(params: CaseParams) -> int:
    return int(params.groups)


def grouped_extent(params: CaseParams) -> int:
    """Each group's even share of the grouped dimension: M (2d3d, 3d3d) or K (2d2d)."""
    return params.k if params.group_layout == "2d2d" else params.m


def group_sizes(params: CaseParams) -> list[int]:
    """The size of each group along the grouped dimension; they sum to G times the even share."""
    count, share = group_count(params), grouped_extent(params)
    kind = "even" if params.group_layout == "3d3d" else params.group_sizes
    sizes = [share] * count
    if kind == "jagged":
        # Half of each even-indexed group's units to the next group: [M/2, 3M/2, ...].
        units = share // ALIGN
        moved = max(1, units // 2) * ALIGN if units else 0
        for g in range(0, count - 1, 2):
            sizes[g] -= moved
            sizes[g + 1] += moved
    elif kind == "empty":
        for g in range(1, count, 2):
            sizes[g - 1] += sizes[g]
            sizes[g] = 0
    return sizes


def offsets(sizes: list[int]) -> list[int]:
    """The cumulative ends of the groups, as `offs` holds them."""
    ends, total = [], 0
    for size in sizes:
        total += size
        ends.append(total)
    return ends


def grouped_shape(params: CaseParams) -> tuple[int, ...]:
    """The output shape of a grouped case."""
    count, m, n = group_count(params), params.m, params.n
    return (count * m, n) if params.group_layout == "2d3d" else (count, m, n)


def _draw_scale(generator: torch.Generator, *shape: int) -> torch.Tensor:

    # A spread over several powers of two, so a scale applied to the wrong group shows.
    exponents = torch.randint(-2, 3, shape, generator=generator)
    return torch.pow(2.0, exponents.float()) * (1 + torch.rand(shape, generator=generator) * 0.5)


def draw_grouped(
    params: CaseParams, generator: torch.Generator, dtype_a: torch.dtype | None, dtype_b: torch.dtype | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, list[int] | None]:
    """(a, b, scale_a, scale_b, offs) of a grouped case on the CPU, drawn from `generator`: b
    column-major in its last two dims, rowwise float32 scales, offs a list of the group ends
    (None for 3d3d)."""

    layout, count = params.group_layout, group_count(params)
    m, k, n = params.m, params.k, params.n

    def operand(*shape: int, dtype: torch.dtype | None) -> torch.Tensor:
        return (torch.randn(*shape, generator=generator) * 2).to(dtype)

    if layout == "2d3d":
        a = operand(count * m, k, dtype=dtype_a)
        b = operand(count, n, k, dtype=dtype_b).transpose(-2, -1)
        scale_a, scale_b = _draw_scale(generator, count * m), _draw_scale(generator, count, n)
    elif layout == "3d3d":
        a = operand(count, m, k, dtype=dtype_a)
        b = operand(count, n, k, dtype=dtype_b).transpose(-2, -1)
        scale_a, scale_b = _draw_scale(generator, count, m), _draw_scale(generator, count, n)
    elif layout == "2d2d":
        a = operand(m, count * k, dtype=dtype_a)
        b = operand(n, count * k, dtype=dtype_b).t()
        scale_a, scale_b = _draw_scale(generator, count * m), _draw_scale(generator, count * n)
    else:
        raise ValueError(f"group_layout {layout!r}")
    return a, b, scale_a, scale_b, None if layout == "3d3d" else offsets(group_sizes(params))


def group_products(
    params: CaseParams, a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor, int | slice]]:
    """Per group, (A, B, rows): the float64 dequantised operands on the CPU (A: rows x K_g,
    B: K_g x N) and the output rows they make (a slice of the 2d3d output, or a group index).
    Each group on its own: its rows' scales, its own b and its b's scales (2d2d: its K slice)."""

    layout, count, m, n = params.group_layout, group_count(params), params.m, params.n
    a, b, sa, sb = (t.detach().to("cpu", torch.float64) for t in (a, b, scale_a, scale_b))
    found: list[tuple[torch.Tensor, torch.Tensor, int | slice]] = []
    if layout == "3d3d":
        for g in range(count):
            found.append((a[g] * sa[g][:, None], b[g] * sb[g][None, :], g))
        return found
    ends = offsets(group_sizes(params))
    starts = [0] + ends[:-1]
    for g, (start, end) in enumerate(zip(starts, ends)):
        if layout == "2d3d":
            found.append((a[start:end] * sa[start:end, None], b[g] * sb[g][None, :], slice(start, end)))
        else:  # 2d2d: group g sums over K[start:end] with its own M and N scales
            rows = sa[g * m : (g + 1) * m, None]
            cols = sb[g * n : (g + 1) * n][None, :]
            found.append((a[:, start:end] * rows, b[start:end] * cols, g))
    return found
