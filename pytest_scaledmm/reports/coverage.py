"""What a run really tested: the report's `coverage` block and its lines in the terminal summary.

Counts of cases run, reference-checked with valid inputs, boundary (invalid by design), special
and skipped; model mismatches (a case where eager contradicts the kernel's support model: a valid
case refused, a boundary case accepted, meaning the op changed); and pairwise coverage among the
valid cases checked against the reference: scale pair x compile mode, and scale form x shape
class, each as covered / possible, where possible is what the support model allows within the
profile's axes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..matrix import epilogue
from ..matrix.shapes import classes_of
from ..matrix.spec import is_user_kernel
from ..matrix.support import explained_by_torch_range
from ..records import ModelRecord
from ..verdict import outcome as oc
from ..verdict.case_axes import axis_value
from ..verdict.outcome import ErrorInfo
from ..verdict.refusals import matching_refusal

NOT_RUN = (oc.SKIPPED, oc.HARNESS_ERROR)
SHOWN_MISSING = 5  # uncovered pairs a report lists per measure


def _outcome(record: Mapping) -> str | None:
    known = record.get("known_failure")
    original = known.get("original_outcome") if isinstance(known, dict) else None
    return original if isinstance(original, str) else record.get("outcome")


def purpose_of(record: Mapping) -> str:
    """valid, boundary or special; a case without one (an included corpus case) is valid."""
    return (record.get("params") or {}).get("purpose") or "valid"


def model_block(record: Mapping, arch: str, torch_version: str) -> ModelRecord:
    """The record's `model` block: its purpose, the refusal the model expects, the refusal eager
    gave (a REFUSALS key), and whether eager contradicts the model (`mismatch`): a valid or special
    case that eager refuses, or a boundary case that eager accepts. A refusal of a valid case that
    a torch range is known for (support.TORCH_RANGE_REFUSALS) is `explained`, not a mismatch; a
    case generation did not make (explore, an included corpus case) is never one."""

    params = record.get("params") or {}
    purpose = purpose_of(record)
    outcome = _outcome(record)
    eager = record.get("eager_error")
    compiled = record.get("compiled_error")
    block = ModelRecord(purpose=purpose, expected_refusal=params.get("expected_refusal"), mismatch=False)
    if outcome in NOT_RUN or outcome in (oc.CRASH, oc.TIMEOUT):
        return block
    refusal = None
    if eager:
        try:
            found = matching_refusal(ErrorInfo(**eager), params.get("kernel"))
        except TypeError:  # a record from elsewhere with other error fields
            found = None
        refusal = found.key if found is not None else "undocumented"
        block["refusal"] = refusal
    if "purpose" not in params:
        return block  # not made by generation (explore, an included corpus case): nothing was expected
    if purpose != "boundary" and eager:
        if explained_by_torch_range(params.get("kernel", ""), arch, torch_version, refusal):
            block["explained"] = f"refused by torch {torch_version} on {arch}: a refusal of its release range"
        else:
            block["mismatch"] = True
            block["detail"] = f"valid by the model, eager refuses ({refusal}); compiled " + (
                "refuses too" if compiled else "accepts"
            )
    elif purpose == "boundary" and not eager:
        block["mismatch"] = True
        block["detail"] = f"the model expects {params.get('expected_refusal')}, eager accepts; compiled " + (
            "refuses" if compiled else "accepts too"
        )
    return block


def _ran(record: Mapping) -> bool:
    return _outcome(record) not in NOT_RUN


def coverage_block(records: Iterable[Mapping], possible: Mapping | None, arch: str | None) -> dict:
    """The report's `coverage` block from the records and the generation's possible pairs (per
    kernel: scale_pair_mode [a, b, mode] and form_class [side, form, class])."""
    records = list(records)
    ran = [r for r in records if _ran(r)]
    # A case whose process died keeps the eager side's check (the gate compares it), but its
    # compiled side checked nothing: it is no checked case of its pairs.
    checked = [
        r
        for r in ran
        if purpose_of(r) == "valid"
        and (r.get("errors") or {}).get("eager") is not None
        and _outcome(r) not in (oc.CRASH, oc.TIMEOUT)
    ]
    mismatches = [r for r in records if (r.get("model") or {}).get("mismatch")]
    block: dict[str, Any] = {
        "arch": arch,
        "cases": {
            "recorded": len(records),
            "run": len(ran),
            "reference_checked_valid": len(checked),
            "valid": sum(1 for r in ran if purpose_of(r) == "valid"),
            "boundary": sum(1 for r in ran if purpose_of(r) == "boundary"),
            "special": sum(1 for r in ran if purpose_of(r) == "special"),
            "skipped": sum(1 for r in records if _outcome(r) == oc.SKIPPED),
            "model_mismatch": len(mismatches),
        },
    }
    # Pairs count only where a case was checked against the reference: an UNSUPPORTED or an
    # ERROR_PARITY case ran but tested nothing of the pair.
    pair_mode = {
        (r["params"]["kernel"], r["params"]["scale_a"], r["params"]["scale_b"], r["params"]["mode"]) for r in checked
    }
    form_class = set()
    for r in checked:
        params = r["params"]
        for side in ("a", "b"):
            for name in classes_of(params).values():
                form_class.add((params["kernel"], side, params[f"scale_{side}"], name))
    pairwise = {}
    for measure, covered in (("scale_pair x mode", pair_mode), ("scale_form x shape_class", form_class)):
        key = "scale_pair_mode" if measure.startswith("scale_pair") else "form_class"
        wanted = {
            (kernel, *item) for kernel, sets in (possible or {}).items() for item in map(tuple, sets.get(key, []))
        }
        missing = sorted(wanted - covered)
        pairwise[measure] = {
            "covered": len(wanted & covered),
            "possible": len(wanted),
            "missing": [list(item) for item in missing[:SHOWN_MISSING]],
        }
    pairwise.update(_epilogue_coverage(checked, possible or {}))
    block["pairwise"] = pairwise
    block["production"] = production_counts(ran, checked)
    block["dimensions"] = dimension_coverage(records, ran, checked, possible or {})
    return block


def _epilogue_coverage(checked: list, possible: Mapping) -> dict:
    """The epilogue's 3-way combinations and its whole combinations under a compiled mode that
    checked valid cases cover, of those generation said valid cases can have (epilogue.py)."""
    wanted: dict[str, set] = {kind: set() for kind in epilogue.KINDS}
    covered: dict[str, set] = {kind: set() for kind in epilogue.KINDS}
    for kernel, sets in possible.items():
        stored = sets.get("epilogue") if isinstance(sets, Mapping) else None
        if not isinstance(stored, list):
            continue
        own = [r["params"] for r in checked if r["params"].get("kernel") == kernel]
        found = epilogue.covered(stored, own)
        for target in filter(epilogue.is_target, stored):
            wanted[epilogue.kind_of(target)].add((kernel, target))
        for target in found:
            covered[epilogue.kind_of(target)].add((kernel, target))
    if not any(wanted.values()):
        return {}
    return {
        measure: {
            "covered": len(covered[kind]),
            "possible": len(wanted[kind]),
            "missing": [list(item) for item in sorted(wanted[kind] - covered[kind])[:SHOWN_MISSING]],
        }
        for measure, kind in (("epilogue 3-way", "3-way"), ("epilogue x compiled", "compiled"))
    }


def _dimension_value(params: Mapping, axis: str):
    if axis.endswith("_class"):
        dim = axis[0]
        return classes_of(params)[dim] if params.get(dim) else f"{dim}0"
    if axis == "special_scale":
        return axis_value(params, "special_scale")
    return params.get(axis, AXIS_NEUTRAL.get(axis))


def dimension_coverage(records: list, ran: list, checked: list, possible: Mapping) -> dict:
    """Per kernel and dimension of its input space (generation's axis_values): the values some
    case drew, those checked against the reference (valid cases; special ones that eager ran),
    and those no case drew (the budget left them out); with the token counts the server slice
    added."""
    checked_ids = {id(r) for r in checked}
    found: dict[str, dict] = {}
    for kernel, sets in possible.items():
        space = sets.get("axis_values")
        if not space:
            continue
        own = [r for r in records if (r.get("params") or {}).get("kernel") == kernel]
        ok = [
            r
            for r in own
            if id(r) in checked_ids
            or (r in ran and purpose_of(r) == "special" and (r.get("errors") or {}).get("eager") is not None)
        ]
        dims = {}
        for axis, values in space.items():
            drawn = {_dimension_value(r["params"], axis) for r in own}
            done = {_dimension_value(r["params"], axis) for r in ok}
            dims[axis] = {
                "values": list(values),
                "checked": [v for v in values if v in done],
                "drawn": [v for v in values if v in drawn],
                "left_out": [v for v in values if v not in drawn],
            }
        found[kernel] = {"dimensions": dims, "m_added": list(sets.get("m_added", []))}
        for key in ("shapes_added", "not_proven"):
            if sets.get(key):
                found[kernel][key] = list(sets[key])
    return found


# The value a case without an axis has (an included case, an axis a kernel does not take).
AXIS_NEUTRAL = {
    "value_regime": "standard",
    "operand_layout": "dense",
    "scale_layout": "contiguous",
    "activation_rank": 2,
    "bias": False,
    "use_fast_accum": False,
}


# Production-data properties of a case (matrix/schema.KERNEL_AXES), each with the value a case
# without it has.
PRODUCTION_AXES = {"value_regime": "standard", "operand_layout": "dense", "special_side": "a"}


def production_counts(ran: list, checked: list) -> dict:
    """Per value regime, operand layout and special-value side: cases run and, of those, checked
    against the reference with valid inputs (special side: special cases only)."""
    checked_ids = {id(r) for r in checked}
    found: dict[str, dict] = {}
    for axis, neutral in PRODUCTION_AXES.items():
        counts: dict[str, dict] = {}
        for record in ran:
            params = record.get("params") or {}
            if axis == "special_side" and purpose_of(record) != "special":
                continue
            if params.get("group_layout"):
                continue  # grouped cases take none of these
            entry = counts.setdefault(str(params.get(axis, neutral)), {"run": 0, "reference_checked": 0})
            entry["run"] += 1
            errors = record.get("errors") or {}
            if id(record) in checked_ids or (axis == "special_side" and errors.get("eager") is not None):
                entry["reference_checked"] += 1
        found[axis] = dict(sorted(counts.items()))
    return found


def mismatch_groups(records: Iterable[Mapping]) -> list[dict]:
    """Model mismatches by kernel, purpose and refusal: the op changed, one line each."""
    groups: dict[tuple, dict] = {}
    for record in records:
        model = record.get("model") or {}
        if not model.get("mismatch"):
            continue
        params = record.get("params") or {}
        what = model.get("refusal") if model.get("purpose") != "boundary" else model.get("expected_refusal")
        key = (params.get("kernel"), model.get("purpose"), what)
        group = groups.setdefault(
            key, {"kernel": key[0], "purpose": key[1], "refusal": what, "count": 0, "example": record["id"]}
        )
        group["count"] += 1
        eager = record.get("eager_error")
        if not group.get("source") and isinstance(eager, Mapping) and isinstance(eager.get("source"), str):
            group["source"] = eager["source"]
    return sorted(groups.values(), key=lambda g: (-g["count"], str(g["kernel"]), str(g["refusal"])))


def coverage_lines(coverage: Mapping, records: Iterable[Mapping] = ()) -> list[str]:
    """What was tested, in two lines, then one line per model mismatch group."""
    cases = coverage["cases"]
    lines = [
        f"tested: {cases['run']} case(s) run, {cases['reference_checked_valid']} reference-checked with valid inputs, "
        f"{cases['boundary']} boundary, {cases['special']} special, {cases['skipped']} skipped"
    ]
    parts = []
    for measure, numbers in coverage["pairwise"].items():
        share = f" ({100 * numbers['covered'] // numbers['possible']} %)" if numbers["possible"] else ""
        parts.append(f"{measure} {numbers['covered']}/{numbers['possible']}{share}")
    lines.append(f"pairwise coverage among valid cases checked [{coverage.get('arch')}]: " + ", ".join(parts))
    production = coverage.get("production") or {}
    if any(
        len(counts) > 1 or next(iter(counts), PRODUCTION_AXES[axis]) != PRODUCTION_AXES[axis]
        for axis, counts in production.items()
        if axis in PRODUCTION_AXES
    ):
        words = {"value_regime": "value regimes", "operand_layout": "operand layouts", "special_side": "special side"}
        lines.append(
            "production data (run/reference-checked): "
            + "; ".join(
                f"{words[axis]} "
                + ", ".join(f"{value} {c['run']}/{c['reference_checked']}" for value, c in counts.items())
                for axis, counts in production.items()
                if axis in words and counts
            )
        )

    lines += dimension_lines(coverage.get("dimensions") or {})
    for group in mismatch_groups(records):
        if is_user_kernel(group["kernel"]):
            # A user kernel's support model is what it declares: raising inside it is the
            # kernel's own behaviour, no op of torch changed.
            lines.append(_own_refusal_line(group))
            continue
        if group["purpose"] == "boundary":
            what = f"{group['count']} boundary case(s) expected to be refused ({group['refusal']}) accepted by eager"
        else:
            what = f"{group['count']} {group['purpose']} case(s) refused by eager ({group['refusal']})"
        lines.append(f"model mismatch: the op changed: {group['kernel']}: {what}, e.g. {group['example']}")
    return lines


def dimension_lines(dimensions: Mapping) -> list[str]:
    """One line per kernel: for each dimension of its space with more than one value, the values
    checked of those it had; the values drawn but never checked and those the budget left out;
    the token counts the server slice added."""
    lines = []
    for kernel, block in dimensions.items():
        dims = block.get("dimensions") or {}
        counts = [f"{axis} {len(d['checked'])}/{len(d['values'])}" for axis, d in dims.items() if len(d["values"]) > 1]
        unchecked = [
            f"{axis} {', '.join(map(str, v))}"
            for axis, d in dims.items()
            if (v := [x for x in d["drawn"] if x not in d["checked"]])
        ]
        left = [f"{axis} {', '.join(map(str, d['left_out']))}" for axis, d in dims.items() if d["left_out"]]
        line = f"coverage {kernel} (values checked/in its space): " + (", ".join(counts) or "one value per dimension")
        if unchecked:
            line += "; drawn, not checked: " + "; ".join(unchecked)
        line += "; left out by the budget: " + ("; ".join(left) if left else "none")
        if block.get("m_added"):
            line += "; M added (token counts a server meets): " + ", ".join(map(str, block["m_added"]))
        if block.get("shapes_added"):
            line += "; shapes added (classes the axes leave out): " + ", ".join(block["shapes_added"])
        if block.get("not_proven"):
            line += "; not proven (a limit the matrix sets keeps them out): " + "; ".join(block["not_proven"])
        lines.append(line)
    return lines


def _own_refusal_line(group: Mapping) -> str:
    """A user kernel's model mismatch: its own code refuses inside what it declares, or accepts
    what its declaration excludes."""
    head = f"kernel {group['kernel']} (user kernel): {group['count']}"
    if group["purpose"] == "boundary":
        return (
            f"{head} case(s) outside its declared support ({group['refusal']}) accepted by its code:"
            f" the declaration is narrower than the kernel, e.g. {group['example']}"
        )
    at = f" at {group['source']}" if group.get("source") else ""
    return (
        f"{head} {group['purpose']} case(s) inside its declared support raise in its own code{at}:"
        f" declare what it does not support, or fix it, e.g. {group['example']}"
    )
