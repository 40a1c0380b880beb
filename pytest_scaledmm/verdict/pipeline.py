"""One case, eager then compiled then checked: the flow the run, triage's plain matmul rung, repro
scripts (which embed this module) and the benchmark's bare loop all go through.

Whatever the callable does is an outcome, never a lost record: an exception (any BaseException:
SystemExit, KeyboardInterrupt and the like end as CRASH, the kernel tried to end the process), a
result that is not a tensor, or one of the wrong shape, dtype or device. The one exception that
escapes is a KeyboardInterrupt when `interrupts` says it is the user's Ctrl-C.

The callable never sees the caller's tensors: each call (eager, and each compiled call) gets a
copy of its own, same layout and same bytes, and is compared with the caller's afterwards. So the
reference, built from the caller's tensors, stays pristine; no side hands a changed input to the
next; and a kernel that changed an input in place (values, layout or storage) fails the case as
a MISMATCH that names the tensor: whatever it returned cannot be trusted.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .call_contract import (
    DETERMINISM_CHECK,
    OUTPUT_LAYOUT_CHECK,
    CallContract,
    contract_outcome,
    layout_problem,
    repeat_problem,
)
from .case_axes import CaseParams
from .classify import classify, crash_outcome, problem_of
from .draw import make_inputs, second_call_seed
from .kernel_choice import kernel_choice, output_code
from .oracle import SideChecker, case_checker, guarded
from .outcome import (
    COMPILE_ONLY_ERROR,
    EAGER_CHECKED,
    MISMATCH,
    ErrorInfo,
    Observations,
    Outcome,
    SideEvidence,
    describe_exception,
)
from .refusals import DeclaredKernel, Support, matching_refusal
from .runners import CompiledSide, runner_named
from .signature_text import (
    AT_ANOTHER_M,
    CHANGED_IN_PLACE,
    FIRST_OUTPUT_CHANGED,
    FIRST_OUTPUT_UNREADABLE,
    IN_PLACE_CALL,
    IN_PLACE_CALL_RAISED,
    LATER_CALLS,
    LATER_CALLS_RAISED,
    OTHER_M_CALL,
    OTHER_M_CALL_RAISED,
    RECOMPILED,
    SECOND_CALL,
    SEQUENCE_CALL,
    SEQUENCE_CALL_RAISED,
    SHARES_INPUT,
    SHARES_PREVIOUS_OUTPUT,
    UNDER_MARK,
)


@dataclass
class OtherShape:
    """The case at another M, for a dynamic-M runner: its inputs and its own side-checker
    (oracle.case_checker with its params)."""

    label: str  # e.g. "m=51"
    args: tuple
    check: SideChecker
    # A call of the eager side's sequence (verdict/sequence.py): its own callable (another output
    # dtype or weight is another call), and what it changes, in words, for the problem it makes.
    fn: Callable | None = None
    said: str = ""
    # A step that changes only what a kernel's declarations govern (dtypes, the bias): a refusal
    # in torch's words there is judged by the cases made with those values, not by the step.
    governed: bool = False


def second_call(params: CaseParams, seed: int, device: str, slack: float) -> OtherShape:
    """The case's serving-loop call (pipeline.eager_compile_check's `second_call`): inputs of the
    same shape from second_call_seed, with their own checker."""
    inputs = make_inputs(params, second_call_seed(seed), device)
    return OtherShape(SECOND_CALL, inputs.args(), case_checker(params, inputs, slack))


def varying_dims(args: tuple, other: tuple) -> list:
    """Per argument, the dims whose size differs between two shapes of one case: what M
    sets (the activation's rows, a row-wise scale's), and what a dynamic-M runner marks."""
    dims = []
    for mine, theirs in zip(args, other):
        if isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor) and mine.dim() == theirs.dim():
            dims.append([d for d in range(mine.dim()) if mine.shape[d] != theirs.shape[d]])
        else:
            dims.append([])
    return dims


def mark_m(given: tuple, dims: list, how: str) -> None:
    """Mark the M-dependent dims of a call's own tensors dynamic (torch._dynamo.mark_dynamic) or
    unbacked (torch._dynamo.decorators.mark_unbacked)."""
    for tensor, marked in zip(given, dims):
        for dim in marked:
            if how == "unbacked":
                torch._dynamo.decorators.mark_unbacked(tensor, dim)
            else:
                torch._dynamo.mark_dynamic(tensor, dim)


def _shape_problem(shape: dict) -> str:
    return shape.get("problem") or f"max |err|/tol = {shape['ratio']:.3g}"


def dynamic_m_outcome(result: Outcome, marked: str, frames: int, shapes: list) -> Outcome:
    """A dynamic-M case that passed at its own M: wrong at another M is a MISMATCH; more than one
    compiled frame breaks the promise of the mark (its own signature, one root cause)."""
    if result.outcome != "PASS":
        return result
    off = [s for s in shapes if not s.get("ok")]
    if off:
        problems = sorted({problem_of(s) for s in off})
        return Outcome(
            MISMATCH,
            f"MISMATCH: compiled {AT_ANOTHER_M} {', '.join(problems)}",
            "compiled",
            "; ".join(f"{s['label']}: {_shape_problem(s)}" for s in off),
            errors=result.errors,
            timing=result.timing,
            observations=result.observations,
        )
    if frames > 1:
        sizes = ", ".join(s["label"] for s in shapes)
        return Outcome(
            COMPILE_ONLY_ERROR,
            f"{RECOMPILED} {frames - 1} times {UNDER_MARK}{marked}",
            "dynamo",
            f"{frames} frames compiled for the case's M and {sizes} with M marked {marked}: one was expected",
            root_cause=f"{RECOMPILED} {UNDER_MARK}{marked}",
            errors=result.errors,
            timing=result.timing,
            observations=result.observations,
        )
    return result


def sync(device: str) -> None:
    """Wait for the device, so that a kernel's asynchronous error belongs to its own call."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _clone(out: Any) -> Any:
    return out.clone() if isinstance(out, torch.Tensor) else out


# Signed integer dtypes by element size: a tensor viewed as one compares bit for bit (NaN == NaN).
_BITS = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _storage_bytes(storage: torch.UntypedStorage) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(getattr(torch, _BITS[t.element_size()])) if t.element_size() in _BITS else t


def argument_names(fn: Callable, count: int) -> list:
    """The names `fn` gives its first `count` positional parameters (what a detail calls them)."""
    try:
        params = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"argument {i}" for i in range(count)]


def plain_tensor(arg: object) -> bool:
    """A torch.Tensor that is not a subclass (a Parameter counts as plain)."""
    return type(arg) in (torch.Tensor, torch.nn.Parameter)


class PristineInputs:
    """The caller's arguments, never handed to the callable: `fresh()` gives each call copies of
    its own tensors (same dtype, shape, strides, storage offset, view-ness, and the whole storage
    copied, padding included; arguments that share a storage still share one), and
    `changes(given)` says, per argument name, what a call changed in its copies. The copies live
    on the tensors' own device and are compared there; one call's copies at a time."""

    def __init__(self, args: tuple, names: list):
        self.args = args
        self.names = names
        self.given_storages: list = [None] * len(args)  # the storages of the latest copies

    def fresh(self) -> tuple:
        storages: dict = {}
        copies, self.given_storages = [], []
        for arg in self.args:
            if not plain_tensor(arg):  # a weight object (tensor subclass) is the kernel's own, given as built
                copies.append(arg)
                self.given_storages.append(None)
                continue
            source = arg.untyped_storage()
            key = (str(source.device), source.data_ptr()) if source.data_ptr() else id(arg)
            if key not in storages:
                storages[key] = source.clone()
            storage = storages[key]
            if arg._is_view():  # a view stays a view: compiled code may treat views differently
                base = torch.empty(0, dtype=arg.dtype, device=arg.device).set_(storage)
                copy = base.as_strided(arg.size(), arg.stride(), arg.storage_offset())
            else:
                copy = torch.empty(0, dtype=arg.dtype, device=arg.device).set_(
                    storage, arg.storage_offset(), arg.size(), arg.stride()
                )
            copies.append(copy)
            self.given_storages.append(storage)  # tells a storage swapped for another
        return tuple(copies)

    def changes(self, given: tuple) -> dict:
        """{name: what changed} for each argument that a call changed in `given`, the latest
        copies `fresh()` made; empty when it changed none."""
        found = {}
        for name, original, copy, storage in zip(self.names, self.args, given, self.given_storages):
            what = _change(original, copy, storage)
            if what:
                found[name] = what
        return found


def _change(original: Any, copy: Any, given: torch.UntypedStorage | None) -> str | None:
    """What differs between a caller's tensor and the copy a call was given (on the storage
    `given`), or None."""
    if not plain_tensor(original) or given is None:  # only plain tensors are given a storage
        return None
    layout = [
        label
        for label, before, after in (
            ("dtype", original.dtype, copy.dtype),
            ("device", original.device, copy.device),
            ("shape", tuple(original.shape), tuple(copy.shape)),
            ("strides", original.stride(), copy.stride()),
            ("storage offset", original.storage_offset(), copy.storage_offset()),
        )
        if before != after
    ]
    if layout:
        return ", ".join(layout)
    now = copy.untyped_storage()
    if now.data_ptr() != given.data_ptr() or now.nbytes() != given.nbytes():
        return "storage"
    if torch.equal(_storage_bytes(original.untyped_storage()), _storage_bytes(now)):
        return None
    return "values" if not torch.equal(_bits(original), _bits(copy)) else "storage outside its view"


def changed_inputs_outcome(changed: Mapping[str, Mapping[str, str]], checked: Outcome) -> Outcome:
    """The verdict on a case whose callable changed its inputs in place (`changed`: side ->
    {argument name: what changed}): a MISMATCH of those sides naming the arguments, whatever
    `checked` (the classification of its results against pristine inputs) said."""
    sides = "+".join(side for side in ("eager", "compiled") if changed.get(side))
    names = list(dict.fromkeys(name for side in ("eager", "compiled") for name in changed.get(side, {})))
    how = "; ".join(
        f"{side}: " + ", ".join(f"{name} ({what})" for name, what in changed[side].items())
        for side in ("eager", "compiled")
        if changed.get(side)
    )
    said = f"{checked.outcome}" + (f" ({checked.detail})" if checked.detail else "")
    return Outcome(
        MISMATCH,
        f"MISMATCH: {sides} changed {', '.join(names)} {CHANGED_IN_PLACE}",
        sides,
        f"the kernel changed {', '.join(names)} in place ({how}): its results cannot be trusted; "
        f"checked against the inputs as drawn they gave {said}",
        observations=Observations(changed_inputs={side: dict(found) for side, found in changed.items() if found}),
    )


def _storage_key(t: Any) -> tuple | None:
    if not isinstance(t, torch.Tensor) or not t.numel():
        return None
    try:
        storage = t.untyped_storage()
    except Exception:  # a tensor without storage (a subclass): nothing to compare
        return None
    return (str(storage.device), storage.data_ptr()) if storage.data_ptr() else None


def shared_storage(out: Any, given: tuple, names: list) -> str | None:
    """The name of the input whose storage `out` shares, or None."""
    key = _storage_key(out)
    if key is None:
        return None
    for name, arg in zip(names, given):
        if _storage_key(arg) == key:
            return name
    return None


def serving_loop_problem(
    first_raw: Any,
    first_kept: Any,
    first_given: tuple,
    second_raw: Any,
    second_given: tuple,
    names: list,
    held: bool,
) -> str | None:
    """What a second call with other inputs showed about the outputs, None when nothing: an output
    sharing storage with an input or with the previous call's output, or the first output changed
    by the second call. `held`: outputs must survive later calls (not so under CUDA graphs)."""
    # Under CUDA graphs the first output is the graph's memory, overwritten by design: not read.
    calls = ((first_raw, first_given), (second_raw, second_given)) if held else ((second_raw, second_given),)
    for raw, given in calls:
        name = shared_storage(raw, given, names)
        if name:
            return f"{SHARES_INPUT} {name}"
    if not held:
        return None
    if _storage_key(second_raw) is not None and _storage_key(second_raw) == _storage_key(first_raw):
        return SHARES_PREVIOUS_OUTPUT
    if isinstance(first_raw, torch.Tensor) and isinstance(first_kept, torch.Tensor) and first_raw.numel():
        try:
            same = first_raw.shape == first_kept.shape and torch.equal(_bits(first_raw), _bits(first_kept))
        except Exception:
            same = True  # unreadable: the side checks name it
        if not same:
            return FIRST_OUTPUT_CHANGED
    return None


def _second_check(found: dict | None) -> dict | None:
    """The second call's check as a failed side check, or None when it passed."""
    if found is None or found.get("ok"):
        return None
    return {**found, "ok": False, "problem": f"{LATER_CALLS}: {problem_of(found)}"}


def _worse(check: dict | None, second: dict | None) -> dict | None:
    """A side's check with its second call's failure folded in (the first output's own failure
    first, the later calls' kept beside it as `later`: a release whose later calls also go wrong
    does worse, reports/sides.py)."""
    if second is None or check is None:
        return check
    if not check.get("ok"):
        return {**check, "later": second}
    return {**second, "first_call": {"ok": True, "ratio": check.get("ratio")}}


def _serving_call(
    call: Callable,
    first_given: tuple,
    first_raw: Any,
    first_kept: Any,
    second: PristineInputs,
    spec: OtherShape,
    device: str,
    caught: Callable,
    side: str,
    held: bool,
    compare: Callable,
    fresh: Callable | None = None,
    not_checked: list[str] | None = None,
    repeated: Callable | None = None,
) -> dict | None:
    """One side's serving-loop calls after the first (eager_compile_check's `second_call`): the
    second input set twice, so that a ring of two output buffers also hands the third caller the
    first one's memory. Its failed check, or None. `first_given` are the first call's copies (for
    storage sharing); `compare` records what a call changed in its inputs; `fresh` makes the
    copies (marking dims); `not_checked` gets a line for a call that could not be made;
    `repeated(before, after)` is handed the outputs of the calls on identical inputs."""
    # First, while a small cache (one entry, a pair) still holds the first call's tensors.
    found = _in_place_call(call, first_given, second, spec, device, caught, side, compare, not_checked)
    if found:
        return found
    earlier = [first_raw]
    kept = None  # the previous call's output, copied: the same inputs must give the same bits
    for _ in range(SERVING_CALLS - 1):
        given = fresh(second) if fresh else second.fresh()
        raw, raised = _later_call(call, given, device, caught, side, compare, LATER_CALLS_RAISED)
        if raised:
            return raised
        try:
            problem = serving_loop_problem(first_raw, first_kept, first_given, raw, given, second.names, held)
            if problem is None and held and _storage_key(raw) is not None:
                if any(_storage_key(raw) == _storage_key(out) for out in earlier[1:]):
                    problem = SHARES_PREVIOUS_OUTPUT
        except Exception as exc:  # the first output cannot be read back after a later call
            problem = f"{FIRST_OUTPUT_UNREADABLE} ({type(exc).__name__})"
        if problem:
            return {"ok": False, "ratio": math.inf, "problem": problem}
        out = _clone(raw)
        if kept is not None and repeated is not None:
            repeated(kept, out)
        kept = out
        found = _second_check(guarded(spec.check, True, out, None, device)[0])
        if found:
            return found
        earlier.append(raw)
    return None


def _later_call(
    call: Callable, given: tuple, device: str, caught: Callable, side: str, compare: Callable, raised: str
) -> tuple[Any, dict | None]:
    """One serving-loop call after the first, on `given`: its raw output and None, or None and
    the failed check (`raised` and the error's type) when it raised; `compare` records what it
    changed in `given`."""
    try:
        raw = call(*given)
        sync(device)
    except BaseException as exc:
        error = caught(exc, side, "runtime")
        compare(given, True)
        return None, {"ok": False, "ratio": math.inf, "problem": f"{raised} {error.type}"}
    compare(given, False)
    return raw, None


def _other_m_call(
    call: Callable,
    other: OtherShape,
    names: list,
    plan: SidePlan,
    log: CallLog,
    side: str,
    what: str = "",
    raised_text: str = OTHER_M_CALL_RAISED,
    caught: Callable | None = None,
) -> dict | None:
    """A call at another M after the first (SidePlan.other_m), or a later call of the sequence:
    its failed check (its problem led by `what`), or None. A kernel that keeps what it worked out
    for the first shape (a buffer, a tile, a dispatch choice) answers the second with it."""
    what = what or f"{OTHER_M_CALL} ({other.label})"
    source = PristineInputs(other.args, names)
    given = plan.fresh(source)

    def compare(copies: tuple, raised: bool) -> None:
        log.compare(copies, side, source, raised)

    raw, raised = _later_call(call, given, plan.device, caught or log.caught, side, compare, raised_text)
    if raised:
        return raised
    found = guarded(other.check, True, _clone(raw), None, plan.device)[0]
    if found is None or found.get("ok"):
        return None
    return {**found, "ok": False, "problem": f"{what}: {problem_of(found)}"}


def run_sequence(fn: Callable, plan: SidePlan, names: list, log: CallLog, run: SideRun) -> None:
    """The eager side's sequence (SidePlan.sequence) after its other calls: its failed check in
    run.later, what it raised outside a call in run.error, its seconds in run.timing."""
    began = time.perf_counter()
    try:
        run.later = _sequence_calls(fn, plan, names, log, "eager", run)
    except BaseException as exc:
        run.error = log.caught(exc, "eager", "runtime")
    run.timing["sequence_s"] = time.perf_counter() - began


def _sequence_calls(fn: Callable, plan: SidePlan, names: list, log: CallLog, side: str, run: SideRun) -> dict | None:
    """The sequence's calls (SidePlan.sequence) in order, each on its own inputs and checked
    against its own reference, up to the first that fails: its failed check, or None. Each call
    made is listed in run.sequence."""
    said: list[str] = []
    errors: list[ErrorInfo] = []

    def caught(exc: BaseException, on: str, layer: str) -> ErrorInfo:
        errors.append(log.caught(exc, on, layer))
        return errors[-1]

    for step in plan.sequence:
        said.append(step.said or step.label)
        call = log.watched(step.fn, side) if step.fn is not None else fn
        what = f"{SEQUENCE_CALL} ({', after '.join(reversed(said))})"
        errors.clear()
        found = _other_m_call(call, step, names, plan, log, side, what, SEQUENCE_CALL_RAISED, caught)
        judged_elsewhere = plan.builtin or step.governed
        refused = (
            matching_refusal(errors[0], plan.builtin) if found is not None and errors and judged_elsewhere else None
        )
        if refused is not None:
            # A built-in's op refuses that call (another dtype, another size) whatever came before,
            # or a user kernel refuses a dtype or bias in torch's words: the cases that make it
            # first judge the refusal (their declaration hints); the rest of the sequence is not
            # made. Any other raise of a user kernel is its finding (shrink.py tells a plain
            # failure from state).
            log.not_checked.append(f"{SEQUENCE_CALL} ({step.label}): torch refuses it ({refused.key})")
            run.sequence.append({"label": step.label, "ok": None})
            return None
        run.sequence.append({"label": step.label, "ok": found is None})
        if found is not None:
            return found
    return None


def _skipped(not_checked: list[str] | None, what: str) -> None:
    if not_checked is not None and what not in not_checked:
        not_checked.append(what)


def _storages(given: tuple) -> list | None:
    """The storages of `given`'s tensors (None for an absent argument), or None when an argument
    is neither a plain tensor nor None (a weight object, a tuple of scales): then nothing is
    written in place."""
    if not all(t is None or plain_tensor(t) for t in given):
        return None
    return [None if t is None else t.untyped_storage() for t in given]


def _in_place_call(
    call: Callable,
    first_given: tuple,
    second: PristineInputs,
    spec: OtherShape,
    device: str,
    caught: Callable,
    side: str,
    compare: Callable,
    not_checked: list[str] | None = None,
) -> dict | None:
    """The first call's tensors, the same objects, given the second input set's values in place
    (what a serving loop's static buffers and a weight reload see), their version counters
    bumped: the output must be the new values' result. A kernel that caches by tensor identity
    or data pointer answers with the first call's. The first call's values are put back
    afterwards; its copies are compared with them later."""
    targets, sources = _storages(first_given), _storages(second.fresh())
    if targets is None or sources is None or len(targets) != len(sources):
        _skipped(
            not_checked, f"{IN_PLACE_CALL}: an argument is not a plain tensor (a weight object, a tuple of scales)"
        )
        return None
    pairs = [(t, s) for t, s in zip(targets, sources) if t is not None and s is not None]
    if any(t.nbytes() != s.nbytes() for t, s in pairs):
        _skipped(not_checked, f"{IN_PLACE_CALL}: the second inputs' storages differ in size")
        return None
    saved = [t.clone() for t, _ in pairs]
    # The call's tensors are the first call's: what it changed is read on their storages.
    second.given_storages = targets
    try:
        for target, source in pairs:
            target.copy_(source)
        _written(first_given)
        raw, raised = _later_call(call, first_given, device, caught, side, compare, IN_PLACE_CALL_RAISED)
        if raised:
            return raised
        found = guarded(spec.check, True, _clone(raw), None, device)[0]
        if found is None or found.get("ok"):
            return None
        return {**found, "ok": False, "problem": f"{IN_PLACE_CALL}: {problem_of(found)}"}
    finally:
        with contextlib.suppress(Exception):  # a device the call left unreadable: its error is the outcome
            for (target, _), kept in zip(pairs, saved):
                target.copy_(kept)
            _written(first_given)


def _written(given: tuple) -> None:
    """Bumps the version counters of `given`'s tensors, as an in-place write through them
    (`param.copy_(new)`) does: a cache keyed on (pointer, version) is right to miss."""
    bump = getattr(torch.autograd.graph, "increment_version", None)
    if bump is not None:
        for t in given:
            if t is not None:
                with contextlib.suppress(RuntimeError):  # an inference tensor has no counter to bump
                    bump(t)


SERVING_CALLS = 3  # the first call, then the second input set twice


def holds_outputs(settings: Mapping[str, Any]) -> bool:
    """Whether compiled outputs must survive later calls: not under CUDA graphs, whose trees
    reuse output memory by design (torch.compiler.cudagraph_mark_step_begin)."""
    options = settings.get("options") or {}
    return settings.get("mode") not in ("reduce-overhead", "max-autotune") and not options.get("triton.cudagraphs")


@dataclass
class Sides:
    """What one eager -> compile -> check run produced; `outcome` is the case's verdict."""

    outcome: Outcome
    eager_out: Any = None
    compiled_outs: tuple | None = None
    timing: dict = field(default_factory=dict)


@dataclass
class EagerCall:
    """The eager side, read like a runner's compiled side: the function itself, nothing compiled."""

    fn: Callable
    graphs: int = 0
    calls: int = 0
    stage: str = "eager"
    timing: dict = field(default_factory=dict)
    codes: list = field(default_factory=list)

    def close(self) -> None:
        pass


class CallLog:
    """What the calls of both sides left besides their results: the BaseExceptions with which
    the kernel tried to end the process, the arguments each side changed in place, and errors
    reading inputs back after a call that ran (the harness's problem, raised)."""

    def __init__(self, interrupts: bool, contract: CallContract | None = None):
        self.interrupts = interrupts
        self.contract = contract or CallContract()
        self.broken: dict = {}  # side -> {call-contract check: what the first call to break it showed}
        self.exits: dict = {}  # side -> the BaseException
        self.changed: dict = {}  # side -> {argument name: what the call changed}
        self.unreadable: list = []
        self.not_checked: list[str] = []  # the calls a side could not make, and why

    def caught(self, exc: BaseException, side: str, layer: str) -> ErrorInfo:
        """`exc` as the side's error; the user's Ctrl-C is raised again."""
        if self.interrupts and isinstance(exc, KeyboardInterrupt):
            raise exc
        if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt, GeneratorExit ...
            self.exits[side] = exc
        return describe_exception(exc, layer)

    def watched(self, fn: Callable, side: str) -> Callable:
        """`fn`, each output's layout checked as it is returned (call_contract.layout_problem)."""

        def call(*args: Any) -> Any:
            out = fn(*args)
            self._broke(side, OUTPUT_LAYOUT_CHECK, layout_problem(out, self.contract))
            return out

        return call

    def repeated(self, side: str, before: Any, after: Any) -> None:
        """Two outputs of calls on identical inputs: they must agree bit for bit."""
        self._broke(side, DETERMINISM_CHECK, repeat_problem(before, after, self.contract))

    def _broke(self, side: str, check: str, problem: str | None) -> None:
        if problem is not None:
            self.broken.setdefault(side, {}).setdefault(check, problem)

    def compare(self, given: tuple, side: str, source: PristineInputs, raised: bool) -> None:
        """Records what a call changed in `given`, its copies of `source`."""
        try:
            self.changed.setdefault(side, {}).update(source.changes(given))
        except Exception as exc:
            # A call that raised may have left the device unreadable (a sticky CUDA error): its
            # error is the outcome.
            if not raised:
                self.unreadable.append(exc)


@dataclass
class SidePlan:
    """The calls one side makes after its first: the serving loop's (`second`, outputs `held`
    across calls or not), else the same inputs again when `repeat`; then each of `other_shapes`,
    the M-dependent `dims` of every call's copies marked `marked`. `other_m`: one call at another
    M after the serving loop, checked like it (the eager side's: a different shape after the first
    call must give its own result)."""

    device: str
    second: OtherShape | None = None
    second_inputs: PristineInputs | None = None
    held: bool = True
    repeat: bool = False
    other_shapes: Sequence[OtherShape] = ()
    dims: list = field(default_factory=list)
    marked: str | None = None
    other_m: OtherShape | None = None
    # The eager side's calls after other_m: another K, N or dtype, then the first shape again.
    sequence: Sequence[OtherShape] = ()
    builtin: str | None = None  # a built-in kernel's name: its op's documented refusals end a sequence
    # The first call's copies compared again after the serving loop: a compiled call may write
    # into an earlier call's inputs.
    recheck_first: bool = False

    def fresh(self, inputs: PristineInputs) -> tuple:
        copies = inputs.fresh()
        if self.dims and self.marked:
            mark_m(copies, self.dims, self.marked)
        return copies


@dataclass
class SideRun:
    """What one side's calls produced."""

    outs: tuple | None = None  # the outputs checked against the reference; None when a call raised
    error: ErrorInfo | None = None
    first_s: float = 0.0  # the first call's seconds, to its return or its exception
    first_returned: bool = False
    timing: dict = field(default_factory=dict)  # run_s, other_m_s
    later: dict | None = None  # the serving loop's failed check, None when it passed or did not run
    shapes: list = field(default_factory=list)  # per other M: its check and seconds
    sequence: list = field(default_factory=list)  # per sequence call made: its label and whether it passed


@dataclass
class _InFlight:
    """The copies the side's current call was given and what they were copied from: a call that
    raises is compared on those."""

    given: tuple
    source: PristineInputs


def run_side(side: str, built: CompiledSide, pristine: PristineInputs, log: CallLog, plan: SidePlan) -> SideRun:
    """One side's calls, each on copies of its own (PristineInputs) compared after the call: the
    first, then what `plan` says. Whatever a call raises is the side's error (log.caught)."""
    run = SideRun()
    call = _InFlight(plan.fresh(pristine), pristine)
    fn = log.watched(built.fn, side)
    start = time.perf_counter()
    try:
        first_raw = fn(*call.given)
        sync(plan.device)
        first = _clone(first_raw)
        run.first_s, run.first_returned = time.perf_counter() - start, True
        log.compare(call.given, side, pristine, False)
        run.outs = _later_calls(side, fn, first_raw, first, call, plan, log, run)
        if plan.second is not None:
            del first_raw  # done with after the serving loop; other plans keep it to the end
        if plan.other_m is not None and run.later is None:
            began = time.perf_counter()
            run.later = _other_m_call(fn, plan.other_m, pristine.names, plan, log, side)
            run.timing["other_m_s"] = time.perf_counter() - began
        for other in plan.other_shapes:
            call.source = PristineInputs(other.args, pristine.names)
            call.given = plan.fresh(call.source)
            run.shapes.append(_other_shape_call(side, fn, other, call, plan, log, run))
    except BaseException as exc:
        if not run.first_returned:
            run.first_s = time.perf_counter() - start
        run.error = log.caught(exc, side, built.stage)
        if plan.other_shapes and run.outs is not None:
            run.shapes.append({"label": plan.other_shapes[len(run.shapes)].label, "ok": False, "problem": "raised"})
        log.compare(call.given, side, call.source, True)
    return run


def _later_calls(
    side: str,
    fn: Callable,
    first_raw: Any,
    first: Any,
    call: _InFlight,
    plan: SidePlan,
    log: CallLog,
    run: SideRun,
) -> tuple:
    """The calls after the first on the same shape: the serving loop's (its failed check in
    run.later), else the same inputs again when the plan repeats. The outputs to check."""
    pristine = call.source
    if plan.second is not None and plan.second_inputs is not None:
        second = plan.second_inputs
        start = time.perf_counter()
        run.later = _serving_call(
            fn,
            call.given,
            first_raw,
            first,
            second,
            plan.second,
            plan.device,
            log.caught,
            side,
            plan.held,
            lambda copies, raised: log.compare(copies, side, second, raised),
            plan.fresh,
            log.not_checked,
            lambda before, after: log.repeated(side, before, after),
        )
        run.timing["run_s"] = time.perf_counter() - start
        if plan.recheck_first:
            log.compare(call.given, side, pristine, False)
        return (first,)
    if plan.repeat:
        call.given = plan.fresh(pristine)
        start = time.perf_counter()
        again = _clone(fn(*call.given))
        sync(plan.device)
        run.timing["run_s"] = time.perf_counter() - start
        log.compare(call.given, side, pristine, False)
        log.repeated(side, first, again)
        return (first, again)
    return (first,)


def _other_shape_call(
    side: str, fn: Callable, other: OtherShape, call: _InFlight, plan: SidePlan, log: CallLog, run: SideRun
) -> dict:
    """One call at another M of a dynamic-M mode, on `call`'s copies, checked against its own
    reference: its label, whether it was right, and its seconds (also summed in other_m_s)."""
    start = time.perf_counter()
    out = _clone(fn(*call.given))
    sync(plan.device)
    seconds = time.perf_counter() - start
    run.timing["other_m_s"] = run.timing.get("other_m_s", 0.0) + seconds
    log.compare(call.given, side, call.source, False)
    found = guarded(other.check, False, None, (out,), plan.device)[1] or {"ok": False, "problem": "not checked"}
    return {
        "label": other.label,
        "ok": bool(found.get("ok")),
        "problem": found.get("problem"),
        "ratio": found.get("ratio"),
        "run_s": round(seconds, 6),
    }


FX_GRAPH_CACHE_COUNTERS = {"hit": "fxgraph_cache_hit", "miss": "fxgraph_cache_miss", "bypass": "fxgraph_cache_bypass"}


def fx_graph_cache_counts() -> dict[str, int]:
    """Inductor's FX graph cache counters so far in this process (zeros where torch has none)."""
    counters: Mapping[str, int] = torch._dynamo.utils.counters.get("inductor", {})
    return {name: int(counters.get(key, 0)) for name, key in FX_GRAPH_CACHE_COUNTERS.items()}


def _counts_since(before: dict[str, int] | None, after: dict[str, int]) -> dict[str, int] | None:
    if before is None:
        return None
    counts = {name: after[name] - before.get(name, 0) for name in after}
    return counts if any(counts.values()) else None


def eager_compile_check(
    fn: Callable,
    args: tuple,
    settings: Mapping[str, Any],
    device: str,
    check: SideChecker,
    kernel: Support | DeclaredKernel | None = None,
    params: CaseParams | None = None,
    interrupts: bool = True,
    runner: str = "compile",
    other_shapes: Sequence[OtherShape] = (),
    second_call: OtherShape | None = None,
    names: Sequence[str] | None = None,
    eager_other_m: OtherShape | None = None,
    on_side: SideSink | None = None,
    call_contract: CallContract | None = None,
    eager_sequence: Sequence[OtherShape] = (),
) -> Sides:
    """Call `fn(*args)` eagerly, then compiled with `settings` (twice: the first call compiles,
    the second runs the cached code), check each side with the side-checker `check`
    (oracle.case_checker, or oracle.reference_checker) guarded by oracle.guarded, and classify
    (classify.classify, with `kernel` and `params` for refusals). `interrupts`: a
    KeyboardInterrupt is the user's and is raised again (in an isolated child it can only come
    from the kernel, and is a CRASH). Each call gets copies of the tensors in `args`
    (PristineInputs); a call that changed one makes the case a MISMATCH (changed_inputs_outcome).
    `runner` (runners.RUNNERS, a compile mode's `runner`) makes the compiled side; a dynamic-M
    runner also calls it at each of `other_shapes`, M marked, and counts the frames compiled
    (dynamic_m_outcome). An Inductor side records the kernel it chose (kernel_choice).

    `second_call` (inputs of the same shape, other values, their own checker) is what a serving
    loop does next: each side calls again with those inputs (the compiled side on its cached
    code); the second output must match its own reference, the first must be unchanged after it,
    and no output may share storage with an input or with the previous output
    (serving_loop_problem). Without it the compiled side runs the same inputs twice.
    `eager_other_m`: the eager side's call at another M (SidePlan.other_m); `eager_sequence`: its
    calls after that one (SidePlan.sequence), listed in the outcome's observations.sequence.

    `on_side(side, evidence)` is handed each side's evidence as soon as it is made (side_evidence:
    the eager side's check and error before the compiled side starts), so that a process that dies
    or hangs later keeps what came before.

    Every call is held to the call contract (call_contract.py): `call_contract`, else what
    `kernel` declares; a broken one makes a case whose values pass a MISMATCH (contract_outcome)."""
    log = CallLog(interrupts, call_contract or CallContract.of(kernel))
    pristine = PristineInputs(args, list(names) if names is not None else argument_names(fn, len(args)))
    second_inputs = PristineInputs(second_call.args, pristine.names) if second_call is not None else None

    builtin = getattr(kernel, "name", None) if getattr(kernel, "builtin", False) else None
    eager_plan = SidePlan(
        device, second_call, second_inputs, other_m=eager_other_m, sequence=eager_sequence, builtin=builtin
    )
    eager = run_side("eager", EagerCall(fn), pristine, log, eager_plan)
    timing: dict = {"eager_s": eager.first_s, **{f"eager_{key}": value for key, value in eager.timing.items()}}
    eager_evidence = side_evidence(check, "eager", eager, device)
    if on_side is not None:
        on_side("eager", eager_evidence)
    if eager_sequence and eager.error is None and eager.later is None and eager.outs is not None:
        # After the eager side's evidence is sent: a call of the sequence that ends the process
        # leaves the first call's check behind.
        run_sequence(log.watched(fn, "eager"), eager_plan, pristine.names, log, eager)
        timing["eager_sequence_s"] = eager.timing["sequence_s"]
        if eager.later is not None or eager.error is not None:
            eager_evidence = side_evidence(check, "eager", eager, device)
            if on_side is not None:
                on_side("eager", eager_evidence)
    compiled = _compiled_stage(fn, settings, runner, pristine, log, device, second_call, second_inputs, other_shapes)
    timing.update(compiled.timing)
    if on_side is not None:  # what comes after (opcheck, the verdict) may still end the process
        on_side("compiled", side_evidence(check, "compiled", compiled.run, device))

    eager_out = eager.outs[0] if eager.outs else None
    if log.exits:
        crashed = crash_outcome(log.exits, eager.error, compiled.run.error, timing)
        if "eager" not in log.exits and eager_evidence.check is not None:
            crashed.errors = {"eager": eager_evidence.check}
        crashed.observations.died_after = EAGER_CHECKED if "eager" not in log.exits else None
        crashed.observations.sequence = _sequence_made(eager)
        return Sides(crashed, eager_out, compiled.run.outs, timing)
    if log.unreadable:
        raise log.unreadable[0]
    result = _judged(check, eager, compiled, log, device, timing, kernel, params)
    result.observations.sequence = _sequence_made(eager)
    return Sides(result, eager_out, compiled.run.outs, timing)


def _sequence_made(eager: SideRun) -> dict | None:
    """observations.sequence: the sequence's calls the eager side made, and the one that failed."""
    if not eager.sequence:
        return None
    failed = [call["label"] for call in eager.sequence if call["ok"] is False]
    return {"calls": [call["label"] for call in eager.sequence], "failed": failed[0] if failed else None}


SideSink = Callable[[str, SideEvidence], None]


def side_evidence(check: SideChecker, name: str, side: SideRun, device: str) -> SideEvidence:
    """The side's check made now (guarded, the serving loop's later calls folded in as _judged
    does), or its error. The verdict makes its own checks after both sides: those count (an
    output sharing storage with a later call's is read as it is then)."""
    if side.error is not None or not side.outs:
        return SideEvidence(None, side.error)
    if name == "eager":
        found = guarded(check, True, side.outs[0], None, device)[0]
    else:
        found = guarded(check, False, None, side.outs, device)[1]
    return SideEvidence(_worse(found, side.later), None)


@dataclass
class CompiledStage:
    """The compiled side's calls and what its build recorded."""

    run: SideRun
    built: CompiledSide
    marked: str | None  # the dim a dynamic-M runner marks (runners.marks_m)
    inductor: bool
    codes: list  # Inductor's output code (kernel_choice reads it)
    cache_counts: dict | None  # FX graph cache hits and misses of this side
    timing: dict


def _compiled_stage(
    fn: Callable,
    settings: Mapping[str, Any],
    runner: str,
    pristine: PristineInputs,
    log: CallLog,
    device: str,
    second_call: OtherShape | None,
    second_inputs: PristineInputs | None,
    other_shapes: Sequence[OtherShape],
) -> CompiledStage:
    """Build the compiled side with its runner and make its calls (SidePlan: twice, the serving
    loop, the other shapes of a dynamic-M mode), Inductor's output code captured."""
    # A fresh Dynamo state per case: no recompile limit, no guards from earlier cases.
    torch._dynamo.reset()
    how = runner_named(runner)
    built = how.build(fn, settings)
    marked = how.marks_m
    plan = SidePlan(
        device,
        second_call,
        second_inputs,
        held=holds_outputs(settings),
        repeat=True,
        other_shapes=other_shapes,
        dims=varying_dims(pristine.args, other_shapes[0].args) if marked and other_shapes else [],
        marked=marked,
        recheck_first=True,
    )
    inductor = settings.get("backend") == "inductor"
    capture: contextlib.AbstractContextManager = output_code() if inductor else contextlib.nullcontext([])
    cache_before = fx_graph_cache_counts() if inductor else None
    with capture as codes:
        run = run_side("compiled", built, pristine, log, plan)
    cache_counts = _counts_since(cache_before, fx_graph_cache_counts()) if inductor else None
    timing: dict = {"compile_s": run.first_s} if run.first_returned else {}
    timing.update(run.timing)
    timing.update(built.timing)
    codes = list(codes) + list(built.codes)
    built.close()
    return CompiledStage(run, built, marked, inductor, codes, cache_counts, timing)


def _judged(
    check: SideChecker,
    eager: SideRun,
    compiled: CompiledStage,
    log: CallLog,
    device: str,
    timing: dict,
    kernel: Support | DeclaredKernel | None,
    params: CaseParams | None,
) -> Outcome:
    """Both sides checked against the reference (timed) and classified, with what the calls
    observed: changed inputs, the graphs compiled, cache hits, the kernel Inductor chose."""
    start = time.perf_counter()
    eager_out = eager.outs[0] if eager.outs else None
    eager_check, compiled_check = guarded(check, eager.error is None, eager_out, compiled.run.outs, device)
    # The float64 reference and both comparisons (the serving loop's were timed with its side).
    timing["check_s"] = time.perf_counter() - start
    eager_check, compiled_check = _worse(eager_check, eager.later), _worse(compiled_check, compiled.run.later)
    built = compiled.built
    result = classify(eager.error, compiled.run.error, built.calls, eager_check, compiled_check, kernel, params)
    if any(log.changed.values()):
        result = changed_inputs_outcome(log.changed, result)
    result = contract_outcome(log.broken, result)
    result.timing = {k: round(v, 6) for k, v in timing.items()}
    result.eager_error, result.compiled_error = eager.error, compiled.run.error
    result.errors = {"eager": eager_check, "compiled": compiled_check}
    observed = result.observations
    observed.compiled_graphs = built.graphs
    if compiled.cache_counts:
        observed.compile_cache = compiled.cache_counts
    observed.compiled_graph_calls = built.calls
    if log.not_checked:
        observed.not_checked = list(log.not_checked)
    if log.broken:
        observed.call_contract = {side: dict(found) for side, found in log.broken.items()}
    if compiled.inductor and (compiled.codes or built.graphs):
        observed.kernel_choice = kernel_choice(compiled.codes)
    if compiled.marked:
        observed.dynamic_m = {"marked": compiled.marked, "frames": built.graphs, "shapes": compiled.run.shapes}
        result = dynamic_m_outcome(result, compiled.marked, built.graphs, compiled.run.shapes)
    return result
