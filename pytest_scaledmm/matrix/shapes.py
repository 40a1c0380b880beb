"""Shape classes: sizes of M, K and N that a scaled-mm kernel treats alike, so that the covering
array makes every scale form meet every class while hypothesis draws the size inside it.

    M  m0: empty   m1: 1 (decode)   m2-16: 2 to 16 (below a tensor-core tile; _int_mm's limit)
       m17-127: 17 to 127 (unaligned: odd sizes when drawn from a range)   m128-2047
       m2048+: serving prefill
    K  k0: empty   k1blk: 128, one block   kNblk: a multiple of 128 above it, several blocks
       ktail: any other K, a partial last block (several blocks and a tail when above 128)
    N  n0: empty   n1blk: 128   nNblk: several blocks of 128 (a block scale per column block)
       nunaligned: any other N

128 is the block of the blockwise scale recipes and a common K and N tile (support.BLOCK). A
shape axis that lists sizes has them sorted into these classes; a {min, max} range gives each
class its part of the range. A class with no size is left out. No torch import here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .support import BLOCK

# Sizes a class may hold when it is drawn from a range, at most: an evenly spread sample beyond.
MAX_POOL = 4096
PREFILL_M = 2048  # a serving framework's prefill batch of tokens


@dataclass(frozen=True)
class ShapeClass:
    dim: str  # m, k or n
    name: str
    holds: Callable[[int], bool]  # whether a size belongs to the class
    from_range: Callable[[int], bool] = lambda v: True  # further narrows a class drawn from a range
    doc: str = ""


CLASSES: tuple[ShapeClass, ...] = (
    ShapeClass("m", "m0", lambda v: v == 0, doc="0 (an idle expert, an empty batch)"),
    ShapeClass("m", "m1", lambda v: v == 1, doc="1 (decode)"),
    ShapeClass("m", "m2-16", lambda v: 2 <= v <= 16, doc="2 to 16"),
    ShapeClass("m", "m17-127", lambda v: 17 <= v <= 127, lambda v: v % 2 == 1, doc="17 to 127, odd from a range"),
    ShapeClass("m", "m128-2047", lambda v: 128 <= v < PREFILL_M, doc="128 to 2047"),
    ShapeClass("m", "m2048+", lambda v: v >= PREFILL_M, doc="2048 and above (serving prefill)"),
    ShapeClass("k", "k0", lambda v: v == 0, doc="0 (an empty reduction)"),
    ShapeClass("k", "k1blk", lambda v: v == BLOCK, doc="one block of 128"),
    ShapeClass("k", "kNblk", lambda v: v > BLOCK and v % BLOCK == 0, doc="several blocks of 128"),
    ShapeClass("k", "ktail", lambda v: v % BLOCK != 0, doc="a partial last block"),
    ShapeClass("n", "n0", lambda v: v == 0, doc="0 (no output columns)"),
    ShapeClass("n", "n1blk", lambda v: v == BLOCK, doc="one block of 128"),
    ShapeClass("n", "nNblk", lambda v: v > BLOCK and v % BLOCK == 0, doc="several blocks of 128"),
    ShapeClass("n", "nunaligned", lambda v: v % BLOCK != 0, doc="not a multiple of 128"),
)
DIMS = ("m", "k", "n")


def class_of(dim: str, size: int) -> str:
    """The class a size of M, K or N belongs to."""
    return next(c.name for c in CLASSES if c.dim == dim and c.holds(size))


def classes_of(params: Mapping[str, Any]) -> dict[str, str]:
    """{"m": "m17-127", "k": "ktail", "n": "naligned"} for a case."""
    return {dim: class_of(dim, params[dim]) for dim in DIMS}


def pools(dim: str, axis_value) -> dict[str, list[int]]:
    """Class -> the sizes it holds from the axis of M, K or N (a list, or a {min, max} range),
    ascending; classes without a size are left out. A large range gives an evenly spread sample."""
    found: dict[str, list[int]] = {}
    own = [c for c in CLASSES if c.dim == dim]
    if isinstance(axis_value, dict):
        lo, hi = axis_value["min"], axis_value["max"]
        for shape_class in own:
            sizes = [v for v in range(lo, hi + 1) if shape_class.holds(v) and shape_class.from_range(v)]
            if len(sizes) > MAX_POOL:
                step = len(sizes) / MAX_POOL
                sizes = sorted({sizes[int(i * step)] for i in range(MAX_POOL)} | {sizes[-1]})
            if sizes:
                found[shape_class.name] = sizes
        return found
    for size in sorted(set(axis_value)):
        for shape_class in own:
            if shape_class.holds(size):
                found.setdefault(shape_class.name, []).append(size)
    return {c.name: found[c.name] for c in own if c.name in found}


EMPTY_CLASSES = ("m0", "k0", "n0")


def dim_pools(axes: Mapping[str, Any]) -> dict[str, dict[str, list[int]]]:
    """For each of m, k and n: class -> sizes, from the profile's axes. The empty classes are
    left out: an empty dimension is a slice of its own (empty_dims), not a class every scale
    form and mode must meet."""
    return {
        dim: {name: sizes for name, sizes in pools(dim, axes[dim]).items() if name not in EMPTY_CLASSES} for dim in DIMS
    }


def empty_dims(axes: Mapping[str, Any]) -> list[str]:
    """The dims whose axis holds 0 (a list with 0, a range from 0)."""
    found = []
    for dim in DIMS:
        value = axes[dim]
        if (isinstance(value, dict) and value["min"] == 0) or (not isinstance(value, dict) and 0 in value):
            found.append(dim)
    return found
