"""The triage ladder: rerun one failing case per signature with one thing changed at a time, and
say which compiler layer breaks and which knobs make it pass (the workaround usable today).

Rungs, cheapest first:
- backend eager -> aot_eager -> inductor: Dynamo tracing, AOT autograd, Inductor lowering
  (climbed until a layer fails);
- the same shapes as a plain bf16 matmul, no quantization: is it the quantized path?
- a fresh Inductor cache: does the failure depend on what earlier compiles left on disk?
- Inductor's GEMM backends ATEN only / TRITON only: template heuristics differ per card;
- both scales given one rank (0-D -> [1] via .view(1), or [1,1] next to a 2-D scale);
- the same case without its bias: does the bias path fail?

When the eager call itself is wrong, compiler rungs are not run (no compiler setting can fix the
kernel); the rungs that change the input are.

Every rung goes through the same runner as the case (an isolated child by default), so a rung
that crashes or hangs is an outcome too. Only failing cases are triaged, once per signature in the
run (xdist workers claim signatures in a directory they share), within a time budget per process.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from ..matrix.case_params import Case, input_seed
from ..matrix.compile_modes import compile_mode, compile_settings
from ..matrix.schema import SCALE_RANK
from ..matrix.spec import is_user_kernel
from ..verdict import outcome as oc
from ..verdict.case_axes import CaseParams
from ..verdict.scale_forms import per_tensor_of_rank, scale_form
from ..verdict.signature_text import SEQUENCE_CALL

BACKEND_LADDER = [("eager", "dynamo"), ("aot_eager", "aot_autograd"), ("inductor", "inductor")]
VIEW_BY_RANK = {0: ".reshape(())", 1: ".view(1)", 2: ".view(1, 1)"}


def _one_rank(params: CaseParams) -> tuple[dict, str] | None:
    """Scale forms with equal ranks, or None when the ranks already agree."""
    forms = {side: params.value_of(side) for side in ("scale_a", "scale_b")}
    ranks = {side: SCALE_RANK[form] for side, form in forms.items()}
    if len(set(ranks.values())) == 1:
        return None
    target = max(ranks.values())
    changed = {}
    replacement = per_tensor_of_rank(target)
    for side, form in forms.items():
        if ranks[side] != target:
            if not scale_form(form).per_tensor or replacement is None:
                return None
            changed[side] = replacement
    knob = ", ".join(f"{side}{VIEW_BY_RANK[target]}" for side in changed)
    return changed, f"give both scales rank {target}: {knob}"


def rungs_for(case: Case, device: str) -> list[dict]:
    """The ladder for one case; each rung is plain data so it can cross to the child."""
    params = case.params
    mode = params.mode
    rungs: list[dict[str, Any]] = [
        {
            "name": f"backend={name}",
            "kind": "case",
            "params": {"mode": name},
            "purpose": "layer",
            "knob": f"compile with backend={name!r}",
        }
        for name, _ in BACKEND_LADDER
        if name != mode
    ]
    rungs.append(
        {
            "name": "bf16 unquantized",
            "kind": "bf16",
            "purpose": "quantized",
            "knob": "same shapes as a plain bf16 matmul",
        }
    )
    if compile_mode(mode).uses_inductor:
        rungs.append(
            {
                "name": "fresh inductor cache",
                "kind": "case",
                "fresh_cache": True,
                "purpose": "knob",
                "knob": "an empty Inductor cache"
                " (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 or a new TORCHINDUCTOR_CACHE_DIR)",
            }
        )
        # A mode passing its own GEMM backends as options would override the patch.
        gemm_mode = "inductor" if compile_mode(mode).sets_gemm_backends else mode
        backends = ["ATEN"] if device == "cpu" else ["ATEN", "TRITON"]
        for backend in backends:
            rungs.append(
                {
                    "name": f"gemm={backend}",
                    "kind": "case",
                    "params": {"mode": gemm_mode},
                    "purpose": "knob",
                    "inductor": {"max_autotune": True, "max_autotune_gemm_backends": backend},
                    "knob": f"torch._inductor.config.max_autotune_gemm_backends = {backend!r} (with max_autotune)",
                }
            )
    normalised = _one_rank(params)
    if normalised:
        changed, knob = normalised
        rungs.append({"name": "scales one rank", "kind": "case", "params": changed, "purpose": "input", "knob": knob})
    if params.bias:
        rungs.append(
            {
                "name": "bias=False",
                "kind": "case",
                "params": {"bias": False},
                "purpose": "cause",
                "knob": "the same case without bias",
            }
        )
    return rungs


# -- executing a rung (in the child, or in-process) --------------------------------------------


@contextlib.contextmanager
def _fresh_cache():
    import torch._inductor.utils as utils  # noqa: PLC0415  lazy: imports torch

    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache
    with fresh():
        yield


def execute_rung(case: Case, rung: dict, ctx) -> dict:
    import torch  # noqa: PLC0415  lazy: imports torch

    from .run import planned_calls, run_case  # noqa: PLC0415  lazy: imports torch

    start = time.perf_counter()
    if rung["kind"] == "bf16":
        result = _bf16_matmul(case, ctx)
    else:
        variant = Case(case.id, case.params.with_values(**rung.get("params", {})))  # same id: same inputs
        with contextlib.ExitStack() as stack:
            if rung.get("inductor"):
                import torch._inductor.config  # noqa: F401, PLC0415

                stack.enter_context(torch._inductor.config.patch(rung["inductor"]))
            if rung.get("fresh_cache"):
                stack.enter_context(_fresh_cache())
            # One change at a time to the first call: the sequence's later calls (each a change
            # of its own) only where the failure is one of theirs.
            keep = None
            if not rung.get("sequence"):
                keep = [index for index, call in enumerate(planned_calls(variant, ctx)) if call["kind"] == "m"]
            result = run_case(variant, ctx, keep)
    return {
        "outcome": result.outcome,
        "signature": result.signature,
        "layer": result.layer,
        "seconds": round(time.perf_counter() - start, 3),
    }


def _bf16_matmul(case: Case, ctx):
    """The case's shapes, bias and compile mode as a plain bf16 matmul (no scales, no fp8),
    through the case's own pipeline."""

    import torch  # noqa: PLC0415  lazy: imports torch

    from ..verdict.oracle import reference_checker  # noqa: PLC0415  lazy: imports torch
    from ..verdict.pipeline import eager_compile_check  # noqa: PLC0415  lazy: imports torch
    from ..verdict.reference import Reference  # noqa: PLC0415  lazy: imports torch

    m, k, n = case.params.m, case.params.k, case.params.n
    generator = torch.Generator().manual_seed(input_seed(ctx.run_seed, case.id))
    a = torch.randn(m, k, generator=generator).to(torch.bfloat16)
    b = torch.randn(n, k, generator=generator).to(torch.bfloat16).t()
    bias = torch.randn(n, generator=generator).to(torch.bfloat16) if case.params.bias else None

    def move(t):
        if t is None or ctx.device == "cpu":
            return t
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=ctx.device).copy_(t)

    args = (move(a), move(b), move(bias))

    def matmul(a, b, bias):
        out = a @ b
        return out if bias is None else out + bias

    value = a.double() @ b.double() + (bias.double() if bias is not None else 0)
    magnitude = a.double().abs() @ b.double().abs() + (bias.double().abs() if bias is not None else 0)
    # bf16 GEMMs may reduce in bf16 (cuBLAS's reduced-precision reductions): a loose bound; this
    # rung asks whether the plain path breaks, not whether it is accurate to the last bit.
    tolerance = (2 + math.sqrt(k)) * 2.0**-8 * magnitude + torch.finfo(torch.bfloat16).tiny
    check = reference_checker(Reference(value, tolerance), (m, n), torch.bfloat16)
    sides = eager_compile_check(
        matmul, args, compile_settings(case.params.mode), ctx.device, check, interrupts=not ctx.in_child
    )
    return sides.outcome


# -- the ladder, on the parent side ------------------------------------------------------------


# A directory the xdist controller makes for the run: the processes claim signatures there.
SHARED_DIR_ENV = "PYTEST_SCALEDMM_TRIAGE_DIR"


def claim_signature(directory: str | None, key: str, case_id: str) -> str | None:
    """None when this case is the first of the run with this signature; else the id of the case
    that was. Claimed by creating a file named after the signature, holding the case id."""
    if not directory:
        return None
    path = os.path.join(directory, hashlib.sha256(key.encode()).hexdigest()[:32])
    try:
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".claim-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(case_id)
        try:
            os.link(temp, path)  # atomic: the file appears with its content
            return None
        except FileExistsError:
            with open(path, encoding="utf-8") as claimed:
                return claimed.read() or "a case of another worker"
        finally:
            os.unlink(temp)
    except OSError:  # an unusable directory: this process triages on its own
        return None


class Triage:
    """Triage each failing signature once per run (once per process where the processes share
    no directory), within a time budget per process."""

    def __init__(self, runner, device: str, budget_s: float, shared_dir: str | None = None):
        self.runner = runner
        self.device = device
        self.budget_s = budget_s
        self.shared_dir = shared_dir
        self.spent_s = 0.0
        self.seen: dict[str, str] = {}

    def __call__(self, case: Case, result) -> dict | None:
        if not result.failed:
            return None
        key = f"{result.outcome}: {result.signature}"
        if key in self.seen:
            return {"see": self.seen[key]}
        first = claim_signature(self.shared_dir, key, case.id)
        self.seen[key] = first or case.id
        if first is not None:
            return {"see": first}
        if result.outcome == oc.TIMEOUT:
            return {
                "skipped": "a hang is not triaged (each rung could hang as long); replay it with "
                "--scaledmm-case and --scaledmm-isolate=no under a debugger"
            }
        if self.spent_s >= self.budget_s:
            return {"skipped": f"triage budget of {self.budget_s:g} s spent (--scaledmm-triage-budget)"}
        start = time.monotonic()
        steps = []
        # The backend ladder stops at the first layer that fails, and is not climbed at all when
        # the eager call itself is wrong: higher layers would only repeat the failure.
        eager_wrong = str(result.layer or "").startswith("eager")
        climb = not eager_wrong
        sequence_failure = SEQUENCE_CALL in str(result.signature or "")
        for rung in rungs_for(case, self.device):
            if (rung["purpose"] == "layer" and not climb) or (rung["purpose"] == "knob" and eager_wrong):
                continue
            answer = self.runner.rung(case, {**rung, "sequence": sequence_failure})
            steps.append({"name": rung["name"], "purpose": rung["purpose"], "knob": rung["knob"], **answer})
            if rung["purpose"] == "layer" and _fails(answer["outcome"]):
                climb = False
        seconds = time.monotonic() - start
        self.spent_s += seconds
        return conclude(case, result, steps, round(seconds, 3))


def _fails(outcome: str) -> bool:
    return outcome in oc.FAILURES


def conclude(case: Case, result, steps: list[dict], seconds: float) -> dict:
    """Failing layer, whether the quantized path is at fault, and the knobs that make it pass."""
    by_name = {step["name"]: step for step in steps}
    mode = case.params.mode
    if result.layer and str(result.layer).startswith("eager"):
        layer = "eager (the kernel itself, before any compiler)"
    else:
        layer = None
        ladder = [(name, where) for name, where in BACKEND_LADDER]
        if mode not in {name for name, _ in BACKEND_LADDER}:
            ladder.append((mode, f"inductor (mode {mode})"))
        for name, where in ladder:
            outcome = result.outcome if name == mode else by_name.get(f"backend={name}", {}).get("outcome")
            if outcome is not None and _fails(outcome):
                layer = where
                break
        layer = layer or "not reproduced by the backend ladder"
    bf16 = by_name.get("bf16 unquantized", {}).get("outcome")
    quantized = None if bf16 in (None, oc.SKIPPED, oc.UNSUPPORTED) else not _fails(bf16)
    workarounds = [
        {"rung": step["name"], "knob": step["knob"]}
        for step in steps
        if step["purpose"] not in ("quantized", "cause") and step["outcome"] == oc.PASS
    ]

    found = {
        "case": case.id,
        "layer": layer,
        "quantized_path": quantized,
        "workarounds": workarounds,
        # Input changes that make it pass: the part of the case at fault (the bias).
        "at_fault": [step["name"] for step in steps if step["purpose"] == "cause" and step["outcome"] == oc.PASS],
        "rungs": [{k: v for k, v in step.items() if k not in ("purpose", "knob")} for step in steps],
        "seconds": seconds,
    }
    if is_user_kernel(case.params.kernel):
        # The kernel is the user's code: a failing line in it is where to look, not torch.
        found["user_kernel"] = case.params.kernel
        source = _source(result)
        if source:
            found["source"] = source
    return found


def _source(result) -> str | None:
    """The user-code frame of the wrong side's error (outcome.ErrorInfo.source), else the other's."""
    errors = [result.eager_error, result.compiled_error]
    if result.layer != "eager":
        errors.reverse()
    for error in errors:
        source = error.get("source") if isinstance(error, dict) else getattr(error, "source", None)
        if isinstance(source, str) and source:
            return source
    return None


# What each rung changed, as the triage line says it.
RUNG_WORDS = {
    "bf16 unquantized": "torch's plain bf16 matmul of the same shapes",
    "bias=False": "without bias",
    "scales one rank": "both scales one rank",
    "fresh inductor cache": "a fresh Inductor cache",
}


def one_line(triage: dict) -> str:
    """Where it breaks, what was tried (one change at a time) with each result, and what made it
    pass."""
    if "skipped" in triage:
        return f"not triaged: {triage['skipped']}"
    parts = [f"breaks in {triage['layer']}"]
    rungs = [r for r in triage.get("rungs", []) if isinstance(r, dict)]
    if rungs:
        tried = ", ".join(f"{RUNG_WORDS.get(str(r.get('name')), r.get('name'))} {r.get('outcome')}" for r in rungs)
        parts.append(f"tried one change at a time: {tried}")
    source = triage.get("source") if isinstance(triage.get("source"), str) and triage.get("user_kernel") else None
    eager_layer = str(triage.get("layer", "")).startswith("eager")
    if source and (eager_layer or triage.get("quantized_path") is True):
        # A user kernel's own line raised (or Dynamo failed tracing it) while torch's matmul works.
        plain = "" if eager_layer else "torch's plain bf16 matmul passes: "
        parts.append(f"{plain}the fault is in the kernel's code, {source}")
    # Compared with torch's own matmul only where a compiler layer breaks: a kernel wrong in
    # eager is wrong whatever torch's matmul does.
    elif not eager_layer:
        if triage.get("quantized_path") is True:
            parts.append("torch's plain bf16 matmul passes: the fault is in the quantized path")
        elif triage.get("quantized_path") is False:
            parts.append("torch's plain bf16 matmul fails too: not specific to quantization")
    at_fault = triage.get("at_fault") or []
    if "bias=False" in at_fault:
        parts.append("passes without bias: the bias is at fault")
    passes = ", ".join(RUNG_WORDS.get(w["rung"], w["rung"]) for w in triage.get("workarounds", []))
    if passes:
        parts.append(f"passes with: {passes}")
    elif not at_fault:
        parts.append("no single change makes it pass")
    return "; ".join(parts)


def headline(record: Mapping[str, Any]) -> str:
    """`OUTCOME: signature`, the outcome once where the signature starts with it already."""
    outcome, signature = record["outcome"], record.get("signature") or ""
    return signature if signature.startswith(f"{outcome}:") else f"{outcome}: {signature}".rstrip(": ")


def summary_lines(records) -> list[str]:
    """One line per triaged signature for the terminal summary."""
    done: dict[str, dict] = {}
    for record in sorted(records, key=lambda r: r["id"]):
        triage = record.get("triage")
        if not triage or "see" in triage:
            continue
        done.setdefault(headline(record), {"record": record, "triage": triage})
    if not done:
        return []
    lines = [f"triage ({len(done)} signature(s), one case each):"]
    for key, item in done.items():
        lines.append(f"  {key[:150]}")
        lines.append(f"    {one_line(item['triage'])}  [{item['record']['id']}]")
        for workaround in item["triage"].get("workarounds", [])[:4]:
            lines.append(f"      workaround: {workaround['knob']}")
    return lines
