"""Shapes at their extremes: sizes of M, K and N past what a matrix lists, where real kernels
break (a launch grid's 65535 limit, a model's K, a K % 512 tail, an N that is not a multiple of
8). Per kernel, each class the axis of its dimension leaves out is added on a valid case of its
own, as the server slice adds token counts; a listed K or N is the shape a user serves and stays.

Each runs where its cost is small: a large M with K and N small, a large K or N with M small.
A class the kernel's declarations refuse is outside its space and left out; one that only the
matrix's `limits:` keep out is not proven, and the run says so. No torch import here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..verdict.case_axes import CaseParams
from .schema import size_problem

# Sizes tried for the dimensions an extreme leaves small, smallest cost first.
SMALL_SIZES = {"m": (1, 2, 16, 17, 32, 128), "k": (16, 32, 64, 128, 8, 256), "n": (16, 32, 64, 128, 8, 256)}


@dataclass(frozen=True)
class Extreme:
    label: str  # as the coverage line and the notes name it
    dim: str
    size: int
    holds: Callable[[int], bool]  # a listed size in the class: the class is then not added
    doc: str


EXTREMES: tuple[Extreme, ...] = (
    Extreme("m65536", "m", 65536, lambda v: v > 65535, "M past a launch grid's 65535 limit"),
    Extreme("k14336", "k", 14336, lambda v: v >= 4096 and v % 512 == 0, "a model's K (an MLP's down projection)"),
    Extreme("k11008", "k", 11008, lambda v: v > 4096 and v % 512 != 0, "a model's K with a K % 512 tail"),
    Extreme("n36", "n", 36, lambda v: v % 8 != 0, "N % 8 != 0 (a vector store's tail)"),
)
BY_LABEL = {extreme.label: extreme for extreme in EXTREMES}


def listed_sizes(value: Any) -> list[int]:
    """The sizes an axis of M, K or N holds (a {min, max} range by its ends: a range that reaches
    a class holds its edge)."""
    if isinstance(value, dict):
        return [value["min"], value["max"]]
    return list(value)


def wanted(axes: Mapping[str, Any]) -> list[Extreme]:
    """The extreme classes the profile's axes leave out."""
    return [e for e in EXTREMES if not any(e.holds(size) for size in listed_sizes(axes[e.dim]) if size)]


@dataclass
class KernelExtremes:
    """One kernel's extreme cases, and the classes `limits:` kept out (label -> the limit's words)."""

    cases: list[CaseParams]
    capped: dict[str, str]


def small_sizes(axes: Mapping[str, Any]) -> dict[str, list[int]]:
    """Per dimension, the sizes an extreme's other dimensions take, first to last: the listed
    ones (a listed K or N is the shape a user serves), smallest first, then SMALL_SIZES."""
    found = {}
    for dim, fallback in SMALL_SIZES.items():
        listed = sorted({size for size in listed_sizes(axes[dim]) if size})
        found[dim] = listed + [size for size in fallback if size not in listed]
    return found


def kernel_extremes(
    kernel_name: str,
    bases: Sequence[CaseParams],
    modes: Sequence[str],
    extremes: Sequence[Extreme],
    refuses: Callable[[CaseParams], bool],
    limits: Mapping[str, int],
    small: Mapping[str, Sequence[int]] = SMALL_SIZES,
) -> KernelExtremes:
    """Per extreme class, one case on a valid base with the other dimensions small (`small`:
    per dimension, the sizes to try in order); `refuses` says whether the kernel's model or the
    matrix's exclude rules refuse a case."""
    found = KernelExtremes([], {})
    if not bases or not modes:
        return found
    for index, extreme in enumerate(extremes):
        offset = zlib.crc32(f"{kernel_name}::extreme::{extreme.label}".encode())
        capped = None
        for step in range(len(bases)):
            base = bases[(offset + step) % len(bases)].without("special_side")
            case, cap = _sized(base, extreme, refuses, limits, small)
            if case is not None:
                found.cases.append(case.with_values(mode=modes[(offset + index) % len(modes)]))
                break
            capped = capped or cap
        else:
            if capped:
                found.capped[extreme.label] = capped
    return found


def _sized(
    base: CaseParams,
    extreme: Extreme,
    refuses: Callable[[CaseParams], bool],
    limits: Mapping[str, int],
    small: Mapping[str, Sequence[int]],
) -> tuple[CaseParams | None, str | None]:
    """The base at the extreme size with the smallest other sizes the model takes; else None and,
    where only `limits:` stood in the way, the limit's words."""
    others = [dim for dim in ("m", "k", "n") if dim != extreme.dim]
    capped = None
    for first in small[others[0]]:
        for second in small[others[1]]:
            case = base.with_values(**{extreme.dim: extreme.size, others[0]: first, others[1]: second})
            if refuses(case):
                continue
            problem = size_problem(case.m, case.k, case.n, limits)
            if problem is None:
                return case, None
            capped = capped or problem[1]
    return None, capped
