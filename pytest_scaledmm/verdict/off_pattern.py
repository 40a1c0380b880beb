"""What the off elements of an output (those past the reference's bound) have in common: the
signature that tells one kind of wrong output from another.
"""

from __future__ import annotations

import math

import torch

from .signature_text import COLUMN_BAND, CONSTANT_FACTOR, NONFINITE_PATTERN, ROW_BAND

# A band of rows or columns is off when at least this share of its elements is off, and none
# outside it: a misread scale block looks like that, scattered rounding errors never do.
BAND_DENSITY = 0.9


def _band(off_lines: torch.Tensor, dense_lines: torch.Tensor) -> tuple[int, int] | None:
    """(first, last) of the lines holding off elements when they are one contiguous strict subset
    of all lines and each of them is dense with off elements, else None."""

    where = torch.nonzero(off_lines).flatten()
    if not where.numel() or where.numel() == off_lines.numel():
        return None
    first, last = int(where[0]), int(where[-1])
    if last - first + 1 != where.numel() or not bool(dense_lines[first : last + 1].all()):
        return None
    return first, last


def off_pattern(
    got: torch.Tensor, value: torch.Tensor, tol: torch.Tensor, diff: torch.Tensor, finite_ref: torch.Tensor
) -> dict:
    """What the off elements of an output have in common, so that distinct bugs get distinct
    signatures: "non-finite where the reference is finite" (an overflow), "by one constant factor"
    (every element is the reference times one number r, within twice the bound scaled by r: an
    ignored or doubled scale), "in a band of columns" / "in a band of rows" (one contiguous run,
    densely off, nothing off outside: a misread scale block). {} when they share none of these."""

    found: dict = {}
    # inf or nan where the reference is finite: an overflow or a 0/0, whatever else is off.
    nonfinite = finite_ref & ~torch.isfinite(got)
    if bool(nonfinite.any()):
        return {
            "pattern": NONFINITE_PATTERN,
            "where": f"{int(nonfinite.sum())} of {nonfinite.numel()} elements non-finite",
        }
    usable = finite_ref & torch.isfinite(got) & (value.abs() > tol)
    if usable.any():
        factor = float((got[usable] / value[usable]).median())
        if math.isfinite(factor) and factor != 0.0 and abs(factor - 1.0) > 0.01:
            # Twice the bound: the median ratio is itself off by up to one output rounding.
            rescaled = (got - factor * value).abs() <= 2 * tol * abs(factor)
            if bool(rescaled[finite_ref].all()):
                return {"pattern": CONSTANT_FACTOR, "where": f"output = {factor:.4g} x reference"}
    if got.dim() != 2:
        return found
    off = diff > tol
    columns = _band(off.any(dim=0), off.float().mean(dim=0) >= BAND_DENSITY)
    rows = _band(off.any(dim=1), off.float().mean(dim=1) >= BAND_DENSITY)
    if columns and not rows:
        found = {"pattern": COLUMN_BAND, "where": f"columns {columns[0]}-{columns[1]} of {off.shape[1]}"}
    elif rows and not columns:
        found = {"pattern": ROW_BAND, "where": f"rows {rows[0]}-{rows[1]} of {off.shape[0]}"}
    return found
