"""Stronger interactions where fused-epilogue bugs live. Over a kernel's epilogue axes (the two
scale forms, compile mode, bias, bias dtype, output dtype): every 3-way combination its valid
cases can have, and every whole epilogue (both scale forms, bias, bias dtype and output dtype
together) under some compiled mode, since an Inductor epilogue can be wrong only when all of them
meet. The rest of the space stays pairwise. No torch import here.

A target is a string (the report stores them so): its kind, then `axis=value` per axis, joined
by `|`; `covered` reads the axes back from each, so targets of different widths (the parts of a
composite profile) are each judged on their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..verdict.case_axes import CaseParams

EPILOGUE_AXES = ("scale_a", "scale_b", "mode", "bias", "bias_dtype", "out_dtype")
STRENGTH = 3
KINDS = ("3-way", "compiled")
EAGER_MODE = "eager"  # the one compile mode that compiles nothing


def varying_axes(values: Mapping[str, Sequence]) -> list[str]:
    """The epilogue axes a kernel's space draws more than one value of."""
    return [axis for axis in EPILOGUE_AXES if len(values.get(axis, ())) > 1]


def _key(kind: str, row: Mapping[str, Any], axes: Iterable[str]) -> str:
    return "|".join([kind, *(f"{axis}={row.get(axis)}" for axis in axes)])


def targets(row: CaseParams | Mapping[str, Any], axes: Sequence[str]) -> set[str]:
    """What one case (or covering row, or report record's params) covers: its 3-way combinations
    over `axes` (all of them where fewer vary), and its whole epilogue where its mode compiles.
    Nothing where fewer than two axes vary."""
    if len(axes) < 2:
        return set()
    if isinstance(row, CaseParams):
        row = row.to_json()  # what it was given: a key left out reads as None, as in a record
    found = {_key("3-way", row, combo) for combo in itertools.combinations(axes, min(STRENGTH, len(axes)))}
    if row.get("mode") not in (EAGER_MODE, None):
        found.add(_key("compiled", row, [axis for axis in axes if axis != "mode"]))
    return found


def possible_targets(values: Mapping[str, Sequence], allowed: Callable[[dict], bool]) -> tuple[list[dict], set]:
    """The epilogue combinations some valid case can have (with the axes that do not vary at
    their one value: a mode of eager alone compiles nothing), and what they cover."""
    axes = varying_axes(values)
    fixed = {axis: values[axis][0] for axis in EPILOGUE_AXES if axis in values and len(values[axis]) == 1}
    combos = [{**fixed, **dict(zip(axes, combo))} for combo in itertools.product(*(values[axis] for axis in axes))]
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


def kind_of(target: str) -> str:
    return target.partition("|")[0]


def is_target(stored: Any) -> bool:
    """Whether a stored item reads as a target (a report is input: anything else is passed over)."""
    if not isinstance(stored, str) or kind_of(stored) not in KINDS:
        return False
    return all("=" in pair for pair in stored.split("|")[1:])


def covered(wanted: Iterable[Any], cases: Iterable[Mapping[str, Any]]) -> set[str]:
    """The targets of `wanted` that some case covers, each judged on the axes it names."""
    groups: dict[tuple, set[str]] = {}
    for target in filter(is_target, wanted):
        kind, *pairs = target.split("|")
        groups.setdefault((kind, tuple(pair.partition("=")[0] for pair in pairs)), set()).add(target)
    found: set[str] = set()
    for case in cases:
        compiled = case.get("mode") not in (EAGER_MODE, None)
        for (kind, axes), keys in groups.items():
            if kind == "compiled" and not compiled:
                continue
            key = _key(kind, case, axes)
            if key in keys:
                found.add(key)
    return found
