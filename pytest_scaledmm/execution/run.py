"""Run one case: whether it applies here, its inputs, then verdict/pipeline.py (eager call,
compiled call, float64 reference -> Outcome), then opcheck for a custom-op kernel.

Whatever the kernel does is an outcome of its case, never a lost record (pipeline.py); it is
handed copies of the inputs, so one that changes them in place fails its case. The one
exception that escapes is a KeyboardInterrupt in the pytest process itself
(`--scaledmm-isolate=no`): it may be the user's Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.version import Version

from ..matrix.case_params import Case, input_seed
from ..matrix.compile_modes import OTHER_M_FACTORS, compile_mode, compile_settings
from ..matrix.kernels import accepts_keyword, custom_op, kernel_accepts_fast_accum, prepare_callable, unavailable_reason
from ..matrix.spec import KernelSpec
from ..matrix.support import SupportModel, support_model
from ..verdict import outcome as oc
from ..verdict.case_axes import CaseParams
from ..verdict.classify import classify
from ..verdict.outcome import Outcome, describe_exception
from ..verdict.signature_text import OTHER_M_CALL
from .device import device_info
from .sequence_plan import planned_sequence


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
    # This process runs the cases whose compiled side builds a CPU kernel (plugin/schedule.py's
    # host lane): its child checks the CPU's vector ISAs as soon as it has its settings.
    host_lane: bool = False
    # Each side's evidence as it is made (pipeline.SideSink): the isolated child sends it to the
    # parent, so a crash or hang after the eager side keeps that side's check.
    side_sink: Callable | None = None
    # --scaledmm-sequence: the indices of planned_calls each case makes (a shrunk sequence replayed)
    sequence: tuple[int, ...] | None = None
    # kernel -> the dtypes its cases were drawn with (sequence_plan.drawn_values): a sequence's
    # dtype steps stay among them; none given, a sequence changes only K and N.
    drawn: Mapping[str, Mapping[str, tuple]] = field(default_factory=dict)


def _torch_release():
    import torch  # noqa: PLC0415  lazy: imports torch

    return Version(torch.__version__.split("+")[0])


def not_applicable(case: Case, ctx: RunContext) -> str | None:
    """Why this machine cannot run the case at all, or None. Decided here, never at collection."""
    import torch  # noqa: PLC0415  lazy: imports torch

    from ..verdict.draw import torch_dtype  # noqa: PLC0415  lazy: imports torch

    arch = device_info(ctx.device).arch
    kernel = ctx.kernel_specs[case.params.kernel]
    if ctx.archs and arch not in ctx.archs:
        return f"arch {arch} is not in the matrix's archs {list(ctx.archs)}"
    if kernel.archs and arch not in kernel.archs:
        return f"kernel {kernel.name} declares archs {list(kernel.archs)}, this is {arch}"
    if kernel.min_torch and _torch_release() < Version(kernel.min_torch):
        return f"kernel {kernel.name} needs torch>={kernel.min_torch}, this is {torch.__version__}"
    for side in ("dtype_a", "dtype_b"):
        if torch_dtype(case.params.value_of(side)) is None:
            return f"torch {torch.__version__} has no {case.params.value_of(side)} dtype"
    missing = unavailable_reason(kernel)
    if missing:
        return missing
    row = compile_mode(case.params.mode)
    if row.gpu_only and ctx.device == "cpu":
        return f"mode {case.params.mode} needs a GPU ({row.gpu_only})"
    missing = row.unavailable() if row.unavailable else None
    if missing:
        return f"mode {case.params.mode}: {missing}"
    if row.isolated_only and not ctx.in_child:
        return f"mode {case.params.mode} runs only in the isolated child: {row.isolated_only}"
    if row.marks_m and case.params.m < 2:
        return f"mode {case.params.mode} needs M >= 2: Dynamo specialises sizes 0 and 1 whatever is marked"
    fn = ctx.kernels.get(case.params.kernel)
    if kernel.contract != "call":
        fn = prepare_callable(kernel) if kernel.contract == "prepare" else fn
    if case.params.use_fast_accum and fn is not None and not accepts_keyword(fn, "use_fast_accum"):
        return f"kernel {kernel.name} has no use_fast_accum parameter: it cannot be asked for fast accumulation"
    return None


def _deprecated_keys(config) -> frozenset:
    """The config keys torch marks deprecated: reading one warns (FutureWarning) and it does
    nothing, so it is neither compared nor restored."""
    entries = getattr(config, "_config", None)
    if not isinstance(entries, dict):
        return frozenset()
    return frozenset(key for key, entry in entries.items() if getattr(entry, "deprecated", False))


def _restore_dynamo_config(saved: dict) -> None:
    """Undo what a kernel changed in Dynamo's config (e.g. turning it off) so later cases are not
    affected; only changed keys are written, deprecated ones stay untouched."""
    import torch  # noqa: PLC0415  lazy: imports torch

    config = torch._dynamo.config
    deprecated = _deprecated_keys(config)
    for key, value in saved.items():
        if key in deprecated:
            continue
        try:
            if getattr(config, key) != value:
                setattr(config, key, value)
        except Exception:  # a key that cannot be compared or written is left alone
            continue


def _save_stance():
    import torch  # noqa: PLC0415  lazy: imports torch

    return getattr(torch._dynamo.eval_frame, "_stance", None)


def _restore_stance(saved) -> None:
    """A kernel may call torch.compiler.set_stance (torch>=2.6); put the caller's stance back."""
    import torch  # noqa: PLC0415  lazy: imports torch

    setter = getattr(torch._dynamo.eval_frame, "_set_stance", None)
    if saved is not None and setter is not None and torch._dynamo.eval_frame._stance != saved:
        setter(saved)


def run_case(case: Case, ctx: RunContext, keep: Sequence[int] | None = None) -> Outcome:
    """The case's outcome. `keep`: the indices of the eager side's calls after the first to make
    (planned_calls: the call at another M, then the sequence), the rest left out; None makes all
    of them, or those --scaledmm-sequence names (ctx.sequence)."""
    import torch  # noqa: PLC0415  lazy: imports torch

    from ..verdict.draw import make_inputs  # noqa: PLC0415  lazy: imports torch
    from ..verdict.oracle import case_checker  # noqa: PLC0415  lazy: imports torch
    from ..verdict.pipeline import eager_compile_check  # noqa: PLC0415  lazy: imports torch

    reason = not_applicable(case, ctx)
    if reason:
        return Outcome(oc.SKIPPED, detail=reason)

    params = case.params
    seed = input_seed(ctx.run_seed, case.id)
    spec = ctx.kernel_specs[case.params.kernel]
    kernel = ctx.kernels[case.params.kernel]
    slack = ctx.slack * (spec.slack or 1.0)
    row = compile_mode(params.mode)
    saved_config, saved_stance = torch._dynamo.config.get_config_copy(), _save_stance()
    try:
        inputs = make_inputs(params, seed, ctx.device)
        try:
            call = _case_call(spec, kernel, inputs, params)
        except Exception as exc:
            # The prepare step or module factory raised: neither side can run, alike.
            return _build_failed(exc, spec, params)
        marked_sizes = other_m_sizes(case.id, case.params.m, ctx.run_seed) if row.marks_m else []
        other_shapes = _other_shapes(case, ctx, spec, kernel, inputs, call, slack, marked_sizes)
        eager_size, steps, kept = _kept_calls(case, ctx, keep)
        same = bool(eager_size and marked_sizes) and eager_size[0]["m"] == marked_sizes[0]["m"]
        eager_other = (
            other_shapes[:1] if same else _other_shapes(case, ctx, spec, kernel, inputs, call, slack, eager_size)
        )
        sequence = _sequence(case, ctx, spec, kernel, inputs, call, slack, steps)
        # In the isolated child a KeyboardInterrupt can only come from the kernel: a CRASH.
        sides = eager_compile_check(
            call.fn,
            call.args,
            compile_settings(params.mode, ctx.max_autotune_configs),
            ctx.device,
            case_checker(params, inputs, slack),
            spec,
            params,
            interrupts=not ctx.in_child,
            runner=row.runner,
            other_shapes=other_shapes,
            second_call=_second_call(spec, kernel, inputs, params, seed, ctx.device, slack, call),
            names=call.names,
            eager_other_m=eager_other[0] if eager_other else None,
            on_side=ctx.side_sink,
            eager_sequence=sequence,
        )
    finally:
        _restore_dynamo_config(saved_config)
        _restore_stance(saved_stance)
    result = sides.outcome
    if steps:
        made = result.observations.sequence or {}
        result.observations.sequence = _sequence_record(made, steps, kept, len(eager_size))
    if eager_size:
        result.observations.other_m = eager_size[0]["m"]
    elif result.outcome != oc.CRASH and not _left_out(keep, ctx):
        said = f"{OTHER_M_CALL}: no other M near this one that the kernel's declarations admit"
        result.observations.not_checked = [*(result.observations.not_checked or []), said]
    unplanned = _unplanned(case, ctx, keep)
    if unplanned:
        result.observations.not_checked = [*(result.observations.not_checked or []), unplanned]
    if spec.slack:
        result.observations.kernel_slack = {"slack": spec.slack, "reason": spec.slack_reason}
    if result.outcome != oc.CRASH and result.eager_error is None:
        result = _with_opcheck(result, case, ctx, kernel, inputs)
    return result


def other_m_sizes(case_id: str, m: int, run_seed: int) -> list:
    """[{"label", "m", "seed"}]: the other M values a dynamic-M mode runs
    (compile_modes.OTHER_M_FACTORS times the case's M), each with an input seed of its own.
    Repro scripts carry the same list."""

    return [other_m_entry(case_id, m * f, run_seed) for f in OTHER_M_FACTORS]


def other_m_entry(case_id: str, m: int, run_seed: int) -> dict:
    """{"label", "m", "seed"}: the case at another M, with an input seed of its own."""
    return {"label": f"m={m}", "m": m, "seed": input_seed(run_seed, f"{case_id}@m={m}")}


# Above it the eager side's other M is smaller: a call and a float64 reference at 3 x M would
# cost more than the case.
EAGER_OTHER_M_LARGEST = 1024


def eager_other_m(
    case_id: str, params: CaseParams, run_seed: int, model: SupportModel, preferred: Sequence[dict] = ()
) -> list:
    """[{"label", "m", "seed"}] or []: the M of the eager side's call after the first (pipeline
    SidePlan.other_m), the first that the kernel's support `model` accepts of: `preferred` (a
    dynamic-M mode's first other M), OTHER_M_FACTORS times M, M divided by them, M + 1 and M - 1,
    twice and half M, and M plus or minus each multiple the kernel's rules test sizes against."""
    m = params.m
    candidates = [entry["m"] for entry in preferred]
    candidates += [m * f for f in OTHER_M_FACTORS if m * f <= EAGER_OTHER_M_LARGEST]
    candidates += [m // f for f in OTHER_M_FACTORS] + [m + 1, m - 1]
    candidates += [m * 2] if m * 2 <= EAGER_OTHER_M_LARGEST else []
    candidates += [m // 2, *(m + step for step in model.divisors), *(m - step for step in model.divisors)]
    for other in dict.fromkeys(candidates):
        if other >= 1 and other != m and not model.breaks(params.with_values(m=other)):
            return [other_m_entry(case_id, other, run_seed)]
    return []


def planned_other_m(case: Case, ctx: RunContext) -> list:
    """eager_other_m for a case run in `ctx`: what run_case calls at, and what the record of a
    case whose process died names (its repro script makes the call)."""
    marked = other_m_sizes(case.id, case.params.m, ctx.run_seed) if compile_mode(case.params.mode).marks_m else []
    model = _model(ctx.kernel_specs[case.params.kernel], ctx.device)
    return eager_other_m(case.id, case.params, ctx.run_seed, model, marked[:1])


def planned_calls(case: Case, ctx: RunContext) -> list[dict]:
    """The eager side's calls after the first, in order: the call at another M (its entry of
    eager_other_m, with "kind": "m") and then the sequence's steps (sequence_plan)."""
    other = [{**entry, "kind": "m"} for entry in planned_other_m(case, ctx)]
    model = _model(ctx.kernel_specs[case.params.kernel], ctx.device)
    return other + planned_sequence(case.id, case.params, ctx.run_seed, model, ctx.drawn.get(case.params.kernel, {}))


def planned_sequence_record(case: Case, ctx: RunContext) -> dict | None:
    """observations.sequence of a case whose process died before its record was made: the steps
    it planned (those --scaledmm-sequence names, where it names any), none of them known made."""
    _, steps, kept = _kept_calls(case, ctx, None)
    return {"steps": steps, "keep": kept, "calls": None, "failed": None} if steps else None


def _unplanned(case: Case, ctx: RunContext, keep: Sequence[int] | None) -> str | None:
    """What --scaledmm-sequence names that this case does not plan, in words, or None."""
    chosen = keep if keep is not None else ctx.sequence
    count = len(planned_calls(case, ctx)) if chosen else 0
    beyond = [index for index in chosen or () if index >= count]
    if not beyond:
        return None
    return f"calls after the first {beyond}: this case plans {count} (indices 0 to {count - 1}), not made"


def _left_out(keep: Sequence[int] | None, ctx: RunContext) -> bool:
    return keep is not None or ctx.sequence is not None


def _kept_calls(case: Case, ctx: RunContext, keep: Sequence[int] | None) -> tuple[list, list, list]:
    """(the other-M entry or [], the sequence's steps, the indices of both) of planned_calls, only
    those `keep` (else ctx.sequence) names when it names any."""
    chosen = keep if keep is not None else ctx.sequence
    calls = [
        (index, call) for index, call in enumerate(planned_calls(case, ctx)) if chosen is None or index in set(chosen)
    ]
    other = [{key: value for key, value in call.items() if key != "kind"} for _, call in calls if call["kind"] == "m"]
    return other, [call for _, call in calls if call["kind"] != "m"], [index for index, _ in calls]


def _sequence_record(made: dict, steps: list, kept: list, other_m: int) -> dict:
    """observations.sequence: the steps planned (made or not), the indices among planned_calls of
    the calls planned (what --scaledmm-sequence names), the calls made, the one that failed and
    its index."""
    failed = made.get("failed")
    failed_at = next((index for index, step in zip(kept[other_m:], steps) if step["label"] == failed), None)
    return {"steps": steps, "keep": kept, "calls": made.get("calls", []), "failed": failed, "failed_at": failed_at}


def _sequence(case: Case, ctx: RunContext, spec: KernelSpec, kernel, first, call, slack: float, steps: list) -> list:
    """The sequence's steps as calls (verdict/sequence.py), each with its own inputs and reference."""
    from ..verdict.sequence import sequence_shapes  # noqa: PLC0415  lazy: imports torch

    def make_call(inputs, built):
        return _case_call(spec, kernel, inputs, case.params, built)

    return sequence_shapes(steps, case.params, first, call, ctx.device, slack, spec.contract, make_call)


def _model(spec: KernelSpec, device: str) -> SupportModel:
    return support_model(spec, device_info(device).arch)


def _case_call(spec: KernelSpec, kernel, inputs, params: CaseParams, built=None):
    from ..verdict.contracts import case_call  # noqa: PLC0415  lazy: imports torch

    return case_call(
        kernel,
        inputs,
        contract=spec.contract,
        prepare=prepare_callable(spec),
        dynamic=params.dynamic_activation,
        forms=(params.scale_a, params.scale_b),
        use_fast_accum_keyword=kernel_accepts_fast_accum(spec),
        built=built,
    )


def _build_failed(exc: Exception, spec: KernelSpec, params) -> Outcome:
    """Judged as a refusal on both sides (classify): outside the kernel's declaration it is
    UNSUPPORTED, inside it the kernel's own failure."""

    error = describe_exception(exc, "eager")
    result = classify(error, describe_exception(exc, "eager"), 0, None, None, spec, params)
    what = "module factory" if spec.contract == "module" else "prepare step"
    result.detail = f"the kernel's {what} raised before any call; {result.detail}"
    result.eager_error = result.compiled_error = error
    return result


def _second_call(spec: KernelSpec, kernel, inputs, params, seed: int, device: str, slack: float, call):
    """The serving loop's next call (contracts.serving_inputs), with its own checker."""
    from ..verdict.contracts import serving_inputs  # noqa: PLC0415  lazy: imports torch
    from ..verdict.oracle import case_checker  # noqa: PLC0415  lazy: imports torch
    from ..verdict.pipeline import SECOND_CALL, OtherShape  # noqa: PLC0415  lazy: imports torch

    other = serving_inputs(spec.contract, params, inputs, seed, device)
    return OtherShape(
        SECOND_CALL, _case_call(spec, kernel, other, params, call.built).args, case_checker(params, other, slack)
    )


def _other_shapes(case: Case, ctx: RunContext, spec: KernelSpec, kernel, first, call, slack: float, sizes) -> list:
    """The case at other M values (`sizes`: other_m_sizes, eager_other_m), each with its own
    inputs and float64 reference; a kernel whose weights are built once keeps the first's."""
    from ..verdict.contracts import with_weights_of  # noqa: PLC0415  lazy: imports torch
    from ..verdict.draw import make_inputs  # noqa: PLC0415  lazy: imports torch
    from ..verdict.oracle import case_checker  # noqa: PLC0415  lazy: imports torch
    from ..verdict.pipeline import OtherShape  # noqa: PLC0415  lazy: imports torch

    shapes = []
    for other in sizes:
        params = case.params.with_values(m=other["m"])
        inputs = with_weights_of(first, make_inputs(params, other["seed"], ctx.device), spec.contract)
        args = _case_call(spec, kernel, inputs, params, call.built).args
        shapes.append(OtherShape(other["label"], args, case_checker(params, inputs, slack)))
    return shapes


def _with_opcheck(result: Outcome, case: Case, ctx: RunContext, kernel, inputs) -> Outcome:
    """For a custom-op kernel, torch.library.opcheck once per case family; its failure outranks
    the case's own outcome (a wrong fake impl is the cause of what compile then does)."""
    from .opcheck_cache import check_custom_op  # noqa: PLC0415  lazy: imports torch

    op = custom_op(kernel)
    if op is None:
        return result
    import torch  # noqa: PLC0415  lazy: imports torch

    from ..verdict.draw import make_inputs  # noqa: PLC0415  lazy: imports torch
    from ..verdict.opcheck import opcheck_params  # noqa: PLC0415  lazy: imports torch

    if case.params.special:
        inputs = make_inputs(opcheck_params(case.params), input_seed(ctx.run_seed, case.id), ctx.device)

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
    result.observations.opcheck = {**check.to_json(), "cached": cached}
    if not check.failed:
        return result
    result.observations.run_outcome = {"outcome": result.outcome, "signature": result.signature, "layer": result.layer}
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
        observations=result.observations,
    )
