"""Scale forms: one row per shape a dequantisation scale can take.

A form says, for each operand (a: M x K, b: K x N), which block of the operand one scale
element covers. From that the schema takes its enum and ranks, case ids their short names,
draw.py the scale it draws and the float64 multiplier it expands it to, and scaled_mm_v2 the
recipe a scale's shape stands for. A new form is one row here (and its id in matrix.yaml).

Standard library only, and no imports from this package: the schema reads it without torch,
and repro scripts embed it verbatim ahead of draw.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# A block extent spanning the whole dimension, whatever its size.
WHOLE = None

# torch.nn.functional.ScalingType / SwizzleType as the plain ints aten._scaled_mm_v2 takes: a
# kernel passes these, never the enum objects, so that Dynamo traces the call
# (tests/test_frontier_forms.py checks them against torch's enums).
RECIPE_CODES = {
    "TensorWise": 0,
    "RowWise": 1,
    "BlockWise1x16": 2,
    "BlockWise1x32": 3,
    "BlockWise1x128": 4,
    "BlockWise128x128": 5,
}
SWIZZLE_CODES = {"NO_SWIZZLE": 0, "SWIZZLE_32_4_4": 1}
# Dtypes of a scale's elements (torch names in draw.py).
SCALE_DTYPES = ("fp32", "e8m0", "e4m3fn")


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
    # Microscaling (MX, NVFP4): the scale's element dtype, whether the op wants it swizzled
    # (SWIZZLE_32_4_4, a kernel's business), a second-level fp32 per-tensor scale (the case's
    # scale is then the pair (block scales, global scale)), and the operand dtypes it goes with
    # (None: the fp8 and int8 ones).
    scale_dtype: str = "fp32"
    swizzled: bool = False
    global_scale: bool = False
    operand_dtypes: tuple | None = None

    def __post_init__(self) -> None:
        if self.rank < 2 and not self.per_tensor:
            raise ValueError(f"scale form {self.id}: rank {self.rank} holds one element; blocks must be WHOLE")
        if self.scale_dtype not in SCALE_DTYPES or {self.recipe_a, self.recipe_b} - set(RECIPE_CODES):
            raise ValueError(f"scale form {self.id}: unknown scale dtype or recipe")

    def block(self, side: str) -> tuple:
        return self.block_a if side == "a" else self.block_b

    def grid(self, side: str, rows: int, cols: int) -> tuple[int, int]:
        """Scale elements along the rows and the cols of an operand of rows x cols."""
        along_rows, along_cols = (
            1 if extent is WHOLE else -(-size // extent) for size, extent in zip((rows, cols), self.block(side))
        )
        return along_rows, along_cols

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
    ScaleForm(
        "rowwise",
        "row",
        2,
        (1, WHOLE),
        (WHOLE, 1),
        recipe_a="RowWise",
        recipe_b="RowWise",
        doc="one per row of a (M x 1) and per column of b (1 x N)",
    ),
    ScaleForm(
        "blockwise",
        "blk",
        2,
        (1, 128),
        (128, 128),
        column_major=True,
        recipe_a="BlockWise1x128",
        recipe_b="BlockWise128x128",
        doc="1x128 blocks of a (M x K/128), 128x128 blocks of b (K/128 x N/128)",
    ),
    # One recipe per form on both sides, so that a (scale_a, scale_b) pair of these is one recipe
    # pair of scaled_mm_v2: block1x128 x block128x128 is 1x128 x 128x128 (as `blockwise`),
    # block128x128 x block1x128 and block1x128 x block1x128 the other two DeepSeek-style pairings.
    # Stored outer-dim-major, as `blockwise`; the op's padded layouts are the kernel's business.
    ScaleForm(
        "block1x128",
        "b1x128",
        2,
        (1, 128),
        (128, 1),
        column_major=True,
        recipe_a="BlockWise1x128",
        recipe_b="BlockWise1x128",
        doc="1x128 blocks along K: a (M x K/128), b (K/128 x N)",
    ),
    ScaleForm(
        "block128x128",
        "b128",
        2,
        (128, 128),
        (128, 128),
        column_major=True,
        recipe_a="BlockWise128x128",
        recipe_b="BlockWise128x128",
        doc="128x128 blocks: a (M/128 x K/128), b (K/128 x N/128)",
    ),
    # Microscaling, row-major grids; swizzled to the op's 32x4x4 tiles by the kernel.
    ScaleForm(
        "mx",
        "mx",
        2,
        (1, 32),
        (32, 1),
        recipe_a="BlockWise1x32",
        recipe_b="BlockWise1x32",
        scale_dtype="e8m0",
        swizzled=True,
        operand_dtypes=("e4m3fn", "e5m2"),
        doc="MXFP8: e8m0 (power of two) scales over 1x32 blocks along K",
    ),
    ScaleForm(
        "nvfp4",
        "nvfp4",
        2,
        (1, 16),
        (16, 1),
        recipe_a="BlockWise1x16",
        recipe_b="BlockWise1x16",
        scale_dtype="e4m3fn",
        swizzled=True,
        global_scale=True,
        operand_dtypes=("fp4e2m1",),
        doc="NVFP4: e4m3 scales over 1x16 blocks along K of fp4 operands, times an fp32 global scale",
    ),
)
_FORM_BY_ID = {form.id: form for form in FORMS}


def scale_form(form_id: str) -> ScaleForm:
    """The row of a form id; KeyError for an id the table does not have."""
    return _FORM_BY_ID[form_id]


def per_tensor_of_rank(rank: int) -> str | None:
    """The first one-element form of this rank, or None."""
    return next((form.id for form in FORMS if form.per_tensor and form.rank == rank), None)


# aten._scaled_mm_v2's recipe pairs that no one form stands for, only a pair of forms
# (block128x128 x block1x128).
CROSS_RECIPE_PAIRS = (("BlockWise128x128", "BlockWise1x128"),)


def recipe_pairs() -> list[tuple[str, str]]:
    """The (scale_a, scale_b) recipe pairs the forms stand for, in table order."""
    return list(dict.fromkeys([*((form.recipe_a, form.recipe_b) for form in FORMS), *CROSS_RECIPE_PAIRS]))


def recipes_of_shape(shape: Sequence[int], side: str, rows: int, inner: int, cols: int) -> list[str]:
    """The recipes of the forms whose scale for `side` has this shape, in table order (a shape can
    fit several: M = 1 makes a rowwise scale_a one element). The operands are a (rows x inner)
    and b (inner x cols)."""
    operand = (rows, inner) if side == "a" else (inner, cols)
    found = [
        form.recipe_a if side == "a" else form.recipe_b for form in FORMS if tuple(shape) == form.shape(side, *operand)
    ]
    return list(dict.fromkeys(found))


def recipe_codes(pair: Sequence[str]) -> tuple[int, int]:
    """The ints aten._scaled_mm_v2 takes for a (recipe_a, recipe_b) pair of ScalingType names."""
    return RECIPE_CODES[pair[0]], RECIPE_CODES[pair[1]]


def own_pairings(scale_forms: Sequence[str], dtypes_a: Sequence[str], dtypes_b: Sequence[str]) -> list[dict]:
    """Case parameters that give a microscaling form (which pairs only with itself and its
    operand dtypes) on both sides, among the given axis values: a boundary case needs them
    changed together."""
    found = []
    for form in FORMS:
        if form.scale_dtype == "fp32" or form.id not in scale_forms:
            continue
        wanted = form.operand_dtypes or ()
        dtype = next((d for d in wanted if d in dtypes_a and d in dtypes_b), None)
        if dtype is not None:
            found.append({"scale_a": form.id, "scale_b": form.id, "dtype_a": dtype, "dtype_b": dtype})
    return found
