"""The steps of a case's call sequence (verdict/sequence.py), drawn per case from its id and the
run's seed: one call at another K, one at another N, one with another output dtype, one with
other operand dtypes, one with the bias added or dropped and one with another weight of the same
shape (the next layer), in a drawn order, each only where the kernel's support model admits it
and a dtype only among those the profile draws the kernel's cases with (what its matrix says it
serves); then the first shape again. Which value each step takes is drawn too (tails, halves,
doubles, the sizes the kernel's rules test against), so across a kernel's cases the steps reach
the classes nobody listed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from ..matrix.case_params import Case, input_seed
from ..matrix.support import SupportModel
from ..verdict.case_axes import CaseParams
from ..verdict.sequence import BACK

KINDS = ("k", "n", "out_dtype", "dtype", "bias", "weight")
OUT_DTYPE_STEPS = ("bf16", "fp16", "fp32")
# A step's float64 reference costs M*K*N multiply-adds: no step costs more than its case or this.
STEP_MACS = 1 << 24


def drawn_values(cases: Iterable[Case]) -> dict[str, dict[str, tuple]]:
    """kernel -> {"out_dtype": the output dtypes, "dtypes": the (dtype_a, dtype_b) pairs, "bias":
    with and/or without} of its valid cases."""
    found: dict[str, dict[str, set]] = {}
    for case in cases:
        if case.params.purpose != "valid":
            continue
        own = found.setdefault(case.params.kernel, {"out_dtype": set(), "dtypes": set(), "bias": set()})
        own["out_dtype"].add(case.params.out_dtype)
        own["dtypes"].add((case.params.dtype_a, case.params.dtype_b))
        own["bias"].add(bool(case.params.bias))
    return {kernel: {axis: tuple(sorted(values)) for axis, values in own.items()} for kernel, own in found.items()}


def planned_sequence(
    case_id: str, params: CaseParams, run_seed: int, model: SupportModel, drawn: Mapping[str, tuple] | None = None
) -> list[dict]:
    """[{"kind", "label", "changes", "seed"}]: the steps after the call at another M, in order.
    `drawn`: drawn_values of the case's kernel (no dtype steps without it)."""
    if params.grouped:
        return []
    draw = random.Random(input_seed(run_seed, f"{case_id}@sequence"))
    kinds = list(KINDS)
    draw.shuffle(kinds)
    steps = []
    for kind in kinds:
        changes = _changes(kind, params, model, draw, drawn or {})
        if changes is not None:
            label = ", ".join(f"{key}={value}" for key, value in changes.items()) or "a new weight"
            steps.append(_step(case_id, run_seed, kind, label, changes))
    if steps:
        steps.append(_step(case_id, run_seed, BACK, "the first shape", {}))
    return steps


def _step(case_id: str, run_seed: int, kind: str, label: str, changes: dict) -> dict:
    return {"kind": kind, "label": label, "changes": changes, "seed": input_seed(run_seed, f"{case_id}@{kind}")}


def _changes(
    kind: str, params: CaseParams, model: SupportModel, draw: random.Random, drawn: Mapping[str, tuple]
) -> dict[str, Any] | None:
    if kind in ("k", "n"):
        return _other_size(kind, params, model, draw)
    if kind == "weight":
        return {}  # the same call with a new weight: only its values (the step's seed) change
    if kind == "bias":
        if (not params.bias) not in drawn.get("bias", ()):
            return None  # a matrix that pins the bias keeps it pinned
        options: list[dict] = (
            [{"bias": False}] if params.bias else [{"bias": True}, {"bias": True, "bias_dtype": "out"}]
        )
        return _first_admitted(options, params, model)
    if kind == "out_dtype":
        if params.bias and params.bias_dtype != "out":
            return None  # the bias's own dtype stays; another output dtype beside it is another rule
        if params.out_dtype not in OUT_DTYPE_STEPS:
            return None
        choices = [d for d in drawn.get("out_dtype", ()) if d in OUT_DTYPE_STEPS and d != params.out_dtype]
        draw.shuffle(choices)
        return _first_admitted([{"out_dtype": d} for d in choices], params, model)
    pairs = [pair for pair in drawn.get("dtypes", ()) if pair != (params.dtype_a, params.dtype_b)]
    draw.shuffle(pairs)
    return _first_admitted([{"dtype_a": a, "dtype_b": b} for a, b in pairs], params, model)


def _other_size(dim: str, params: CaseParams, model: SupportModel, draw: random.Random) -> dict | None:
    value = getattr(params, dim)
    steps = {1, 8, 16, 32, 64, *model.divisors}
    candidates = [value + s for s in steps] + [value - s for s in steps] + [value * 2, value // 2]
    draw.shuffle(candidates)
    macs = params.m * params.k * params.n
    others = params.m * params.k * params.n // value if value else 0
    fits = [c for c in dict.fromkeys(candidates) if c >= 1 and c != value and others * c <= max(macs, STEP_MACS)]
    return _first_admitted([{dim: c} for c in fits], params, model)


def _first_admitted(options: list[dict], params: CaseParams, model: SupportModel) -> dict | None:
    for changes in options:
        if not model.breaks(params.with_values(**changes)):
            return changes
    return None
