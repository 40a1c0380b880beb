"""Run one case: inputs, eager call, compiled call, float64 reference -> Outcome.

Whatever the kernel does is an outcome of its case, never a lost record: an exception (any
BaseException: SystemExit and KeyboardInterrupt end as CRASH, see _ended_process), a result that
is not a tensor, or one of the wrong shape, dtype or device. An exception while checking the
outputs is a failed check naming the problem. The one exception that escapes is a
KeyboardInterrupt in the pytest process itself (`--scaledmm-isolate=no`): it may be the user's
Ctrl-C. Refusals raised alike on both sides are judged by refusals.py.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from ..verdict import outcome as oc
from ..matrix.cases import Case, input_seed
from ..matrix.compile_modes import GPU_ONLY_MODES, compile_case
from ..matrix.kernels import call_keywords
from ..verdict.outcome import ErrorInfo, Outcome, describe_exception, signature_of
from ..matrix.spec import KernelSpec


@dataclass
class RunContext:
    device: str
    run_seed: int
    kernel_specs: Mapping[str, KernelSpec]
    kernels: Mapping[str, Callable]
    archs: tuple = ()
    slack: float = 1.0
    opchecks: dict = field(default_factory=dict)  # opcheck family -> OpcheckResult, per process
    max_autotune_configs: int = 0  # 0: Inductor's full autotune search; N: at most N GEMM configs
    in_child: bool = False  # in the isolated child: a KeyboardInterrupt there is the kernel's


def _torch_release():
    import torch
    from packaging.version import Version

    return Version(torch.__version__.split("+")[0])


def not_applicable(case: Case, ctx: RunContext) -> Optional[str]:
    """Why this machine cannot run the case at all, or None. Decided here, never at collection."""
    import torch
    from packaging.version import Version

    from .device import device_info
    from ..verdict.inputs import torch_dtype
    from ..matrix.kernels import accepts_keyword, unavailable_reason

    arch = device_info(ctx.device).arch
    kernel = ctx.kernel_specs[case["kernel"]]
    if ctx.archs and arch not in ctx.archs:
        return f"arch {arch} is not in the matrix's archs {list(ctx.archs)}"
    if kernel.archs and arch not in kernel.archs:
        return f"kernel {kernel.name} declares archs {list(kernel.archs)}, this is {arch}"
    if kernel.min_torch and _torch_release() < Version(kernel.min_torch):
        return f"kernel {kernel.name} needs torch>={kernel.min_torch}, this is {torch.__version__}"
    for side in ("dtype_a", "dtype_b"):
        if torch_dtype(case[side]) is None:
            return f"torch {torch.__version__} has no {case[side]} dtype"
    missing = unavailable_reason(kernel)
    if missing:
        return missing
    if case["mode"] in GPU_ONLY_MODES and ctx.device == "cpu":
        return f"mode {case['mode']} needs a GPU (Triton GEMM templates)"
    fn = ctx.kernels.get(case["kernel"])
    if case.params.get("use_fast_accum") and fn is not None and not accepts_keyword(fn, "use_fast_accum"):
        return f"kernel {kernel.name} has no use_fast_accum parameter: it cannot be asked for fast accumulation"
    return None


def _plain_names(qualified: str) -> set:
    # Dynamo re-raises a traced user exception as Observed<Name> (older releases) or
    # Observed<Name>Error (ObservedValueErrorError for a ValueError, newer releases).
    name = qualified.rsplit(".", 1)[-1]
    if not name.startswith("Observed"):
        return {name}
    name = name[len("Observed"):]
    return {name, name[: -len("Error")]} if name.endswith("Error") else {name}


def _same_refusal(eager: ErrorInfo, compiled: ErrorInfo) -> bool:
    if _plain_names(eager.root_type) & (_plain_names(compiled.root_type) | _plain_names(compiled.type)):
        return True
    # Older Dynamo wraps fake-tensor errors without __cause__; fall back to the message.
    first_line = oc.normalise_message(eager.message, max_lines=1)
    return bool(first_line) and first_line in oc.normalise_message(compiled.message, max_lines=12)


def _off_by(check: dict) -> str:
    return check.get("problem") or "max |err|/tol = %.3g (max abs %.3g)" % (check["ratio"], check["max_abs"])


def classify(
    eager_error: Optional[ErrorInfo],
    compiled_error: Optional[ErrorInfo],
    compiled_graph_calls: int,
    eager_check: Optional[dict],
    compiled_check: Optional[dict],
    kernel: Optional[KernelSpec] = None,
    params: Optional[Mapping] = None,
) -> Outcome:
    """The case's outcome from what each side raised or returned. `kernel` and `params` say
    whether a refusal alike on both sides is earned (refusals.judge); without them (a plain
    matmul rung of triage) it stays UNSUPPORTED unless it is an internal error."""
    if eager_error and compiled_error:
        if _same_refusal(eager_error, compiled_error):
            from ..verdict.refusals import judge

            return judge(kernel, params, eager_error, compiled_error)
        sig = f"eager {signature_of(eager_error)} <> compiled {signature_of(compiled_error)}"
        return Outcome(oc.ERROR_PARITY, sig, compiled_error.layer, "eager and compiled raise different errors")
    if eager_error:
        return Outcome(
            oc.ERROR_PARITY,
            f"compiled accepts what eager refuses: {signature_of(eager_error)}",
            "eager",
            "eager raises, compiled returns a result",
        )
    if compiled_error:
        if eager_check is not None and not eager_check["ok"]:
            # Eager is wrong on its own: that is the first bug, whatever compile then does.
            return Outcome(
                oc.MISMATCH,
                f"MISMATCH: eager {eager_check.get('problem', 'values off the reference')}",
                "eager",
                f"eager: {_off_by(eager_check)}; compiled raised {signature_of(compiled_error)}",
            )
        return Outcome(
            oc.COMPILE_ONLY_ERROR, signature_of(compiled_error), compiled_error.layer, "eager passes, compiled raises"
        )
    if compiled_graph_calls == 0:
        return Outcome(
            oc.FALLBACK,
            "FALLBACK: the compiled function ran no compiled graph",
            "dynamo",
            "torch.compile returned eager results without running a compiled graph",
        )
    off = [(side, check) for side, check in (("eager", eager_check), ("compiled", compiled_check)) if not check["ok"]]
    if off:
        sides = "+".join(side for side, _ in off)
        problems = sorted({check.get("problem", "values off the reference") for _, check in off})
        detail = "; ".join(f"{side}: {_off_by(check)}" for side, check in off)
        return Outcome(oc.MISMATCH, f"MISMATCH: {sides} {', '.join(problems)}", sides, detail)
    return Outcome(oc.PASS)


def _sync(device: str):
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _clone(out):
    import torch

    return out.clone() if isinstance(out, torch.Tensor) else out


def _ended_process(exc: BaseException) -> bool:
    """SystemExit, KeyboardInterrupt, GeneratorExit and the like: the kernel tried to end the
    process running it. Isolated or not, that is a CRASH of the case, not a refusal."""
    return not isinstance(exc, Exception)


def _users_interrupt(exc: BaseException, ctx: RunContext) -> bool:
    # In the pytest process a KeyboardInterrupt may be the user's Ctrl-C: let it stop the run.
    # The isolated child has its own process group, so there it can only come from the kernel.
    return isinstance(exc, KeyboardInterrupt) and not ctx.in_child


def _crash(exits: dict, eager_error, compiled_error, timing) -> Outcome:
    side = "eager" if "eager" in exits else "compiled"
    error = eager_error if side == "eager" else compiled_error
    raised = ", ".join(f"{s}: {type(exc).__name__}({', '.join(map(repr, exc.args))})" for s, exc in exits.items())
    return Outcome(
        oc.CRASH,
        f"CRASH: {signature_of(error)}",
        error.layer or side,
        f"the kernel tried to end the process ({raised}); isolated, it would have killed the run",
        timing={k: round(v, 6) for k, v in timing.items()},
        eager_error=eager_error,
        compiled_error=compiled_error,
    )


def _device_problem(out, device: str) -> Optional[dict]:
    """A failed check when `out` is a tensor on another device than the case's (a meta tensor,
    a GPU tensor from a CPU run); the oracle cannot read such an output."""
    import torch

    if not isinstance(out, torch.Tensor):
        return None  # the oracle names what was returned instead
    want, got = torch.device(device), out.device
    if got.type == want.type and (want.index is None or got.index is None or got.index == want.index):
        return None
    return {"ok": False, "problem": f"device {got}, expected {device}", "ratio": math.inf}


def _unchecked(exc: Exception) -> dict:
    first = (str(exc).splitlines() or [""])[0][:200]
    return {
        "ok": False,
        "problem": f"the output could not be checked ({type(exc).__name__})",
        "ratio": math.inf,
        "error": f"{type(exc).__name__}: {first}",
    }


def check_outputs(params, inputs, eager_ran: bool, eager_out, compiled_outs, device: str, slack: float):
    """oracle.check_sides, guarded: an output on the wrong device, or an exception while
    checking, is a failed check of that side that says so."""
    from ..verdict import oracle

    eager_bad = _device_problem(eager_out, device) if eager_ran else None
    compiled_bad = None
    if compiled_outs is not None:
        compiled_bad = next(filter(None, (_device_problem(out, device) for out in compiled_outs)), None)
    eager_ran = eager_ran and eager_bad is None
    compiled_outs = None if compiled_bad else compiled_outs
    try:
        eager_check, compiled_check = oracle.check_sides(params, inputs, eager_ran, eager_out, compiled_outs, slack)
    except Exception:
        # One side's output may be what the oracle cannot read: check each side alone.
        eager_check = compiled_check = None
        if eager_ran:
            try:
                eager_check = oracle.check_sides(params, inputs, True, eager_out, None, slack)[0]
            except Exception as exc:
                eager_check = _unchecked(exc)
        if compiled_outs is not None:
            try:
                compiled_check = oracle.check_sides(params, inputs, False, None, compiled_outs, slack)[1]
            except Exception as exc:
                compiled_check = _unchecked(exc)
    return eager_bad or eager_check, compiled_bad or compiled_check


def _restore_dynamo_config(saved: dict) -> None:
    """Undo what a kernel changed in Dynamo's config (e.g. turning it off) so later cases are not
    affected; only changed keys are written, deprecated ones stay untouched."""
    import torch

    config = torch._dynamo.config
    for key, value in saved.items():
        try:
            if getattr(config, key) != value:
                setattr(config, key, value)
        except Exception:  # a key that cannot be compared or written is left alone
            continue


def _save_stance():
    import torch

    return getattr(torch._dynamo.eval_frame, "_stance", None)


def _restore_stance(saved) -> None:
    """A kernel may call torch.compiler.set_stance (torch>=2.6); put the caller's stance back."""
    import torch

    setter = getattr(torch._dynamo.eval_frame, "_set_stance", None)
    if saved is not None and setter is not None and torch._dynamo.eval_frame._stance != saved:
        setter(saved)


def run_case(case: Case, ctx: RunContext) -> Outcome:
    import torch

    from ..verdict.inputs import make_inputs

    reason = not_applicable(case, ctx)
    if reason:
        return Outcome(oc.SKIPPED, detail=reason)

    params = case.params
    inputs = make_inputs(params, input_seed(ctx.run_seed, case.id), ctx.device)
    kernel = ctx.kernels[case["kernel"]]
    out_dtype, fast = inputs.out_dtype, inputs.use_fast_accum
    # Only the keywords the kernel's signature takes (kernels.py: the kernel contract).
    keywords = call_keywords(kernel, None, out_dtype, fast)
    keywords.pop("bias")

    def scaled_mm_case(a, b, scale_a, scale_b, bias):
        return kernel(a, b, scale_a, scale_b, bias=bias, **keywords)

    saved_config, saved_stance = torch._dynamo.config.get_config_copy(), _save_stance()
    timing = {}
    eager_error = compiled_error = None
    eager_out = compiled_outs = None
    exits: dict = {}  # side -> the BaseException with which the kernel tried to end the process
    try:
        start = time.perf_counter()
        try:
            eager_out = _clone(scaled_mm_case(*inputs.args()))
            _sync(ctx.device)
        except BaseException as exc:
            if _users_interrupt(exc, ctx):
                raise
            eager_error = describe_exception(exc, "eager")
            if _ended_process(exc):
                exits["eager"] = exc
        timing["eager_s"] = time.perf_counter() - start

        # A fresh Dynamo state per case: no recompile limit, no guards from earlier cases.
        torch._dynamo.reset()
        compiled = compile_case(scaled_mm_case, params["mode"], ctx.max_autotune_configs)
        try:
            start = time.perf_counter()
            first = _clone(compiled.fn(*inputs.args()))
            _sync(ctx.device)
            timing["compile_s"] = time.perf_counter() - start
            start = time.perf_counter()
            second = _clone(compiled.fn(*inputs.args()))
            _sync(ctx.device)
            timing["run_s"] = time.perf_counter() - start
            compiled_outs = (first, second)
        except BaseException as exc:
            if _users_interrupt(exc, ctx):
                raise
            compiled_error = describe_exception(exc, compiled.backend.stage)
            if _ended_process(exc):
                exits["compiled"] = exc
    finally:
        _restore_dynamo_config(saved_config)
        _restore_stance(saved_stance)

    if exits:
        return _crash(exits, eager_error, compiled_error, timing)
    eager_check, compiled_check = check_outputs(
        params, inputs, eager_error is None, eager_out, compiled_outs, ctx.device, ctx.slack
    )
    result = classify(
        eager_error, compiled_error, compiled.backend.calls, eager_check, compiled_check,
        ctx.kernel_specs.get(case["kernel"]), params,
    )
    result.timing = {k: round(v, 6) for k, v in timing.items()}
    result.eager_error, result.compiled_error = eager_error, compiled_error
    result.errors = {"eager": eager_check, "compiled": compiled_check}
    result.extra["compiled_graphs"] = compiled.backend.graphs
    result.extra["compiled_graph_calls"] = compiled.backend.calls
    if eager_error is None:
        result = _with_opcheck(result, case, ctx, kernel, inputs)
    return result


def _with_opcheck(result: Outcome, case: Case, ctx: RunContext, kernel, inputs) -> Outcome:
    """For a custom-op kernel, torch.library.opcheck once per case family; its failure outranks
    the case's own outcome (a wrong fake impl is the cause of what compile then does)."""
    from ..matrix.kernels import custom_op
    from .opcheck import check_custom_op

    op = custom_op(kernel)
    if op is None:
        return result
    import torch

    from ..verdict.inputs import make_inputs

    if case.params.get("special_scale", "none") != "none":
        # opcheck compares outputs exactly: NaN from a special scale would fail it on its own.
        finite = {**case.params, "special_scale": "none"}
        inputs = make_inputs(finite, input_seed(ctx.run_seed, case.id), ctx.device)

    saved_config, saved_stance = torch._dynamo.config.get_config_copy(), _save_stance()
    start = time.perf_counter()
    try:
        check, cached = check_custom_op(ctx.opchecks, case.params, op, inputs)
    finally:
        torch._dynamo.reset()
        _restore_dynamo_config(saved_config)
        _restore_stance(saved_stance)
    if not cached:
        result.timing["opcheck_s"] = round(time.perf_counter() - start, 6)
    result.extra["opcheck"] = {**check.to_json(), "cached": cached}
    if not check.failed:
        return result
    result.extra["run_outcome"] = {"outcome": result.outcome, "signature": result.signature, "layer": result.layer}
    detail = f"torch.library.opcheck failed for this case family; the case itself: {result.outcome}"
    return Outcome(
        oc.OPCHECK_FAILED,
        check.signature,
        "opcheck",
        detail,
        errors=result.errors,
        timing=result.timing,
        eager_error=result.eager_error,
        compiled_error=result.compiled_error,
        extra=result.extra,
    )
