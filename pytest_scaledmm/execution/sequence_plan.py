"""The steps of a case's call sequence (verdict/sequence.py), drawn per case from its id and the
run's seed: one call at another K, one at another N, one with another output dtype and one with
the other fp8 operand dtypes, in a drawn order, each only where the kernel's support model admits
it; then the first shape again. Which value each step takes is drawn too (tails, halves,
doubles, the sizes the kernel's rules test against), so across a kernel's cases the steps reach
the classes nobody listed.
"""

from __future__ import annotations

import random
from typing import Any

from ..matrix.case_params import input_seed
from ..matrix.support import SupportModel
from ..verdict.case_axes import CaseParams
from ..verdict.sequence import BACK

KINDS = ("k", "n", "out_dtype", "dtype")
OTHER_FP8 = {"e4m3fn": "e5m2", "e5m2": "e4m3fn"}
OUT_DTYPE_STEPS = ("bf16", "fp16", "fp32")
# A step's float64 reference costs M*K*N multiply-adds: no step costs more than its case or this.
STEP_MACS = 1 << 24


def planned_sequence(case_id: str, params: CaseParams, run_seed: int, model: SupportModel) -> list[dict]:
    """[{"kind", "label", "changes", "seed"}]: the steps after the call at another M, in order."""
    if params.grouped:
        return []
    draw = random.Random(input_seed(run_seed, f"{case_id}@sequence"))
    kinds = list(KINDS)
    draw.shuffle(kinds)
    steps = []
    for kind in kinds:
        changes = _changes(kind, params, model, draw)
        if changes:
            label = ", ".join(f"{key}={value}" for key, value in changes.items())
            steps.append(_step(case_id, run_seed, kind, label, changes))
    if steps:
        steps.append(_step(case_id, run_seed, BACK, "the first shape", {}))
    return steps


def _step(case_id: str, run_seed: int, kind: str, label: str, changes: dict) -> dict:
    return {"kind": kind, "label": label, "changes": changes, "seed": input_seed(run_seed, f"{case_id}@{kind}")}


def _changes(kind: str, params: CaseParams, model: SupportModel, draw: random.Random) -> dict[str, Any] | None:
    if kind in ("k", "n"):
        return _other_size(kind, params, model, draw)
    if kind == "out_dtype":
        if params.bias and params.bias_dtype != "out":
            return None  # the bias's own dtype stays; another output dtype beside it is another rule
        if params.out_dtype not in OUT_DTYPE_STEPS:
            return None
        choices = [d for d in OUT_DTYPE_STEPS if d != params.out_dtype]
        draw.shuffle(choices)
        return _first_admitted([{"out_dtype": d} for d in choices], params, model)
    if params.dtype_a in OTHER_FP8 and params.dtype_b in OTHER_FP8:
        return _first_admitted(
            [{"dtype_a": OTHER_FP8[params.dtype_a], "dtype_b": OTHER_FP8[params.dtype_b]}], params, model
        )
    return None


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
