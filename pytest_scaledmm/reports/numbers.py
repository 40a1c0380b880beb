"""A number as a report writes it and reads it back."""

from __future__ import annotations

import math
from typing import Any

# JSON has no spelling for infinities and NaN (json.dumps would write Infinity and NaN, which
# jq and strict parsers reject): every file written holds these strings instead, as the JUnit
# properties do, and readers take them back with `number`.
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def number(value: Any) -> float | None:
    """A number as a report holds it (a JSON number or one of NON_FINITE's strings), else None;
    a whole number too large for a float is infinite (beyond any bound it meets)."""
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if type(value) is float:
        return value
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return None
