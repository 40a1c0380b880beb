"""torch.library.opcheck for kernels that are custom ops, once per case family.

The check itself is verdict/opcheck.py (a repro script embeds it); this module keeps one result
per family for the process.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from ..verdict.opcheck import OpcheckResult, run_opcheck

# Cases that differ only in shapes, compile mode or special scale values share one opcheck:
# opcheck itself varies the shapes (test_aot_dispatch_dynamic), and modes do not reach the op.
FAMILY_AXES = (
    "kernel",
    "scale_a",
    "scale_b",
    "dtype_a",
    "dtype_b",
    "out_dtype",
    "bias",
    "use_fast_accum",
    "scale_layout",
    "activation_rank",
)


def family_key(params: Mapping[str, Any]) -> str:
    return "/".join(f"{axis}={params.get(axis)}" for axis in FAMILY_AXES)


def check_custom_op(
    cache: MutableMapping[str, OpcheckResult], params: Mapping[str, Any], op, inputs
) -> tuple[OpcheckResult, bool]:
    """The family's opcheck result, run now if this is the family's first case; also whether it
    came from the cache."""
    key = family_key(params)
    if key in cache:
        return cache[key], True
    result = run_opcheck(op, inputs, key)
    cache[key] = result
    return result, False
