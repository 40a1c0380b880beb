"""How a root cause is named and shown. The grouping key stays normalised (sizes stripped, one
line per bug); what a reader sees beside it is one real example of it, numbers kept, with the
user-code frame it came from. A MISMATCH's cause names its kernel and what is off: non-finite
outputs, one constant factor, a band of rows or columns, or how far past the bound the error
goes. A group's `shape_classes` are the shape classes its failing cases all share and the
passing cases of its kernels never have.

No torch import here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..matrix.shapes import CLASSES, classes_of
from ..verdict import outcome as oc
from ..verdict.signature_text import OFF_THE_REFERENCE, SEQUENCE_CALL
from .numbers import number

EXAMPLE_LIMIT = 200  # characters of an example message shown beside its root cause


def original_outcome(record: Mapping) -> str | None:
    """The class before the known-failure catalogue: an XFAIL's original outcome."""
    outcome = record.get("outcome")
    if outcome in (oc.XFAIL, oc.FIXED_UPSTREAM):
        known = record.get("known_failure")
        original = known.get("original_outcome") if isinstance(known, Mapping) else None
        if isinstance(original, str):
            return original
    return outcome


def wrong_error(record: Mapping) -> Mapping | None:
    """The recorded error of the side that is wrong: eager's where the record's layer says eager
    (or compiled raised nothing), else compiled's; None when neither side raised."""
    eager, compiled = record.get("eager_error"), record.get("compiled_error")
    eager = eager if isinstance(eager, Mapping) else None
    compiled = compiled if isinstance(compiled, Mapping) else None
    if record.get("layer") == "eager" or compiled is None:
        return eager or compiled
    return compiled


def _short(qualified) -> str:
    return str(qualified or "?").rsplit(".", 1)[-1]


# Dynamo's advice in front of a data-dependent guard's message: the message is what follows.
_ADVICE = re.compile(r"^Consider annotating your code using torch\._check\*\(\)\.\s*")


def _first_line(message) -> str:
    """The first line of a message that says something (Dynamo's hints and stacks skipped)."""
    for line in str(message or "").splitlines():
        stripped = _ADVICE.sub("", line.strip())
        if stripped and not oc._NOISE.match(line):
            return " ".join(stripped.split())
    return ""


def error_text(error: Mapping) -> str:
    """`Type: message` as raised, numbers kept: a wrapped error by its root cause, as
    outcome.signature_of names it, without the normalisation."""
    head, text = _short(error.get("type")), _first_line(error.get("message"))
    root = error.get("root_type")
    if root and root != error.get("type"):
        head = f"{head} <- {_short(root)}"
        text = _first_line(error.get("root_message")) or text
    return f"{head}: {text}"[:EXAMPLE_LIMIT].rstrip()


def example_text(record: Mapping) -> str:
    """One real message of a record's root cause: the wrong side's error as raised, or for a
    wrong result how far off it is and where; else the record's detail; "" when it has none."""
    error = wrong_error(record)
    if error is not None and original_outcome(record) not in (oc.MISMATCH, oc.LENIENT_MISMATCH):
        return error_text(error)
    checks = _off_checks(record)
    if original_outcome(record) == oc.MISMATCH and checks:
        return f"{record.get('layer') or 'off'}: {_how_far(checks[0])}"[:EXAMPLE_LIMIT].rstrip()
    detail = record.get("detail")
    if isinstance(detail, str) and detail.strip():
        return " ".join(detail.split())[:EXAMPLE_LIMIT].rstrip()
    return ""  # nothing recorded beyond the signature: the case id alone is the example


def source_of(record: Mapping) -> str | None:
    """The user-code frame ("path:line in fn") the wrong side's error came from, else the other
    side's; None when neither error has one (built-in kernels, errors inside torch)."""
    first = wrong_error(record)
    for error in (first, record.get("compiled_error"), record.get("eager_error")):
        if isinstance(error, Mapping) and isinstance(error.get("source"), str) and error["source"]:
            return error["source"]
    return None


def example_line(record: Mapping) -> str:
    """`ValueError: expected scale_a.stride(1) to be 1, but got 4 (case <id>)`."""
    text = example_text(record)
    return f"{text} (case {record.get('id')})" if text else f"case {record.get('id')}"


# -- a MISMATCH by kernel and by what is off -------------------------------------------------------

# How far past the bound an error without a pattern goes: rounding done twice lands just past
# it, a wrong formula orders of magnitude beyond.
RATIO_BANDS = (
    (4.0, "error up to 4x the bound"),
    (1e3, "error 4-1000x the bound"),
    (float("inf"), "error over 1000x the bound"),
)


def _off_checks(record: Mapping) -> list[Mapping]:
    raw = record.get("errors")
    checks: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return [
        checks[side]
        for side in ("eager", "compiled")
        if isinstance(checks.get(side), Mapping) and checks[side].get("ok") is False
    ]


def what_is_off(check: Mapping) -> str:
    """A failed check's problem, its off pattern, else the band its error/bound falls in."""
    if isinstance(check.get("problem"), str) and check["problem"]:
        return check["problem"]
    if isinstance(check.get("pattern"), str) and check["pattern"]:
        return f"values off the reference {check['pattern']}"
    ratio = number(check.get("ratio"))
    if ratio is None or ratio != ratio:
        return "values off the reference"
    if ratio == float("inf"):
        return "values off the reference, error infinite"
    band = next(text for limit, text in RATIO_BANDS if ratio <= limit)
    return f"values off the reference, {band}"


def _how_far(check: Mapping) -> str:
    """`max |err|/tol = 257 (max abs 9.59); output = 2 x reference`: a failed check's numbers
    (the first wrong side's: the other's, when both are off, is most often the same)."""
    ratio, max_abs = number(check.get("ratio")), number(check.get("max_abs"))
    parts = [check["problem"]] if isinstance(check.get("problem"), str) and check["problem"] else []
    if ratio is not None and max_abs is not None:
        parts.append(f"max |err|/tol = {ratio:.3g} (max abs {max_abs:.3g})")
    if isinstance(check.get("where"), str) and check["where"]:
        parts.append(check["where"])
    return "; ".join(parts) or "off the reference"


def mismatch_cause(record: Mapping) -> str | None:
    """`kernel doubled: values off the reference by one constant factor`: the cause of a
    MISMATCH by its kernel and by what its first wrong side has off; None for other classes."""
    if original_outcome(record) != oc.MISMATCH:
        return None
    checks = [_as_first_call(record, check) for check in _off_checks(record)]
    kernel = (record.get("params") or {}).get("kernel")
    what = what_is_off(checks[0]) if checks else str(record.get("signature") or "MISMATCH").partition(": ")[2]
    return f"kernel {kernel}: {what}" if isinstance(kernel, str) and kernel else what


def _as_first_call(record: Mapping, check: Mapping) -> Mapping:
    """A check failed by a step of the call sequence whose call fails as a first call too
    (extra.sequence.as_first_call): a failure at those parameters, grouped with the same failure
    of cases that make that call first, not by the sequence that reached it."""
    extra = record.get("extra")
    sequence = extra.get("sequence") if isinstance(extra, Mapping) else None
    first = sequence.get("as_first_call") if isinstance(sequence, Mapping) else None
    problem = check.get("problem")
    if first in (None, oc.PASS) or not isinstance(problem, str) or not problem.startswith(f"{SEQUENCE_CALL} ("):
        return check
    rest = problem.partition("): ")[2]
    return {**check, "problem": None if rest == OFF_THE_REFERENCE else rest or None}


# -- shape classes a group's failures alone have -------------------------------------------------------


def _shape_classes(params: Mapping) -> set | None:

    try:
        return set(classes_of(params).values())
    except (KeyError, TypeError, StopIteration):  # a grouped case, a record from elsewhere
        return None


def passing_classes(records: Iterable[Mapping]) -> dict:
    """Kernel -> the shape-class sets of its passing records (for shape_classes)."""
    found: dict = {}
    for record in records:
        if record.get("outcome") == oc.PASS:
            params = record.get("params") or {}
            classes = _shape_classes(params)
            if classes is not None:
                found.setdefault(params.get("kernel"), []).append(classes)
    return found


def shape_classes(failing: Iterable[Mapping], passing: Mapping) -> list[str]:
    """The shape classes (matrix/shapes.py: m1, m2-16, n1blk, nNblk, ...) every failing record
    has and no passing record of the same kernels has (`passing`: passing_classes), when the
    kernels have a passing record at all."""

    failing = list(failing)
    classes = [_shape_classes(r.get("params") or {}) for r in failing]
    known = [c for c in classes if c is not None]
    if len(failing) < 2 or len(known) < len(classes):
        return []
    kernels = {(r.get("params") or {}).get("kernel") for r in failing}
    passed = [c for kernel in kernels for c in passing.get(kernel, ())]
    if not passed:
        return []
    order = [c.name for c in CLASSES]
    return sorted((c for c in set.intersection(*known) if not any(c in p for p in passed)), key=order.index)


def all_text(group: Mapping) -> str:
    """`kernel=k, out_dtype=fp16, shape m1`: what every case of a group shares, as the `all:`
    lines and columns show it."""
    shared = group.get("shared")
    parts = []
    if isinstance(shared, Mapping):
        parts = [f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in shared.items()]
    shapes = [c for c in group.get("shape_classes") or () if isinstance(c, str)]
    if shapes:
        parts.append("shape " + " ".join(shapes))
    return ", ".join(parts)
