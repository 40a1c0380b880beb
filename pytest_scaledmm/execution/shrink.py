"""A failing call sequence shrunk to the shortest one that still fails. The case's calls after the
first (execution.run.planned_calls: the call at another M, then the sequence's steps) are cut
to those up to the one that failed, then each earlier call is left out in turn, in a fresh child
(the kernel's state from the longer run must not help): a call whose absence still fails the
same step the same way is dropped; where none can go, the calls up to the failing one are made
once more in a fresh child. The case's record becomes that fresh run's, with the calls it kept
(extra.sequence.shrunk.keep, indices of planned_calls) and those the full run made up to the
failing one (`from`); its replay command names them (--scaledmm-sequence), so it replays exactly
that sequence. A sequence that does not fail alike in a fresh child is not called shrunk.

Then the failing step's call is made first, alone, in a fresh child (extra.sequence.as_first_call):
failing there too, the finding is a failure at those parameters that the sequence reached first;
passing there, it is the state the earlier calls left, and the detail says which.

One shrink per (kernel, class, failing step's kind): a later case alike names the one that was
shrunk. A run whose calls the user named (--scaledmm-sequence) is not shrunk again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..matrix.case_params import Case
from ..verdict import outcome as oc
from ..verdict.outcome import Outcome


class Shrinker(Protocol):
    def run_after(self, earlier: Sequence[Case], case: Case, keep: Sequence[int] | None = None) -> Outcome: ...

    def replayable(self, case: Case) -> bool: ...


def _failed_step(result: Outcome) -> tuple[str, int, list[int], str] | None:
    """(its label, its index, the indices of the calls up to it, its kind) of a failing sequence."""
    found = result.observations.sequence
    if not isinstance(found, dict) or found.get("failed_at") is None:
        return None
    index = found["failed_at"]
    kinds = {step["label"]: step["kind"] for step in found.get("steps", [])}
    before = [i for i in found.get("keep", []) if i <= index]
    return found["failed"], index, before, kinds.get(found["failed"], "")


class ShrinkSequence:
    def __init__(self, runner: Shrinker, settle: Callable[[Case, Outcome], Outcome], named: bool):
        self.runner = runner
        self.settle = settle  # as ReplayAlone's: a replay compares as the run recorded it
        self.named = named  # the user named the calls (--scaledmm-sequence): nothing to shrink
        self._shrunk: dict[tuple, str] = {}

    def judge(self, case: Case, result: Outcome) -> Outcome:
        failed = _failed_step(result)
        if failed is None or not result.failed or result.outcome in (oc.ORDER_DEPENDENT, oc.TIMEOUT):
            return result
        label, index, calls, kind = failed
        sequence = result.observations.sequence
        assert isinstance(sequence, dict)
        if self.named:
            sequence["shrunk"] = {"keep": calls, "replays": 0, "why": "the calls were named (--scaledmm-sequence)"}
            return result
        if not self.runner.replayable(case):
            sequence["shrunk"] = {"replays": 0, "why": "ran in the pytest process: no fresh process to shrink in"}
            return result
        key = (case.params.kernel, result.outcome, kind)
        if key in self._shrunk:
            sequence["shrunk"] = {"replays": 0, "like": self._shrunk[key]}
            return result
        kept, best, replays = list(calls), None, 0
        for call in calls[:-1]:
            trial = [i for i in kept if i != call]
            again = self.settle(case, self.runner.run_after((), case, trial))
            replays += 1
            if _alike(again, result.outcome, label):
                kept, best = trial, again
        if best is None:
            # No call could go: the calls up to the failing one, in a fresh child, are the record
            # (the run's own child may hold what earlier cases left).
            best = self.settle(case, self.runner.run_after((), case, kept))
            replays += 1
            if not _alike(best, result.outcome, label):
                sequence["shrunk"] = {
                    "replays": replays,
                    "why": f"its calls up to the failing one gave {best.outcome} in a fresh process",
                }
                return result
        self._shrunk[key] = case.id
        best.observations.replayed_alone = result.observations.replayed_alone
        made = best.observations.sequence if isinstance(best.observations.sequence, dict) else {}
        first = self._as_first_call(case, made, label)
        best.observations.sequence = {
            **made,
            "shrunk": {"keep": kept, "replays": replays + 1, "from": calls},
            "as_first_call": first.outcome,
        }
        if first.failed:
            said = f"fails too as the first call of a fresh process ({first.outcome}): a failure at those parameters"
        else:
            said = f"gives {first.outcome} as the first call of a fresh process: the earlier calls' state fails it"
        best.detail = f"the failing step ({label}) {said}\n{best.detail}"
        return best

    def _as_first_call(self, case: Case, sequence: dict, label: str) -> Outcome:
        """The failing step's call made first, in a fresh child, with no calls after it."""
        steps = {step["label"]: step for step in sequence.get("steps", [])}
        changes = dict(steps[label]["changes"]) if label in steps else {}
        first = Case(case.id, case.params.with_values(**changes))
        return self.settle(first, self.runner.run_after((), first, []))


def _alike(again: Outcome, outcome: str, label: str) -> bool:
    found = again.observations.sequence
    return again.outcome == outcome and isinstance(found, dict) and found.get("failed") == label
