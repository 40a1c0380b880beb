"""The neutral value of each case axis a case may leave out: what its absence means.

Declared here once. matrix/schema.py builds its axis tables from it, and every reader of a case's
parameters asks `axis_value` rather than repeating a default. Only the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

NEUTRAL: Mapping[str, Any] = MappingProxyType(
    {
        "bias": False,
        "use_fast_accum": False,
        "scale_layout": "contiguous",
        "activation_rank": 2,
        "special_scale": "none",
        "special_operand": "none",
        "special_side": "a",
        "value_regime": "standard",
        "operand_layout": "dense",
        "scale_result": "none",
        "scale_dtype": "fp32",
        "bias_dtype": "out",
        "scale_keepdim": False,
        "group_layout": "2d3d",
        "group_sizes": "even",
        "groups": 4,
    }
)


def axis_value(params: Mapping[str, Any], axis: str) -> Any:
    """The case's value of `axis`, its neutral value where the case leaves it out."""
    return params.get(axis, NEUTRAL[axis])
