"""The verdict of one case: its Outcome from what each side raised or returned.

The run, triage's rungs and repro scripts (which embed this module) all classify here. A pair of
alike refusals is judged by refusals.py; a kernel that tried to end the process is a CRASH.

Whether the input is valid decides the tier of a failure where eager raises: a case is invalid
input when its params say purpose "boundary", or when they say no purpose and it lies outside
the kernel's declared support; a missing purpose is otherwise valid (fail closed). Each Outcome
names the root cause on the side that is wrong (`root_cause`, with `met`: what the other side
did), so that one compiled-side bug is one summary line whatever eager refusals it met.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .case_axes import CaseParams
from .outcome import (
    BOUNDARY_PARITY,
    COMPILE_ONLY_ERROR,
    CRASH,
    ERROR_PARITY,
    FALLBACK,
    LENIENT,
    LENIENT_MISMATCH,
    MISMATCH,
    PASS,
    ErrorInfo,
    Outcome,
    normalise_message,
    signature_of,
)
from .refusals import DeclaredKernel, Support, judge, outside_declared_support
from .signature_text import ACCEPTS, FALLBACK_SIGNATURE, OFF_THE_REFERENCE


def plain_names(qualified: str) -> set:
    """A class name without its module and without Dynamo's Observed wrapping: Dynamo re-raises
    a traced user exception as Observed<Name> (older releases) or Observed<Name>Error
    (ObservedValueErrorError for a ValueError, newer releases)."""
    name = qualified.rsplit(".", 1)[-1]
    if not name.startswith("Observed"):
        return {name}
    name = name[len("Observed") :]
    return {name, name[: -len("Error")]} if name.endswith("Error") else {name}


def error_names(error: ErrorInfo | None) -> set:
    """Plain names of an error's own class and of its root cause's."""
    if error is None:
        return set()
    return plain_names(error.type) | plain_names(error.root_type)


def same_refusal(eager: ErrorInfo, compiled: ErrorInfo) -> bool:
    """Whether both sides raised the same error, however Dynamo wrapped the compiled one."""
    if plain_names(eager.root_type) & (plain_names(compiled.root_type) | plain_names(compiled.type)):
        return True
    # Older Dynamo wraps fake-tensor errors without __cause__; fall back to the message.
    first_line = normalise_message(eager.message, max_lines=1)
    return bool(first_line) and first_line in normalise_message(compiled.message, max_lines=12)


def _off_by(check: dict) -> str:
    if check.get("problem"):
        return check["problem"]
    where = f"; {check['where']}" if check.get("where") else ""
    return f"max |err|/tol = {check['ratio']:.3g} (max abs {check['max_abs']:.3g}){where}"


def problem_of(check: dict) -> str:
    """A failed check's problem for a signature: its own, or the values off the reference with
    what the off elements share (off_pattern.py)."""
    if check.get("problem"):
        return check["problem"]
    return OFF_THE_REFERENCE + (f" {check['pattern']}" if check.get("pattern") else "")


# A symbolic size (s?, from a dynamic-shape compile) is a size like any other in a cause: one
# check failing for concrete and symbolic shapes is one bug.
_SYMBOLIC = re.compile(r"\bs\?")


def cause_of(error: ErrorInfo) -> str:
    """The root cause an error stands for: its signature, symbolic sizes read as sizes, cut
    shorter than a signature so that both spellings of one message cut at the same place."""
    return _SYMBOLIC.sub("N", signature_of(error))[:200].rstrip()


def invalid_input(kernel: Support | DeclaredKernel | None, params: CaseParams | None) -> bool:
    """Whether the case's input is invalid by design: params purpose "boundary", or no purpose
    and a case outside the kernel's declared support (a KernelSpec or refusals.Support)."""
    if not params:
        return False
    purpose = params.purpose
    if purpose is not None:
        return purpose == "boundary"
    if kernel is None:
        return False

    return outside_declared_support(kernel, params) is not None


def _expected_refusal(params: CaseParams | None) -> str:
    wanted = params.expected_refusal if params else None
    return f"; the boundary case expects: {wanted}" if wanted else ""


def _eager_refused(
    eager_error: ErrorInfo,
    compiled_graph_calls: int,
    compiled_check: dict | None,
    boundary: bool,
    params: CaseParams | None,
) -> Outcome:
    """Eager raises and the compiled call returns: its result against the reference decides."""
    met = f"eager: {signature_of(eager_error)}"
    signature = f"{ACCEPTS}: {signature_of(eager_error)}"
    if compiled_graph_calls and compiled_check is not None and not compiled_check["ok"]:
        problem = problem_of(compiled_check)
        return Outcome(
            LENIENT_MISMATCH,
            signature,
            "compiled",
            f"eager raises, compiled returns a wrong result: {_off_by(compiled_check)}{_expected_refusal(params)}",
            root_cause=f"{ACCEPTS}, with {problem}",
            met=met,
        )
    if compiled_graph_calls and compiled_check is not None and boundary:
        return Outcome(
            LENIENT,
            signature,
            "compiled",
            f"eager raises on invalid input, compiled returns the reference's result{_expected_refusal(params)}",
            root_cause=ACCEPTS,
            met=met,
        )
    # Valid input (or no compiled graph ran): eager is the side that is wrong.
    return Outcome(
        ERROR_PARITY,
        signature,
        "eager",
        "eager raises, compiled returns a result",
        root_cause=signature,
        met="compiled returns a result",
    )


def classify(
    eager_error: ErrorInfo | None,
    compiled_error: ErrorInfo | None,
    compiled_graph_calls: int,
    eager_check: dict | None,
    compiled_check: dict | None,
    kernel: Support | DeclaredKernel | None = None,
    params: CaseParams | None = None,
) -> Outcome:
    """The case's outcome from what each side raised or returned. `kernel` (a KernelSpec or a
    refusals.Support) and `params` say whether a refusal alike on both sides is earned
    (refusals.judge) and whether the input is invalid (invalid_input); without them (a plain
    matmul rung of triage) an alike refusal stays UNSUPPORTED unless it is an internal error, and
    the input counts as valid."""
    if eager_error and compiled_error:
        return _both_raised(eager_error, compiled_error, kernel, params)
    if eager_error:
        return _eager_refused(eager_error, compiled_graph_calls, compiled_check, invalid_input(kernel, params), params)
    if compiled_error:
        return _compiled_raised(compiled_error, eager_check)
    if compiled_graph_calls == 0:
        return Outcome(
            FALLBACK,
            FALLBACK_SIGNATURE,
            "dynamo",
            "torch.compile returned eager results without running a compiled graph",
        )
    if eager_check is None or compiled_check is None:
        raise ValueError("both sides returned, yet a side was not checked")  # the harness's fault
    return _both_returned(eager_check, compiled_check)


def _both_raised(
    eager_error: ErrorInfo,
    compiled_error: ErrorInfo,
    kernel: Support | DeclaredKernel | None,
    params: CaseParams | None,
) -> Outcome:
    """A refusal alike on both sides (judged: earned or not), else a parity failure."""
    if same_refusal(eager_error, compiled_error):
        return judge(kernel, params, eager_error, compiled_error)
    boundary = invalid_input(kernel, params)
    sig = f"eager {signature_of(eager_error)} <> compiled {signature_of(compiled_error)}"
    return Outcome(
        BOUNDARY_PARITY if boundary else ERROR_PARITY,
        sig,
        compiled_error.layer,
        "eager and compiled raise different errors"
        + (" on invalid input" if boundary else "")
        + (_expected_refusal(params) if boundary else ""),
        root_cause=cause_of(compiled_error),
        met=f"eager: {signature_of(eager_error)}",
    )


def _compiled_raised(compiled_error: ErrorInfo, eager_check: dict | None) -> Outcome:
    if eager_check is not None and not eager_check["ok"]:
        # Eager is wrong on its own: that is the first bug, whatever compile then does.
        return Outcome(
            MISMATCH,
            f"MISMATCH: eager {problem_of(eager_check)}",
            "eager",
            f"eager: {_off_by(eager_check)}; compiled raised {signature_of(compiled_error)}",
        )
    return Outcome(
        COMPILE_ONLY_ERROR,
        signature_of(compiled_error),
        compiled_error.layer,
        "eager passes, compiled raises",
        root_cause=cause_of(compiled_error),
    )


def _both_returned(eager_check: dict, compiled_check: dict) -> Outcome:
    off = [(side, check) for side, check in (("eager", eager_check), ("compiled", compiled_check)) if not check["ok"]]
    if off:
        sides = "+".join(side for side, _ in off)
        # The first wrong side names the bug: a compiled side that also goes wrong its own way
        # (a template reading garbage where eager misread one block) is the same bug.
        problem = problem_of(off[0][1])
        detail = "; ".join(f"{side}: {_off_by(check)}" for side, check in off)
        return Outcome(MISMATCH, f"MISMATCH: {sides} {problem}", sides, detail)
    return Outcome(PASS)


def crash_outcome(
    exits: Mapping[str, BaseException],
    eager_error: ErrorInfo | None,
    compiled_error: ErrorInfo | None,
    timing: Mapping[str, float],
) -> Outcome:
    """The outcome of a kernel that tried to end the process (`exits`: side -> the
    BaseException it raised); isolated or not, a CRASH of the case."""
    side = "eager" if "eager" in exits else "compiled"
    error = eager_error if side == "eager" else compiled_error
    raised = ", ".join(f"{s}: {type(exc).__name__}({', '.join(map(repr, exc.args))})" for s, exc in exits.items())
    # The side's error is the BaseException it raised (pipeline.CallLog.caught); its text without one.
    said = signature_of(error) if error is not None else raised
    return Outcome(
        CRASH,
        f"CRASH: {said}",
        (error.layer if error is not None else None) or side,
        f"the kernel tried to end the process ({raised}); isolated, it would have killed the run",
        timing={k: round(v, 6) for k, v in timing.items()},
        eager_error=eager_error,
        compiled_error=compiled_error,
    )
