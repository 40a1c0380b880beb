"""One place that builds a case's parameters for tests: a complete, valid fp8 case of the built-in
`aten_scaled_mm`, with any field changed. Tests say only what their case is about."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_scaledmm.matrix.case_params import Case, make_case
from pytest_scaledmm.verdict.case_axes import CaseParams

BASE_CASE: dict[str, Any] = {
    "kernel": "aten_scaled_mm",
    "scale_a": "tensor_0d",
    "scale_b": "tensor_0d",
    "dtype_a": "e4m3fn",
    "dtype_b": "e4m3fn",
    "out_dtype": "bf16",
    "bias": False,
    "use_fast_accum": False,
    "mode": "eager",
    "m": 16,
    "k": 32,
    "n": 16,
}


def case_params(*, without: Iterable[str] = (), **changes: Any) -> dict[str, Any]:
    """BASE_CASE's keys with `changes`, as a plain dict (what a matrix or a corpus holds). Keys of
    BASE_CASE named in `without` are left out unless `changes` gives them: a case that never held
    them, so another case (another id, another record)."""
    dropped = set(without)
    return {**{key: value for key, value in BASE_CASE.items() if key not in dropped}, **changes}


def case_record(**changes: Any) -> CaseParams:
    return CaseParams.from_json(case_params(**changes))


def test_case(**changes: Any) -> Case:
    """The case of those parameters, with its id as the generator makes it."""
    return make_case(case_params(**changes))


test_case.__test__ = False  # type: ignore[attr-defined]  # a factory, not a test


def failing_call(params: CaseParams | dict, sequence: dict | None) -> CaseParams:
    """The parameters of the call that failed a case (a record, or a report's JSON of one): the
    case's own, or those of the step of its call sequence that failed (extra.sequence), which
    changes its K, N or a dtype."""
    found = params if isinstance(params, CaseParams) else CaseParams.from_json(params)
    steps = {step["label"]: step for step in (sequence or {}).get("steps", [])}
    failed = (sequence or {}).get("failed")
    if failed in steps:
        found = found.with_values(**steps[failed]["changes"])
    return found
