"""What a passing record must show to count as passed: a check of each side against the
reference that says ok, with a finite ratio of at most 1 and no element counted off or
non-finite (verdict/classify.py gives PASS only then). A record set to PASS by an edit,
without that proof, is named by the gate."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..verdict import outcome as oc
from .numbers import number


def _proven(check) -> bool:
    if not isinstance(check, Mapping) or check.get("ok") is not True:
        return False
    ratio = check.get("ratio")
    if type(ratio) not in (int, float):  # exactly: a bool is no ratio
        return False
    value = number(ratio)
    # A check that counts elements off the bound or non-finite did not pass, whatever its ok says.
    counted_off = any(type(check.get(key)) is int and check[key] != 0 for key in ("off_elements", "nonfinite"))
    return value is not None and math.isfinite(value) and value <= 1.0 and not counted_off


def unproven_passes(report: Mapping) -> list[str]:
    """One line for the passing records that lack a passing check of both sides, or none."""
    bad = [
        c["id"]
        for c in report["cases"]
        if c["outcome"] in (oc.PASS, oc.FIXED_UPSTREAM)
        and not all(_proven((c.get("errors") or {}).get(side)) for side in ("eager", "compiled"))
    ]
    if not bad:
        return []
    return [
        f"{len(bad)} passing record(s) lack a passing check of eager and compiled (ok true, ratio at most 1),"
        f" e.g. {bad[0]}: the record was edited or is corrupt"
    ]
