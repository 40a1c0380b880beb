"""The AOTInductor control: is a failing aoti case about scaled matmul, or about AOTInductor here?

Some machines cannot load any AOTInductor package (the loader segfaults whatever the package
holds). An aoti-mode case that crashes or raises while its package loads or runs then says
nothing about the kernel. So once per session such a failure runs a control: a plain matmul
(bf16 on a GPU, float32 on the CPU) through the same export -> package -> load -> run
(verdict/runners.AotiRunner), in the isolated child when isolation is on. When the control fails
the same way (at the same stage or earlier), the case is SKIPPED: not proven, never a pass. When
it passes, the case's own classification stands.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace

from ..matrix.case_params import Case
from ..matrix.compile_modes import compile_mode
from ..verdict import outcome as oc
from ..verdict.outcome import Outcome, describe_exception, signature_of
from ..verdict.runners import runner_named

# The stages of a package's own life, in order; a failure at an earlier stage is no control.
STAGES = ("aoti_load", "runtime")
SHAPE = (16, 32, 16)  # M, K, N of the control's matmul


def control_dtype(device: str) -> str:
    """The control's dtype: bf16 as the cases' outputs on a GPU; float32 on the CPU, where the
    package is C++ built by the host compiler and bf16 matmul support varies."""
    return "float32" if device == "cpu" else "bfloat16"


def _plain_matmul(a, b):
    return a @ b


def run_control(device: str) -> dict:
    """export + aoti_compile_and_package + aoti_load_package + a call of a plain matmul on
    `device`, in this process: {"ok", "outcome", "stage", "error", "dtype", "seconds"}."""
    import torch  # noqa: PLC0415  lazy: imports torch

    from ..verdict.pipeline import sync  # noqa: PLC0415  lazy: imports torch

    dtype = control_dtype(device)
    m, k, n = SHAPE
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(device=device, dtype=getattr(torch, dtype))
    b = torch.randn(k, n, generator=generator).to(device=device, dtype=getattr(torch, dtype))
    call = runner_named("aoti").build(_plain_matmul, {"options": None})
    start = time.perf_counter()
    found = {"ok": True, "outcome": oc.PASS, "stage": None, "error": None, "dtype": dtype, "device": device}
    try:
        out = call.fn(a, b)
        sync(device)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (m, n):
            found.update(
                ok=False,
                outcome="ERROR",
                stage="runtime",
                error=f"returned {type(out).__name__} "
                f"{tuple(getattr(out, 'shape', ()))}, not a tensor of shape {(m, n)}",
            )
    except Exception as exc:
        found.update(
            ok=False, outcome="ERROR", stage=call.stage, error=signature_of(describe_exception(exc, call.stage))
        )
    finally:
        call.close()
        torch._dynamo.reset()
    found["seconds"] = round(time.perf_counter() - start, 3)
    return found


def control_answer(device: str, catching: type[BaseException] = Exception) -> dict:
    """run_control's answer, or a harness error in its shape where the control itself raised
    (`catching`: the isolated child answers whatever it meets)."""
    start = time.perf_counter()
    try:
        return run_control(device)
    except catching as exc:
        return {
            "ok": False,
            "outcome": oc.HARNESS_ERROR,
            "stage": None,
            "error": oc.harness_error(exc).signature,
            "seconds": round(time.perf_counter() - start, 3),
        }


def failed_stage(case: Case, result: Outcome) -> str | None:
    """The stage of STAGES at which an aoti-mode case failed (crashed or raised on the compiled
    side), or None: no control for it."""
    if not compile_mode(case.params.mode).how.builds_package or not result.failed:
        return None
    if result.outcome == oc.CRASH:
        stage = result.layer
    elif result.compiled_error is not None:
        stage = result.compiled_error.layer
    else:
        return None
    return stage if stage in STAGES else None


def _short(text, limit: int = 160) -> str:
    text = " ".join(str(text or "no message").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dtype_name(dtype: str | None) -> str:
    return {"bfloat16": "bf16"}.get(dtype or "", dtype or "?")


def skip_reason(control: dict) -> str:
    stage = control.get("stage")
    cannot = "load a package" if stage == "aoti_load" else "run a loaded package"
    how = {oc.CRASH: "crashed", oc.TIMEOUT: "hung"}.get(str(control.get("outcome")), "failed")
    return (
        f"AOTInductor cannot {cannot} on this machine: a plain {_dtype_name(control.get('dtype'))} matmul "
        f"control also {how} at {stage} ({_short(control.get('error'))})"
    )


def apply_control(result: Outcome, stage: str, control: dict) -> Outcome:
    """The case's outcome given the control: SKIPPED with the reason when the control failed at
    `stage` or earlier in the package's life, else `result` as it was. Either way the record
    keeps the control (observations.aoti_control)."""
    block = {k: control.get(k) for k in ("ok", "outcome", "stage", "error", "dtype", "device", "seconds", "ran_for")}
    same = (
        not control.get("ok")
        and control.get("stage") in STAGES
        and STAGES.index(control["stage"]) <= STAGES.index(stage)
    )
    if not same:
        block["verdict"] = "the control did not fail this way: the case's failure stands"
        result.observations.aoti_control = block
        return result
    block["verdict"] = "the control failed the same way: the case proves nothing about the kernel"
    # What the case itself did, kept for a reader; the record's verdict is the skip.
    block["case"] = {
        "outcome": result.outcome,
        "signature": result.signature,
        "layer": result.layer,
        "compiled_error": asdict(result.compiled_error) if result.compiled_error else None,
    }
    return Outcome(
        oc.SKIPPED,
        None,
        None,
        skip_reason(control),
        timing=result.timing,
        observations=replace(result.observations, aoti_control=block),
    )
