"""A finding must replay alone. A case that failed in a child that had run other cases before it is
run again in a fresh child. Failing alike there (the same class), the finding stands, and its
record says it replayed alone (with the signature alone where that differs). Otherwise it failed
only because of what ran before it: the earlier cases are replayed before it in fresh children,
the most recent of its own kernel first, to find the one it fails after; the case is then
ORDER_DEPENDENT, a finding of the kernel's state that names both ids, and `--scaledmm-after
<earlier id>` replays the pair.

A failure already replayed alone (same kernel, class and signature) is not replayed again: the
record names the case that did. A TIMEOUT is not run twice (it would cost the limit again), and
a kernel that runs in the pytest process has no fresh process to replay in; their records say so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from ..matrix.case_params import Case
from ..verdict import outcome as oc
from ..verdict.outcome import Outcome

# Pairs tried before the whole history is replayed: the earlier case most likely to have left the
# state (the last of the case's kernel, then the last one of any kernel).
PAIRS_TRIED = 2
NOT_REPLAYED = (oc.HARNESS_ERROR, oc.TIMEOUT)


class Replayer(Protocol):
    def run_after(self, earlier: Sequence[Case], case: Case) -> Outcome: ...

    def replayable(self, case: Case) -> bool: ...  # its kernel runs in a child a fresh one can replace


def _alike(first: Outcome, again: Outcome) -> bool:
    """The same class of failure: a signature may say a count that varies between runs (how many
    elements differ), and the finding is the class."""
    return again.outcome == first.outcome


def _suspects(case: Case, earlier: Sequence[Case]) -> list[Case]:
    """The single earlier cases to try before it, most likely first."""
    found: list[Case] = []
    own = [c for c in earlier if c.params.kernel == case.params.kernel]
    for candidate in (own[-1] if own else None, earlier[-1] if earlier else None):
        if candidate is not None and candidate.id not in {c.id for c in found}:
            found.append(candidate)
    return found[:PAIRS_TRIED]


class ReplayAlone:
    """Judges each failing case of one runner (one xdist worker's child) by its replay alone."""

    def __init__(self, runner: Replayer, settle: Callable[[Case, Outcome], Outcome] = lambda case, result: result):
        self.runner = runner
        # What the run makes of a raw result before judging it (the AOTInductor control): a replay's
        # result is settled alike, so that the two compare as the run recorded them.
        self.settle = settle
        self._replayed: dict[tuple, str] = {}  # (kernel, class, signature) -> the case that replayed alone

    def judge(self, case: Case, result: Outcome, earlier: Sequence[Case]) -> Outcome:
        if not result.failed or not earlier or result.outcome == oc.HARNESS_ERROR:
            return result
        if not self.runner.replayable(case):
            result.observations.replayed_alone = {"replayed": False, "why": "ran in the pytest process"}
            return result
        if result.outcome in NOT_REPLAYED:
            result.observations.replayed_alone = {"replayed": False, "why": f"a {result.outcome} is not run twice"}
            return result
        key = (case.params.kernel, result.outcome, result.signature)
        if key in self._replayed:
            result.observations.replayed_alone = {"replayed": False, "like": self._replayed[key]}
            return result
        alone = self._replay((), case)
        if _alike(result, alone):
            self._replayed[key] = case.id
            result.observations.replayed_alone = {"replayed": True, "after_cases": len(earlier)}
            if alone.signature != result.signature:
                result.observations.replayed_alone["alone_signature"] = alone.signature
            return result
        for suspect in _suspects(case, earlier):
            if _alike(result, self._replay((suspect,), case)):
                return order_dependent(case, result, alone, (suspect,))
        if len(earlier) > 1 and _alike(result, self._replay(earlier, case)):
            return order_dependent(case, result, alone, tuple(earlier))
        # Not even the same cases in the same order fail it again: a failure that does not
        # replay. It stays what it was (never a pass), and says so.
        result.observations.replayed_alone = {"replayed": True, "alone": alone.outcome, "reproduced": False}
        result.detail = (
            f"this failure did not replay: alone it gives {alone.outcome}, and after the"
            f" {len(earlier)} case(s) that ran before it too\n" + result.detail
        )
        return result

    def _replay(self, earlier: Sequence[Case], case: Case) -> Outcome:
        return self.settle(case, self.runner.run_after(earlier, case))


def order_dependent(case: Case, result: Outcome, alone: Outcome, earlier: tuple[Case, ...]) -> Outcome:
    """The failing result, as a finding of the state earlier cases left: ORDER_DEPENDENT."""
    ids = [c.id for c in earlier]
    if len(ids) == 1:
        how = f"only after case {ids[0]} ran in the same process"
    else:
        how = f"only after the {len(ids)} cases that ran before it in the same process ({', '.join(ids)})"
    detail = (
        f"{result.outcome} {how}; alone, in a fresh process, {alone.outcome}: the kernel (or the compiler)"
        " keeps state between calls that changes a later result\n" + result.detail
    )
    result.observations.replayed_alone = {
        "replayed": True,
        "alone": alone.outcome,
        "in_order": result.outcome,
        "after": ids,
    }
    signature = f"ORDER_DEPENDENT: {result.outcome} only after another case: {result.signature}"[:240]
    return replace(result, outcome=oc.ORDER_DEPENDENT, signature=signature, detail=detail)
