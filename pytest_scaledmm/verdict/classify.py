"""The verdict of one case: its Outcome from what each side raised or returned.

The run, triage's rungs and repro scripts (which embed this module) all classify here. A pair of
alike refusals is judged by refusals.py; a kernel that tried to end the process is a CRASH.
"""

from __future__ import annotations

from typing import Mapping, Optional

from .outcome import (
    COMPILE_ONLY_ERROR,
    CRASH,
    ERROR_PARITY,
    FALLBACK,
    MISMATCH,
    PASS,
    ErrorInfo,
    Outcome,
    normalise_message,
    signature_of,
)


def plain_names(qualified: str) -> set:
    """A class name without its module and without Dynamo's Observed wrapping: Dynamo re-raises
    a traced user exception as Observed<Name> (older releases) or Observed<Name>Error
    (ObservedValueErrorError for a ValueError, newer releases)."""
    name = qualified.rsplit(".", 1)[-1]
    if not name.startswith("Observed"):
        return {name}
    name = name[len("Observed"):]
    return {name, name[: -len("Error")]} if name.endswith("Error") else {name}


def error_names(error: Optional[ErrorInfo]) -> set:
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
    return check.get("problem") or "max |err|/tol = %.3g (max abs %.3g)" % (check["ratio"], check["max_abs"])


def classify(
    eager_error: Optional[ErrorInfo],
    compiled_error: Optional[ErrorInfo],
    compiled_graph_calls: int,
    eager_check: Optional[dict],
    compiled_check: Optional[dict],
    kernel=None,
    params: Optional[Mapping] = None,
) -> Outcome:
    """The case's outcome from what each side raised or returned. `kernel` (a KernelSpec or a
    refusals.Support) and `params` say whether a refusal alike on both sides is earned
    (refusals.judge); without them (a plain matmul rung of triage) it stays UNSUPPORTED unless it
    is an internal error."""
    if eager_error and compiled_error:
        if same_refusal(eager_error, compiled_error):
            from .refusals import judge

            return judge(kernel, params, eager_error, compiled_error)
        sig = f"eager {signature_of(eager_error)} <> compiled {signature_of(compiled_error)}"
        return Outcome(ERROR_PARITY, sig, compiled_error.layer, "eager and compiled raise different errors")
    if eager_error:
        return Outcome(
            ERROR_PARITY,
            f"compiled accepts what eager refuses: {signature_of(eager_error)}",
            "eager",
            "eager raises, compiled returns a result",
        )
    if compiled_error:
        if eager_check is not None and not eager_check["ok"]:
            # Eager is wrong on its own: that is the first bug, whatever compile then does.
            return Outcome(
                MISMATCH,
                f"MISMATCH: eager {eager_check.get('problem', 'values off the reference')}",
                "eager",
                f"eager: {_off_by(eager_check)}; compiled raised {signature_of(compiled_error)}",
            )
        return Outcome(COMPILE_ONLY_ERROR, signature_of(compiled_error), compiled_error.layer, "eager passes, compiled raises")
    if compiled_graph_calls == 0:
        return Outcome(
            FALLBACK,
            "FALLBACK: the compiled function ran no compiled graph",
            "dynamo",
            "torch.compile returned eager results without running a compiled graph",
        )
    off = [(side, check) for side, check in (("eager", eager_check), ("compiled", compiled_check)) if not check["ok"]]
    if off:
        sides = "+".join(side for side, _ in off)
        problems = sorted({check.get("problem", "values off the reference") for _, check in off})
        detail = "; ".join(f"{side}: {_off_by(check)}" for side, check in off)
        return Outcome(MISMATCH, f"MISMATCH: {sides} {', '.join(problems)}", sides, detail)
    return Outcome(PASS)


def crash_outcome(exits: Mapping[str, BaseException], eager_error, compiled_error, timing: Mapping[str, float]) -> Outcome:
    """The outcome of a kernel that tried to end the process (`exits`: side -> the
    BaseException it raised); isolated or not, a CRASH of the case."""
    side = "eager" if "eager" in exits else "compiled"
    error = eager_error if side == "eager" else compiled_error
    raised = ", ".join(f"{s}: {type(exc).__name__}({', '.join(map(repr, exc.args))})" for s, exc in exits.items())
    return Outcome(
        CRASH,
        f"CRASH: {signature_of(error)}",
        error.layer or side,
        f"the kernel tried to end the process ({raised}); isolated, it would have killed the run",
        timing={k: round(v, 6) for k, v in timing.items()},
        eager_error=eager_error,
        compiled_error=compiled_error,
    )
