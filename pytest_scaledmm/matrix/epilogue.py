"""Stronger interactions where fused-epilogue bugs live. Over a kernel's epilogue axes (the two
scale forms, compile mode, bias, bias dtype, output dtype): every 3-way combination its valid
cases can have, and every whole epilogue (both scale forms, bias, bias dtype and output dtype
together) under some compiled mode, since an Inductor epilogue can be wrong only when all of them
meet. The rest of the space stays pairwise. No torch import here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

EPILOGUE_AXES = ("scale_a", "scale_b", "mode", "bias", "bias_dtype", "out_dtype")
STRENGTH = 3
EAGER_MODE = "eager"  # the one compile mode that compiles nothing


def varying_axes(values: Mapping[str, Sequence]) -> list[str]:
    """The epilogue axes a kernel's space draws more than one value of."""
    return [axis for axis in EPILOGUE_AXES if len(values.get(axis, ())) > 1]


def targets(row: Mapping[str, Any], axes: Sequence[str]) -> set[tuple]:
    """What one case covers: its 3-way combinations over `axes`, and its whole epilogue where
    its mode compiles."""
    found = {
        ("3-way", *((axis, row.get(axis)) for axis in combo))
        for combo in itertools.combinations(axes, min(STRENGTH, len(axes)))
    }
    if row.get("mode") != EAGER_MODE:
        found.add(("compiled", *((axis, row.get(axis)) for axis in axes if axis != "mode")))
    return found


def possible_targets(values: Mapping[str, Sequence], allowed: Callable[[dict], bool]) -> tuple[list[dict], set]:
    """The epilogue combinations some valid case can have, and what they cover."""
    axes = varying_axes(values)
    combos = [dict(zip(axes, combo)) for combo in itertools.product(*(values[axis] for axis in axes))]
    combos = [combo for combo in combos if allowed(combo)]
    return combos, set().union(*(targets(combo, axes) for combo in combos)) if combos else set()


def added_rows(
    values: Mapping[str, Sequence],
    rows: Iterable[Mapping[str, Any]],
    allowed: Callable[[dict], bool],
    complete: Callable[[dict, int], dict | None],
) -> list[dict]:
    """Rows for the epilogue targets `rows` leave out: greedily, the combination that covers most
    of what is missing, completed to a valid row by `complete`."""
    axes = varying_axes(values)
    if len(axes) < 2:
        return []
    combos, wanted = possible_targets(values, allowed)
    missing = wanted - set().union(*(targets(row, axes) for row in rows))
    covers = [targets(combo, axes) for combo in combos]
    added: list[dict] = []
    while missing and combos:
        best = max(range(len(combos)), key=lambda i: (len(covers[i] & missing), -i))
        if not covers[best] & missing:
            break
        row = complete(combos[best], len(added))
        if row is not None:
            added.append(row)
            missing -= covers[best]
        combos.pop(best)
        covers.pop(best)
    return added


def as_lists(found: Iterable[tuple]) -> list[list]:
    """Targets as the report stores them (JSON lists, sorted)."""
    return sorted(([kind, *(list(pair) for pair in pairs)] for kind, *pairs in found), key=repr)


def from_lists(stored: Iterable[Sequence]) -> set[tuple]:
    return {(kind, *(tuple(pair) for pair in pairs)) for kind, *pairs in stored}
