"""The eager side's calls after the first and the call at another M: what a serving process does
to one kernel between two of its calls. Another layer calls it at another K or N, or at the same
shape with its own weight and with or without a bias, the next batch in another output or operand
dtype, and then the first shape comes back. Each call is a step
planned per case (execution/sequence_plan.py: what it changes in the case and its input seed);
here each step becomes a call with inputs and a float64 reference of its own. A kernel that
keys what it keeps (a packed weight, a tuned config, a workspace) on part of the call answers a
later step with what belongs to an earlier one.

A step is data ({"kind", "label", "changes", "seed"}): the record keeps the steps a case made,
and its repro script builds the same calls from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .case_axes import CaseParams
from .contracts import CaseCall, with_weights_of
from .draw import CaseInputs, make_inputs
from .oracle import case_checker
from .pipeline import OtherShape

# What each kind of step changes, in the words its problem names it by (signature_text.SEQUENCE_CALL).
STEP_WORDS = {
    "k": "another K",
    "n": "another N",
    "out_dtype": "another output dtype",
    "dtype": "another operand dtype",
    "bias": "the bias added or dropped",
    "weight": "another weight of the same shape",
    "back": "the first shape again",
}
# The step that comes last: the first call's shape and weights, new activation values.
BACK = "back"
# Steps that change only what a kernel's declarations govern (pipeline.OtherShape.governed).
GOVERNED = frozenset({"out_dtype", "dtype", "bias"})


def step_params(case: CaseParams, step: Mapping[str, Any]) -> CaseParams:
    return case.with_values(**dict(step["changes"]))


def sequence_shapes(
    steps: Sequence[Mapping[str, Any]],
    case: CaseParams,
    first: CaseInputs,
    first_call: CaseCall,
    device: str,
    slack: float,
    contract: str,
    make_call: Callable[[CaseInputs, Any], CaseCall],
) -> list[OtherShape]:
    """The steps as calls (pipeline.SidePlan.sequence). `make_call(inputs, built)`: the kernel's
    call on `inputs` (contracts.case_call), with a weight object already `built` or None to build
    one: a step that changes the weight's shape or dtype builds its own, the step back reuses the
    first call's."""
    shapes = []
    for step in steps:
        params = step_params(case, step)
        inputs = make_inputs(params, int(step["seed"]), device)
        built = None
        if step["kind"] == BACK:
            inputs = with_weights_of(first, inputs, contract)
            built = first_call.built
        call = make_call(inputs, built)
        words = STEP_WORDS.get(str(step["kind"]), str(step["kind"]))
        shapes.append(
            OtherShape(
                str(step["label"]),
                call.args,
                case_checker(params, inputs, slack),
                fn=call.fn,
                said=words,
                governed=step["kind"] in GOVERNED,
            )
        )
    return shapes
