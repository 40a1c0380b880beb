"""The coverage guarantee: per kernel, every value of every dimension in its space and every
special scale value on each side gets a case that is checked (a valid case, or a special one),
whatever the profile's `cases:`; so do a NaN and an Inf in each operand and M == N with each
side's per-row or per-channel scale (INTERACTIONS). The budget sizes the pairwise fill around it, never it: a value
the fill missed gets a case of its own here, on a valid case of the kernel with that one value
changed. No torch import here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..verdict.case_axes import CaseParams
from ..verdict.scale_forms import FORMS
from .shapes import class_of

CHECKED_PURPOSES = ("valid", "special")


def value_of(params: CaseParams, axis: str) -> Any:
    """The value a case gives a dimension of the space (the coverage report reads them alike):
    None for an axis it was not given."""
    if axis.endswith("_class"):
        dim = axis[0]
        size = params.value_of(dim)
        return class_of(dim, size) if size else f"{dim}0"
    if axis == "special_scale":
        return params.special_scale
    return params.given_value(axis)


def missing_values(space_values: Mapping[str, list], taken: Sequence[CaseParams]) -> list[tuple[str, Any]]:
    """(axis, value) of the kernel's space that no taken case gives, special_scale aside (its
    values are guaranteed per side: missing_specials)."""
    found = []
    for axis, values in space_values.items():
        if axis in ("special_scale", "special_side"):
            continue
        have = {value_of(p, axis) for p in taken}
        found += [(axis, value) for value in values if value not in have]
    return found


def missing_specials(specials: Sequence[str], sides: Sequence[str], taken: Sequence[CaseParams]) -> list:
    """(special value, side) pairs no taken case has."""
    have = {(p.special_scale, p.special_side) for p in taken}
    return [(value, side) for value in specials for side in sides if (value, side) not in have]


def changed_case(
    kernel_name: str,
    axis: str,
    value: Any,
    bases: Sequence[CaseParams],
    class_sizes: Mapping[str, Mapping[str, list[int]]],
    refuses: Callable[[CaseParams], bool],
) -> CaseParams | None:
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
            case = base.with_values(**change)
            if not refuses(case):
                return case
    return None


FP8 = ("e4m3fn", "e5m2")
_FORMS = {form.id: form for form in FORMS}
# Which operand each special operand value puts its element in.
OPERAND_SPECIALS = {
    "nan": ("nan", "nan_ab"),
    "nan_b": ("nan_b", "nan_ab"),
    "inf": ("inf", "inf_ab"),
    "inf_b": ("inf_b", "inf_ab"),
}


def _inf_side(change: dict) -> str | None:
    """The operand dtype an Inf of `change` needs to be e5m2 (e4m3fn holds none), or None."""
    value = str(change.get("special_operand", ""))
    if "inf" not in value:
        return None
    return "dtype_b" if value.endswith("_b") else "dtype_a"


def _per_element(form: str) -> bool:
    return not _FORMS[form].per_tensor


# What a single dimension's value cannot show, each as (label, does a case have it, the change
# that gives a base it): a NaN or an Inf in each operand (an Inf where that operand is e5m2, the
# fp8 dtype that holds one), whose loads a kernel may decode or sanitise one side only; M == N with a per-row
# scale_a or a per-channel scale_b, where a scale applied along the wrong axis still fits.
INTERACTIONS: tuple[tuple[str, Callable[[CaseParams], bool], dict], ...] = (
    *(
        (
            f"{value}-operand",
            lambda p, value=value: p.special_operand in OPERAND_SPECIALS[value],
            {"special_operand": value},
        )
        for value in OPERAND_SPECIALS
    ),
    ("m=n-row-a", lambda p: p.m == p.n and _per_element(p.scale_a), {"m": "n", "scale_a": "per-row"}),
    ("m=n-channel-b", lambda p: p.m == p.n and _per_element(p.scale_b), {"m": "n", "scale_b": "per-channel"}),
)


def missing_interactions(taken: Sequence[CaseParams], specials: bool) -> list[dict]:
    """The changes of INTERACTIONS no taken case has (the operand specials only when the profile
    asks for special values, on fp8 operands)."""
    fp8 = any(p.dtype_a in FP8 for p in taken)
    found = []
    for label, has, change in INTERACTIONS:
        if "operand" in label and not (specials and fp8):
            continue
        if not any(has(p) for p in taken):
            found.append(change)
    return found


def interaction_case(
    kernel_name: str, change: dict, bases: Sequence[CaseParams], refuses: Callable[[CaseParams], bool]
) -> CaseParams | None:
    """A valid base given `change` that the model takes: M set to the base's N, a scale kept
    where the base's is per element (else the base is passed over), an operand special on fp8
    operands in the standard value regime (an Inf on an e5m2 operand); None where no base takes
    it, as where the profile draws no e5m2 on that side."""
    if not bases:
        return None
    offset = zlib.crc32(f"{kernel_name}::guarantee::{sorted(change.items())}".encode())
    for step in range(len(bases)):
        base = bases[(offset + step) % len(bases)]
        case = base.with_values(**{k: v for k, v in change.items() if k not in ("m", "scale_a", "scale_b")})
        if change.get("m") == "n":
            case = case.with_values(m=base.n)
        side = "scale_a" if "scale_a" in change else "scale_b" if "scale_b" in change else None
        if side is not None and not _per_element(base.value_of(side)):
            continue
        if "special_operand" in change and (
            base.dtype_a not in FP8 or base.dtype_b not in FP8 or base.value_regime != "standard"
        ):
            continue
        inf_side = _inf_side(change)
        if inf_side is not None and base.value_of(inf_side) != "e5m2":
            continue
        if case.m and not refuses(case):
            return case
    return None
