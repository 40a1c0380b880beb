"""Scale forms: one row per shape a dequantisation scale can take.

A form says, for each operand (a: M x K, b: K x N), which block of the operand one scale
element covers. From that the schema takes its enum and ranks, case ids their short names,
inputs.py the scale it draws and the float64 multiplier it expands it to, and scaled_mm_v2 the
recipe a scale's shape stands for. A new form is one row here (and its id in matrix.yaml).

Standard library only, and no imports from this package: the schema reads it without torch,
and repro scripts embed it verbatim ahead of inputs.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

# A block extent spanning the whole dimension, whatever its size.
WHOLE = None


@dataclass(frozen=True)
class ScaleForm:
    """One scale form. `block_a` / `block_b`: (rows, cols) of the operand that one scale element
    covers, WHOLE for the full dimension; the scale tensor has one element per block (the last
    block of a dimension may be partial)."""

    id: str  # the value of the scale_a / scale_b axes in matrix.yaml
    short: str  # its part of a case id: fp8e4m3-<short a>_x_<short b>-...
    rank: int  # dims of the scale tensor; below 2 only for one element
    block_a: tuple  # of a (M x K)
    block_b: tuple  # of b (K x N)
    # Stored outer-dim-major (strides (1, rows)), as cuBLAS wants block scales; else row-major.
    column_major: bool = False
    # torch.nn.functional.ScalingType member names of each side, for scaled_mm_v2.
    recipe_a: str = "TensorWise"
    recipe_b: str = "TensorWise"
    doc: str = ""

    def __post_init__(self):
        if self.rank < 2 and not self.per_tensor:
            raise ValueError(f"scale form {self.id}: rank {self.rank} holds one element; blocks must be WHOLE")

    def block(self, side: str) -> tuple:
        return self.block_a if side == "a" else self.block_b

    def grid(self, side: str, rows: int, cols: int) -> tuple[int, int]:
        """Scale elements along the rows and the cols of an operand of rows x cols."""
        return tuple(1 if extent is WHOLE else -(-size // extent) for size, extent in zip((rows, cols), self.block(side)))

    def shape(self, side: str, rows: int, cols: int) -> tuple:
        """The scale tensor's shape for an operand of rows x cols."""
        return self.grid(side, rows, cols) if self.rank == 2 else (1,) * self.rank

    @property
    def per_tensor(self) -> bool:
        """One element per operand."""
        return self.block_a == (WHOLE, WHOLE) and self.block_b == (WHOLE, WHOLE)

    @property
    def constant_along_k(self) -> bool:
        """The same scale for every product of a dot: an epilogue can apply it to the output
        (`out * scale_a * scale_b` broadcasts), as per-tensor and rowwise scales."""
        return self.block_a[1] is WHOLE and self.block_b[0] is WHOLE


FORMS: tuple[ScaleForm, ...] = (
    ScaleForm("tensor_0d", "s0d", 0, (WHOLE, WHOLE), (WHOLE, WHOLE), doc="one element, 0-D (as checkpoints store it)"),
    ScaleForm("tensor_1d", "s1d", 1, (WHOLE, WHOLE), (WHOLE, WHOLE), doc="one element, shape [1]"),
    ScaleForm("tensor_1x1", "s11", 2, (WHOLE, WHOLE), (WHOLE, WHOLE), doc="one element, shape [1, 1]"),
    ScaleForm("rowwise", "row", 2, (1, WHOLE), (WHOLE, 1), recipe_a="RowWise", recipe_b="RowWise",
              doc="one per row of a (M x 1) and per column of b (1 x N)"),
    ScaleForm("blockwise", "blk", 2, (1, 128), (128, 128), column_major=True, recipe_a="BlockWise1x128",
              recipe_b="BlockWise128x128", doc="1x128 blocks of a (M x K/128), 128x128 blocks of b (K/128 x N/128)"),
)
_FORM_BY_ID = {form.id: form for form in FORMS}


def scale_form(form_id: str) -> ScaleForm:
    """The row of a form id; KeyError for an id the table does not have."""
    return _FORM_BY_ID[form_id]


def per_tensor_of_rank(rank: int) -> Optional[str]:
    """The first one-element form of this rank, or None."""
    return next((form.id for form in FORMS if form.per_tensor and form.rank == rank), None)


def recipe_pairs() -> list[tuple[str, str]]:
    """The (scale_a, scale_b) recipe pairs the forms stand for, in table order."""
    return list(dict.fromkeys((form.recipe_a, form.recipe_b) for form in FORMS))


def recipes_of_shape(shape: Sequence[int], side: str, rows: int, inner: int, cols: int) -> list[str]:
    """The recipes of the forms whose scale for `side` has this shape, in table order (a shape can
    fit several: M = 1 makes a rowwise scale_a one element). The operands are a (rows x inner)
    and b (inner x cols)."""
    operand = (rows, inner) if side == "a" else (inner, cols)
    found = [form.recipe_a if side == "a" else form.recipe_b for form in FORMS if tuple(shape) == form.shape(side, *operand)]
    return list(dict.fromkeys(found))
