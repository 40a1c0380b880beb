"""A case as reports and runs read it: its parameters in their order, its id (a readable head plus
a short hash of every parameter), its input seed and the rules (exclude, known failure) that
match it.

Kept apart from generation (cases.py) so that reading reports (compare, gate: the tox report and
gate envs) needs neither the covering-array library nor torch.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..verdict.case_axes import CaseParams
from ..verdict.regimes import special_operand_of
from ..verdict.scale_forms import FORMS
from .schema import CATEGORICAL_AXES, SHAPE_AXES

SCALE_SHORT = {form.id: form.short for form in FORMS}
LAYOUT_SHORT = {"noncontiguous": "nc", "offset": "off", "expanded": "exp"}
KERNEL_SHORT = {"aten_scaled_mm": "fp8", "int8_w8a8": "w8a8", "int8_bmm": "i8bmm"}
REGIME_SHORT = {
    "full_range": "fullrange",
    "real_scales": "realscales",
    "near_limit": "nearlimit",
    "cancelling": "cancel",
}
OPERAND_LAYOUT_SHORT = {
    "a_padded": "apad",
    "a_offset": "aoff",
    "b_row_major": "brow",
    "b_padded": "bpad",
    "scale_on_host": "hostscale",
    "a_token_stride0": "tok0",
}


def _dtype_part(params: CaseParams) -> str:
    a, b = params.dtype_a, params.dtype_b
    if a == "int8":
        return ""
    # int8 beside an fp8 dtype: a corpus entry may pair them (the kernel's verdict says whether it takes them).
    short = {
        "e4m3fn": "e4m3",
        "e5m2": "e5m2",
        "e4m3fnuz": "e4m3fnuz",
        "e5m2fnuz": "e5m2fnuz",
        "fp4e2m1": "fp4",
        "int8": "i8",
    }
    return short[a] if a == b else f"{short[a]}x{short[b]}"


def case_id(given: CaseParams | Mapping[str, Any]) -> str:
    """Readable id plus a short hash of every parameter, e.g. fp8e4m3-s0d_x_s1d-m17k64n32-bf16-inductor-1a2b3c."""
    params = given if isinstance(given, CaseParams) else CaseParams.from_json(given)
    kernel = params.kernel
    dtype = _dtype_part(params)
    head = KERNEL_SHORT.get(kernel)
    head = f"{head}{dtype}" if head else (f"{kernel}.{dtype}" if dtype else kernel)
    parts = [
        head,
        f"{SCALE_SHORT[params.scale_a]}_x_{SCALE_SHORT[params.scale_b]}",
        f"m{params.m}k{params.k}n{params.n}",
        params.out_dtype,
        params.mode,
    ]
    if params.bias:
        parts.append("bias")
    if params.use_fast_accum:
        parts.append("fast")
    if params.scale_layout != "contiguous":
        parts.append(LAYOUT_SHORT[params.scale_layout])
    if params.activation_rank == 3:
        parts.append("3d")
    if params.special_scale != "none":
        parts.append(params.special_scale + ("_b" if params.special_side == "b" else ""))
    if params.special_operand != "none":
        value, operand = special_operand_of(params)
        parts.append(f"{value}_in_{operand}")
    if params.value_regime != "standard":
        parts.append(REGIME_SHORT[params.value_regime])
    if params.operand_layout != "dense":
        parts.append(OPERAND_LAYOUT_SHORT[params.operand_layout])
    # Axes only some kernels take (schema.KERNEL_AXES): in the id only where the case has them.
    if params.grouped:
        parts.append(f"{params.group_layout}g{params.groups}-{params.group_sizes}")
    if params.scale_result != "none":
        parts.append(f"sr{params.scale_result}")
    if params.bias and params.bias_dtype != "out":
        parts.append(f"bias{params.bias_dtype}")
    if params.scale_keepdim:
        parts.append("keepdim")
    if params.scale_dtype != "fp32":
        parts.append(f"s{params.scale_dtype}")
    digest = hashlib.sha256(json.dumps(params.to_json(), sort_keys=True).encode()).hexdigest()[:6]
    return "-".join(parts + [digest])


def matches(rule: Mapping[str, Any], params: CaseParams | Mapping[str, Any]) -> bool:
    """A rule (exclude or known-failure match) holds when every key it names matches: a key the
    case (or a covering row) was given, with one of the rule's values."""
    for key, want in rule.items():
        if isinstance(params, CaseParams):
            if not params.has(key):
                return False
            value = params.value_of(key)
        elif key in params:
            value = params[key]
        else:
            return False
        if value not in (want if isinstance(want, list) else [want]):
            return False
    return True


@dataclass(frozen=True)
class Case:
    id: str
    params: CaseParams

    def __post_init__(self) -> None:
        if not isinstance(self.params, CaseParams):  # a case read back (a corpus, a report)
            object.__setattr__(self, "params", CaseParams.from_json(self.params))

    def to_json(self) -> dict:
        return self.params.to_json()


# The order parameters are kept (and printed) in: the kernel, the matrix's axes, then the rest.
PARAM_ORDER = ("kernel", *CATEGORICAL_AXES, *SHAPE_AXES, "purpose", "expected_refusal")


def ordered_params(params: Mapping[str, Any]) -> dict:
    rank = {key: index for index, key in enumerate(PARAM_ORDER)}
    return dict(sorted(params.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def make_case(params: Mapping[str, Any] | CaseParams) -> Case:
    """The case of a generated row or a record (its keys put in PARAM_ORDER)."""
    given = params.to_json() if isinstance(params, CaseParams) else params
    record = CaseParams.from_json(ordered_params(given))
    return Case(case_id(record), record)


def input_seed(run_seed: int, cid: str) -> int:
    """Per-case seed; crc32 because hash() is salted per process."""
    return zlib.crc32(f"{run_seed}::{cid}".encode())
