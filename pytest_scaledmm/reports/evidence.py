"""What each run checked, per kernel and per side, and what a candidate checked less of than its
baseline: the gate's evidence comparison.

An outcome says how a case ended; it does not say what was proven. A kernel skipped in both runs
has no transition, a side that stopped being checked behind a case removed from the candidate
leaves no record to compare, a dimension value (out_dtype fp16, M 17) no longer reached on a side
is no case's news. Per kernel and per side this module counts the cases whose side says what
it did (checked against the reference, or raised) and the value of each case dimension those
cases reached, and names each thing the candidate did less of than the baseline as "not
proven", one item at a time:

    KERNEL                   no case of the kernel ran in the candidate (absent, skipped,
                             crashed before a side said what it did) where the baseline checked
                             some against the reference; or none checked in either run
    KERNEL:SIDE              no case of that side ran and checked, where the baseline had some
    KERNEL:SIDE:AXIS=VALUE   that value of that dimension no longer ran and checked on that side

`--allow-unchecked PATTERN` (fnmatch, repeatable) accepts the items it matches; a pattern naming
a kernel or a kernel's side accepts what lies below it. No torch import here.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .sides import SIDES

# A SKIPPED case's reason when the kernel cannot run on this platform by its own declaration or by
# what this torch and device have (execution/run.py not_applicable, matrix/kernels.py
# unavailable_reason); a module that could not be loaded is no such reason.
_PLATFORM_SKIPS = re.compile(
    r"declares archs|is not in the matrix's archs|needs torch>=|needs a GPU|^torch \S+ has no "
)

# Params that say which case it is or why it was made, not a dimension of its input space.
NOT_DIMENSIONS = frozenset({"kernel", "purpose", "expected_refusal"})
SHOWN_VALUES = 6  # lost values a finding lists before "and N more"


@dataclass
class KernelEvidence:
    """One kernel's evidence in one report."""

    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    reference_checked: int = 0  # cases with a side checked against the reference
    platform_gaps: int = 0  # cases this platform cannot run by declaration or by what it has
    # side -> cases whose side says what it did (checked, or raised)
    checked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    # side -> "axis=value" -> those cases with that value
    values: dict[str, Counter] = field(default_factory=lambda: {side: Counter() for side in SIDES})

    @property
    def any_checked(self) -> bool:
        return self.reference_checked > 0


def _checked(record: Mapping, side: str) -> bool:
    """Whether the record's side was checked against the reference: a check that says ok or not."""
    errors = record.get("errors")
    check = errors.get(side) if isinstance(errors, Mapping) else None
    return isinstance(check, Mapping) and type(check.get("ok")) is bool


def _evidenced(record: Mapping, side: str) -> bool:
    """Whether the record says what its side did: checked against the reference, or raised."""
    return _checked(record, side) or isinstance(record.get(f"{side}_error"), Mapping)


def _platform_gap(record: Mapping) -> bool:
    """A case this platform cannot run: SKIPPED for a declared arch or torch range, a GPU-only
    mode, an op this torch lacks; or refused on both sides as the support model expects of this
    device (the documented `backend` refusal)."""
    outcome = _original_outcome(record)
    if outcome == "SKIPPED":
        detail = record.get("detail")
        return isinstance(detail, str) and bool(_PLATFORM_SKIPS.search(detail))
    model = record.get("model")
    return outcome == "UNSUPPORTED" and isinstance(model, Mapping) and model.get("refusal") == "backend"


def _value_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _original_outcome(record: Mapping) -> str:
    known = record.get("known_failure")
    original = known.get("original_outcome") if isinstance(known, Mapping) else None
    return str(original if isinstance(original, str) else record.get("outcome"))


def evidence(records: Iterable[Mapping]) -> dict[str, KernelEvidence]:
    """Each kernel's evidence in a report's records."""
    found: dict[str, KernelEvidence] = {}
    for record in records:
        params = record.get("params")
        params = params if isinstance(params, Mapping) else {}
        kernel = params.get("kernel")
        held = found.setdefault(kernel if isinstance(kernel, str) else "(no kernel)", KernelEvidence())
        held.cases += 1
        held.outcomes[_original_outcome(record)] += 1
        held.reference_checked += any(_checked(record, side) for side in SIDES)
        held.platform_gaps += _platform_gap(record)
        for side in SIDES:
            if not _evidenced(record, side):
                continue
            held.checked[side] += 1
            for axis, value in params.items():
                if axis not in NOT_DIMENSIONS:
                    held.values[side][f"{axis}={_value_text(value)}"] += 1
    return found


@dataclass(frozen=True)
class Unproven:
    """One thing the candidate did not prove that the baseline did (or that neither did)."""

    item: str  # KERNEL, KERNEL:SIDE or KERNEL:SIDE:AXIS=VALUE
    text: str  # what was lost, without the kernel and side the item names
    # Neither run could run the kernel here (its declaration, this torch or device): said, not failed.
    platform: bool = False

    @property
    def kernel_and_side(self) -> str:
        return ":".join(self.item.split(":", 2)[:2])

    def allowed_by(self, patterns: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(self.item, p) or fnmatch.fnmatchcase(self.item, f"{p}:*") for p in patterns)


def _outcomes_text(held: KernelEvidence | None) -> str:
    if held is None or not held.cases:
        return "no case"
    return ", ".join(f"{count} {name}" for name, count in sorted(held.outcomes.items()))


def _kernel_unproven(kernel: str, was: KernelEvidence | None, now: KernelEvidence | None) -> Unproven | None:
    if now is not None and now.any_checked:
        return None
    if was is None or not was.any_checked:
        return Unproven(
            kernel,
            f"no case checked in either run (baseline: {_outcomes_text(was)}; candidate: {_outcomes_text(now)}):"
            " nothing of it is proven",
            platform=_all_platform_gaps(was) and _all_platform_gaps(now),
        )
    if now is not None and any(now.checked.values()):
        return None  # its cases ran and raised: each case's transition says how it compares
    where = "absent from the candidate" if now is None else f"no case checked in the candidate ({_outcomes_text(now)})"
    return Unproven(kernel, f"{where}; the baseline checked {was.reference_checked} case(s) against the reference")


def _all_platform_gaps(held: KernelEvidence | None) -> bool:
    return held is not None and held.cases > 0 and held.platform_gaps == held.cases


def _side_unproven(kernel: str, side: str, was: KernelEvidence, now: KernelEvidence) -> list[Unproven]:
    found = []
    # Fewer cases is each case's news (a side checked before and not now, a case missing); none
    # at all, and the values below, are no case's.
    before, after = was.checked[side], now.checked[side]
    if before and not after:
        found.append(Unproven(f"{kernel}:{side}", f"no case ran and checked, {before} in the baseline"))
        return found
    lost = sorted(value for value in was.values[side] if not now.values[side].get(value))
    found += [
        Unproven(f"{kernel}:{side}:{value}", f"{value} ({was.values[side][value]} in the baseline)") for value in lost
    ]
    return found


def unproven(baseline: Iterable[Mapping], candidate: Iterable[Mapping], listed: Iterable[str] = ()) -> list[Unproven]:
    """What the candidate checked less of than the baseline, item by item, and each kernel that
    neither checked (`listed`: the matrix's kernels, so one the budget gave no case is named
    too); kernels only the candidate has are new evidence, not a loss."""
    was, now = evidence(baseline), evidence(candidate)
    found: list[Unproven] = []
    for kernel in sorted(was):
        missing = _kernel_unproven(kernel, was[kernel], now.get(kernel))
        if missing is not None:
            found.append(missing)
            continue
        for side in SIDES:
            found += _side_unproven(kernel, side, was[kernel], now[kernel])
    for kernel in sorted(set(now) - set(was)):
        missing = _kernel_unproven(kernel, None, now[kernel])
        if missing is not None:
            found.append(missing)
    for kernel in sorted(set(listed) - set(was) - set(now)):
        found.append(Unproven(kernel, "listed in the matrix, no case of it in either run: nothing of it is proven"))
    return found


def partial_unproven(
    baseline: Sequence[Mapping], candidate: Sequence[Mapping], listed: Iterable[str] = ()
) -> tuple[list[Unproven], list[Unproven]]:
    """(items, missing): `unproven` of the whole baseline, split into what the candidate's own
    cases lost and what only the baseline's cases missing from the candidate held (what a partial
    run, allowed to miss cases, does not prove: said, not failed)."""
    present = {record.get("id") for record in candidate}
    kept = unproven([r for r in baseline if r.get("id") in present], candidate, listed)
    whole = unproven(baseline, candidate, listed)
    kept_items = {item.item for item in kept}
    return kept, [item for item in whole if item.item not in kept_items]


def grouped_lines(items: Sequence[Unproven], flag: str) -> list[str]:
    """The items as gate lines: a kernel's own line alone; a side's count and the values it no
    longer checked in one line per kernel and side (SHOWN_VALUES of them, then how many more).
    Each ends with the `flag` (--allow-unchecked) argument that would accept it."""
    lines: list[str] = []
    by_side: dict[str, list[Unproven]] = {}
    for item in items:
        if ":" in item.item:
            by_side.setdefault(item.kernel_and_side, []).append(item)
        else:
            lines.append(f"not proven: kernel {item.item}: {item.text} ({flag} '{item.item}' accepts it)")
    for key, members in by_side.items():
        kernel, side = key.split(":")
        parts = [m.text for m in members if m.item == key]
        values = [m.text for m in members if m.item != key]
        if values:
            more = len(values) - SHOWN_VALUES
            parts.append(
                "no longer checked: " + ", ".join(values[:SHOWN_VALUES]) + (f" and {more} more" if more > 0 else "")
            )
        lines.append(f"not proven: kernel {kernel}, {side} side: {'; '.join(parts)} ({flag} '{key}' accepts it)")
    return lines
