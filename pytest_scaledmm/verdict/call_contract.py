"""The call contract: what a caller of torch._scaled_mm relies on without checking, held on every
call the harness makes of a kernel (the first eager and compiled calls and every later one).

Each check has a name and a problem text of its own (signature_text.py), so that a broken one is
a summary line of its own:
  output layout   the output is row-major and contiguous, as `_scaled_mm` returns it (a
                  column-major or strided result breaks every caller's `out.view`), unless the
                  kernel declares `output_layout`;
  deterministic   the same call twice gives the same bits, unless the kernel declares
                  `deterministic: false`; read on calls the harness makes twice anyway.
What the other checks of a call hold (dtype, shape, device, no non-finite value where the
reference has none, inputs unchanged) lives with the reference (reference.py, oracle.py) and the
pipeline (pipeline.PristineInputs). torch only: repro scripts embed verdict/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .outcome import MISMATCH, PASS, Outcome
from .signature_text import NONDETERMINISTIC, NOT_IN_LAYOUT, OUTPUT_LAYOUTS

ANY_LAYOUT = "any"
# What `output_layout` may declare: the layouts the check knows, or none at all.
LAYOUT_CHOICES = (*OUTPUT_LAYOUTS, ANY_LAYOUT)
OUTPUT_LAYOUT_CHECK = "output layout"
DETERMINISM_CHECK = "deterministic"
# The order a case names its broken checks in: its signature is the first's.
CONTRACT_CHECKS = (OUTPUT_LAYOUT_CHECK, DETERMINISM_CHECK)


@dataclass(frozen=True)
class CallContract:
    """What a kernel promises its callers besides its values: the layout of its output and
    whether a repeated call repeats its bits."""

    output_layout: str = OUTPUT_LAYOUTS[0]
    deterministic: bool = True

    @classmethod
    def of(cls, kernel: Any) -> CallContract:
        """A kernel's declared contract (a KernelSpec's `output_layout` and `deterministic`); the
        defaults, `_scaled_mm`'s own, where it declares none."""
        layout = getattr(kernel, "output_layout", None) or OUTPUT_LAYOUTS[0]
        return cls(layout, getattr(kernel, "deterministic", None) is not False)

    def to_json(self) -> dict:
        return {"output_layout": self.output_layout, "deterministic": self.deterministic}


def in_layout(out: torch.Tensor, layout: str) -> bool:
    """Whether `out` is dense in `layout` (row-major: its last dim fastest; column-major: the
    last two dims swapped); a tensor of fewer than two dims is row-major only."""
    if layout == OUTPUT_LAYOUTS[0] or out.dim() < 2:
        return out.is_contiguous()
    return out.transpose(-1, -2).is_contiguous()


def layout_problem(out: Any, contract: CallContract) -> str | None:
    """The broken layout of a call's output, with its strides, or None. What is not a plain tensor
    is the value check's to name."""
    if contract.output_layout == ANY_LAYOUT or type(out) is not torch.Tensor:
        return None
    try:
        if in_layout(out, contract.output_layout):
            return None
        strides = out.stride()
    except RuntimeError:  # a tensor without strides (sparse, nested): not a `_scaled_mm` output either
        strides = None
    said = NOT_IN_LAYOUT[OUTPUT_LAYOUTS.index(contract.output_layout)]
    return f"{said}: shape {tuple(out.shape)}, strides {strides}"


def repeat_problem(first: Any, again: Any, contract: CallContract) -> str | None:
    """What two calls on identical inputs gave that differs bit for bit, or None. Outputs of
    another type, shape or dtype are the value checks' to name."""
    if not contract.deterministic:
        return None
    same_kind = type(first) is torch.Tensor and type(again) is torch.Tensor
    if not same_kind or first.shape != again.shape or first.dtype != again.dtype or first.device != again.device:
        return None
    if first.dtype.is_floating_point and first.element_size() in (1, 2, 4, 8):
        width = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[first.element_size()]
        first, again = first.contiguous().view(width), again.contiguous().view(width)
    differ = first != again
    if not bool(differ.any()):
        return None
    return f"{NONDETERMINISTIC}: {int(differ.sum())} of {differ.numel()} elements"


def contract_outcome(broken: Mapping[str, Mapping[str, str]], checked: Outcome) -> Outcome:
    """The verdict on a case whose calls broke the call contract (`broken`: side -> {check: what
    it saw}): a MISMATCH of those sides named by the first broken check, where the values alone
    passed; a case already failing keeps its own verdict (the contract is recorded beside it)."""
    if checked.outcome != PASS or not any(broken.values()):
        return checked
    first = next(name for name in CONTRACT_CHECKS if any(name in found for found in broken.values()))
    sides = "+".join(side for side in ("eager", "compiled") if first in broken.get(side, {}))
    problem = next(broken[side][first] for side in ("eager", "compiled") if first in broken.get(side, {}))
    fixed = problem.split(":", 1)[0]
    how = "; ".join(
        f"{side}: " + ", ".join(f"{name}: {what}" for name, what in broken[side].items())
        for side in ("eager", "compiled")
        if broken.get(side)
    )
    return Outcome(
        MISMATCH,
        f"MISMATCH: {sides} {fixed}",
        sides,
        f"the values match the reference, but the call contract is broken ({how})",
        timing=checked.timing,
        observations=checked.observations,
    )
