"""The oracle: each side's output of one case checked against the float64 reference.

A side-checker is `check(eager_ran, eager_out, compiled_outs) -> (eager_check, compiled_check)`;
`guarded` runs one so that whatever the kernel returned ends as a check of that side: an output
on the wrong device, or one the checker cannot read, is a failed check that names the problem.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .case_axes import CaseParams
from .draw import CaseInputs, expected_shape
from .reference import Reference, check_metadata, compare, parity, reference
from .signature_text import UNCHECKABLE

# One side's check (ok, ratio, problem ...), None where the side did not run; a side-checker's answer.
SideChecks = tuple[dict | None, dict | None]
# check(eager_ran, eager_out, compiled_outs): eager_out is whatever the kernel returned.
SideChecker = Callable[[bool, Any, Sequence[Any] | None], SideChecks]


def worst(checks: list) -> dict:
    """The first failing check (reference before parity), else the closest one."""
    failing = [c for c in checks if not c["ok"]]
    return failing[0] if failing else max(checks, key=lambda c: c["ratio"])


def check_sides(
    params: CaseParams,
    inputs: CaseInputs,
    eager_ran: bool,
    eager_out: Any,
    compiled_outs: Sequence[Any] | None,
    slack: float,
    ref: Reference | None = None,
) -> SideChecks:
    """Each side against the float64 reference (reference.reference: exact values for zero and
    negative scales, IEEE non-finite positions for inf and nan ones, the tolerance built from the
    finite scales). With a special scale value the compiled outputs must also match eager's
    (parity: the same NaN and inf positions, finite values within twice the tolerance)."""
    shape, dtype = expected_shape(params), inputs.out_dtype
    ref = reference(params, inputs, slack) if ref is None else ref
    eager_check = compiled_check = None
    if eager_ran:
        eager_check = compare(eager_out, ref, shape, dtype)
    if compiled_outs is not None:
        checks = [compare(out, ref, shape, dtype) for out in compiled_outs]
        special = params.special
        if special and eager_ran and check_metadata(eager_out, shape, dtype) is None:
            bound = {**(ref.bound or {}), "model": "twice the reference tolerance, against eager"}
            checks += [parity(eager_out, out, ref.tolerance, shape, dtype, bound) for out in compiled_outs]
        compiled_check = worst(checks)
    return eager_check, compiled_check


def case_checker(params: CaseParams, inputs: CaseInputs, slack: float) -> SideChecker:
    """The side-checker of a case: check_sides with its parameters, inputs and slack."""
    made: list[Reference] = []  # the reference, built at the first check: the serving loop checks twice

    def check(eager_ran: bool, eager_out: Any, compiled_outs: Sequence[Any] | None) -> SideChecks:

        if not made:
            made.append(reference(params, inputs, slack))
        return check_sides(params, inputs, eager_ran, eager_out, compiled_outs, slack, made[0])

    return check


def reference_checker(ref: Reference, shape: tuple[int, ...], dtype: torch.dtype) -> SideChecker:
    """A side-checker against a given inputs.Reference, without parity (triage's plain matmul)."""

    def check(eager_ran: bool, eager_out: Any, compiled_outs: Sequence[Any] | None) -> SideChecks:
        eager_check = compare(eager_out, ref, shape, dtype) if eager_ran else None
        compiled_check = None
        if compiled_outs is not None:
            compiled_check = worst([compare(out, ref, shape, dtype) for out in compiled_outs])
        return eager_check, compiled_check

    return check


def device_problem(out: Any, device: str) -> dict | None:
    """A failed check when `out` is a tensor on another device than the case's (a meta tensor,
    a GPU tensor from a CPU run); the oracle cannot read such an output."""

    if not isinstance(out, torch.Tensor):
        return None  # the oracle names what was returned instead
    want, got = torch.device(device), out.device
    if got.type == want.type and (want.index is None or got.index is None or got.index == want.index):
        return None
    return {"ok": False, "problem": f"device {got}, expected {device}", "ratio": math.inf}


def unchecked(exc: Exception) -> dict:
    """The failed check of a side whose output the checker raised on."""
    first = (str(exc).splitlines() or [""])[0][:200]
    return {
        "ok": False,
        "problem": f"{UNCHECKABLE} ({type(exc).__name__})",
        "ratio": math.inf,
        "error": f"{type(exc).__name__}: {first}",
    }


def _values_elsewhere(check: SideChecker, bad: dict, out: Any, device: str, side: str) -> dict:
    """A wrong-device check with the values of `out` compared all the same, on the case's
    device (as reference.compare does behind a wrong dtype); as it was where they cannot be."""
    if not isinstance(out, torch.Tensor) or out.device.type == "meta":
        return {**bad, "values": "not compared: the output holds no values here"}
    try:
        moved = out.detach().to(device)
        found = check(True, moved, None)[0] if side == "eager" else check(False, None, [moved])[1]
    except Exception as exc:
        return {**bad, "values": f"not compared: {type(exc).__name__} reading them on {device}"}
    if not isinstance(found, dict):
        return bad
    measures = {key: value for key, value in found.items() if key not in ("ok", "bound", "values")}
    # Behind a wrong dtype too, the values' own keys are there already (reference.compare).
    for key in ("ratio", "problem", "pattern", "where"):
        if key in measures:
            value = measures.pop(key)
            measures.setdefault(f"values_{key}", value)
    return {**measures, **bad, "values": found.get("values") or f"compared on {device}", "bound": found.get("bound")}


def guarded(
    check: SideChecker, eager_ran: bool, eager_out: Any, compiled_outs: Sequence[Any] | None, device: str
) -> SideChecks:
    """(eager_check, compiled_check) from a side-checker, guarded: an output on the wrong
    device, or an exception while checking, is a failed check of that side that says so (with
    its values compared on the case's device all the same, where they can be read)."""
    eager_bad = device_problem(eager_out, device) if eager_ran else None
    if eager_bad is not None:
        eager_bad = _values_elsewhere(check, eager_bad, eager_out, device, "eager")
    compiled_bad = None
    if compiled_outs is not None:
        for out in compiled_outs:
            found = device_problem(out, device)
            if found is not None:
                compiled_bad = _values_elsewhere(check, found, out, device, "compiled")
                break
    eager_ran = eager_ran and eager_bad is None
    compiled_outs = None if compiled_bad else compiled_outs
    try:
        eager_check, compiled_check = check(eager_ran, eager_out, compiled_outs)
    except Exception:
        # One side's output may be what the oracle cannot read: check each side alone.
        eager_check = compiled_check = None
        if eager_ran:
            try:
                eager_check = check(True, eager_out, None)[0]
            except Exception as exc:
                eager_check = unchecked(exc)
        if compiled_outs is not None:
            try:
                compiled_check = check(False, None, compiled_outs)[1]
            except Exception as exc:
                compiled_check = unchecked(exc)
    return eager_bad or eager_check, compiled_bad or compiled_check
