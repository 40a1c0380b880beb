"""The coverage guarantee: per kernel, every value of every dimension in its space and every
special scale value on each side gets a case that is checked (a valid case, or a special one),
whatever the profile's `cases:`. The budget sizes the pairwise fill around it, never it: a value
the fill missed gets a case of its own here, on a valid case of the kernel with that one value
changed. No torch import here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..verdict.case_axes import axis_value
from .shapes import class_of

CHECKED_PURPOSES = ("valid", "special")


def value_of(params: Mapping[str, Any], axis: str) -> Any:
    """The value a case gives a dimension of the space (the coverage report reads them alike)."""
    if axis.endswith("_class"):
        dim = axis[0]
        return class_of(dim, params[dim]) if params.get(dim) else f"{dim}0"
    if axis == "special_scale":
        return axis_value(params, "special_scale")
    return params.get(axis)


def missing_values(space_values: Mapping[str, list], taken: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """(axis, value) of the kernel's space that no taken case gives, special_scale aside (its
    values are guaranteed per side: missing_specials)."""
    found = []
    for axis, values in space_values.items():
        if axis in ("special_scale", "special_side"):
            continue
        have = {value_of(p, axis) for p in taken}
        found += [(axis, value) for value in values if value not in have]
    return found


def missing_specials(specials: Sequence[str], sides: Sequence[str], taken: Sequence[Mapping[str, Any]]) -> list:
    """(special value, side) pairs no taken case has."""
    have = {(axis_value(p, "special_scale"), axis_value(p, "special_side")) for p in taken}
    return [(value, side) for value in specials for side in sides if (value, side) not in have]


def changed_case(
    kernel_name: str,
    axis: str,
    value: Any,
    bases: Sequence[dict],
    class_sizes: Mapping[str, Mapping[str, list[int]]],
    refuses: Callable[[dict], bool],
) -> dict | None:
    """A valid base with `axis` set to `value` (a shape class: a size in it) that the model
    takes; None where none does."""
    if not bases:
        return None
    if axis.endswith("_class"):
        dim = axis[0]
        sizes = [0] if value == f"{dim}0" else list(class_sizes[dim].get(value, ()))
        changes = [{dim: size} for size in sizes]
    else:
        changes = [{axis: value}]
    offset = zlib.crc32(f"{kernel_name}::guarantee::{axis}::{value}".encode())
    for step in range(len(bases)):
        base = bases[(offset + step) % len(bases)]
        for change in changes:
            case = {**base, **change}
            if not refuses(case):
                return case
    return None
