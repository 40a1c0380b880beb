"""The compile modes a case can run under, one row each, and the torch.compile settings of each.

A new mode is one row in MODES (plus its name in a profile of matrix.yaml): the schema's enum,
the first-failure ordering, triage, the run's GPU check and repro scripts all read this table,
and the run, triage, repro scripts and the benchmark all compile with compile_settings().
No torch import here but for the autotune knob's and the availability checks.

`runner` names how the compiled side is made (verdict/runners.RUNNERS): "compile"
(torch.compile), "aoti" (torch.export, then an AOTInductor package built, loaded and run),
"mark-dynamic" and "mark-unbacked" (torch.compile over the case's M and OTHER_M_FACTORS times it,
M marked dynamic or unbacked: one compiled frame is the contract). A mode added at run time
(register_mode, with a runner from runners.register_runner) is accepted by the `mode` axis.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..verdict.runners import RUNNERS, Runner, registering_modules, runner_named

# The other M values a dynamic-M mode runs (times the case's M): odd factors keep M's parity
# (a 3-D activation's batch split) and every divisor of M (block scales).
OTHER_M_FACTORS = (3, 5)


@dataclass(frozen=True)
class CompileMode:
    """One way of compiling a case: what torch.compile(fullgraph=True) is given, and the facts
    the rest of the plugin reads from it."""

    name: str  # the value of the `mode` axis in matrix.yaml and in case ids
    backend: str  # Dynamo backend: "eager" (tracing only), "aot_eager" or "inductor"
    mode: str | None = None  # torch.compile's mode=
    options: Mapping[str, Any] | None = None  # Inductor options (torch.compile's options=)
    dynamic: bool | None = None  # torch.compile's dynamic=
    # What needs a GPU, for a mode that cannot run on a CPU (its cases are SKIPPED there).
    gpu_only: str | None = None
    runner: str = "compile"  # a name in RUNNERS
    # Why the mode runs only in the isolated child (its failure can kill the process), or None.
    isolated_only: str | None = None
    # () -> why this torch or machine cannot run the mode, or None: checked per case at run time.
    unavailable: Callable[[], str | None] | None = None
    doc: str = ""
    # Typical seconds of one case (plugin/cost.py, the one cost model of sharding and
    # scheduling): medians per mode on a GPU (docs/measured.md); only the order matters, so the
    # CPU uses them too. None: the family's, INDUCTOR_SECONDS or TRACING_SECONDS.
    expected_s: float | None = None

    def __post_init__(self):
        if self.options is not None:
            object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    @property
    def uses_inductor(self) -> bool:
        return self.backend == "inductor"

    @property
    def expected_seconds(self) -> float:
        if self.expected_s is not None:
            return self.expected_s
        return INDUCTOR_SECONDS if self.uses_inductor else TRACING_SECONDS

    @property
    def how(self) -> Runner:
        """The runner that makes the mode's compiled side."""
        return runner_named(self.runner)

    @property
    def marks_m(self) -> str | None:
        """How the mode marks M: "dynamic", "unbacked", or None (it does not)."""
        return self.how.marks_m

    @property
    def autotunes(self) -> bool:
        """Benchmarks GEMM configs while compiling (the slow modes; --scaledmm-max-autotune-configs caps them)."""
        return self.mode in ("max-autotune", "max-autotune-no-cudagraphs") or bool(
            (self.options or {}).get("max_autotune")
        )

    @property
    def sets_gemm_backends(self) -> bool:
        """Passes its own Inductor GEMM backends, which a config patch of them would not override."""
        return "max_autotune_gemm_backends" in (self.options or {})


def _cutlass_missing() -> str | None:
    """Inductor's CUTLASS backend needs the CUTLASS sources (config.cuda.cutlass_dir) and its
    Python package; without them it has no choice to offer (NoValidChoicesError)."""

    import torch._inductor.config as inductor_config  # noqa: PLC0415  lazy: torch-free collection

    cuda = getattr(inductor_config, "cuda", None)
    where = getattr(cuda, "cutlass_dir", None)
    if not where or not os.path.isdir(where):
        return (
            "Inductor's CUTLASS backend has no CUTLASS sources "
            f"(torch._inductor.config.cuda.cutlass_dir {where!r} does not exist)"
        )
    if importlib.util.find_spec("cutlass") is None and importlib.util.find_spec("cutlass_library") is None:
        return "Inductor's CUTLASS backend needs the cutlass Python package, which is not importable"
    return None


def _no_mark_unbacked() -> str | None:
    import torch  # noqa: PLC0415  lazy: torch-free collection

    if getattr(torch._dynamo.decorators, "mark_unbacked", None) is None:
        return f"torch {torch.__version__} has no torch._dynamo.decorators.mark_unbacked"
    return None


def _no_aoti() -> str | None:
    import torch  # noqa: PLC0415  lazy: torch-free collection

    missing = [name for name in ("aoti_compile_and_package", "aoti_load_package") if not hasattr(torch._inductor, name)]
    if missing or not hasattr(torch, "export"):
        return f"torch {torch.__version__} has no AOTInductor packaging ({', '.join(missing) or 'torch.export'})"
    return None


# A mode's expected seconds when it gives none (CompileMode.expected_s): by its family.
INDUCTOR_SECONDS = 2.0
TRACING_SECONDS = 0.4

# Inductor options of the GEMM-backend modes: autotuning among one backend's choices only.
_GEMM = {"max_autotune": True, "triton.cudagraphs": False}

MODES: tuple[CompileMode, ...] = (
    CompileMode("eager", "eager", doc="Dynamo tracing only", expected_s=0.1),
    CompileMode("aot_eager", "aot_eager", doc="Dynamo and AOT autograd, no Inductor", expected_s=0.4),
    CompileMode("inductor", "inductor", doc="default Inductor", expected_s=1.5),
    CompileMode("max-autotune-no-cudagraphs", "inductor", mode="max-autotune-no-cudagraphs", expected_s=4.0),
    CompileMode("max-autotune", "inductor", mode="max-autotune", expected_s=5.0),
    CompileMode("reduce-overhead", "inductor", mode="reduce-overhead", expected_s=3.0),
    CompileMode("dynamic", "inductor", dynamic=True, doc="default Inductor with dynamic shapes", expected_s=2.5),
    CompileMode(
        "triton-gemm",
        "inductor",
        options={"max_autotune": True, "max_autotune_gemm_backends": "TRITON", "triton.cudagraphs": False},
        gpu_only="Triton GEMM templates",
        doc="Inductor forced onto its Triton GEMM templates whatever the card's heuristics would pick",
        expected_s=4.0,
    ),
    CompileMode(
        "aten-gemm",
        "inductor",
        options={**_GEMM, "max_autotune_gemm_backends": "ATEN"},
        doc="Inductor with ATen (cuBLAS) as its only GEMM backend",
        expected_s=2.0,
    ),
    CompileMode(
        "cutlass-gemm",
        "inductor",
        options={**_GEMM, "max_autotune_gemm_backends": "CUTLASS"},
        gpu_only="CUTLASS GEMM templates",
        unavailable=_cutlass_missing,
        doc="Inductor with CUTLASS as its only GEMM backend",
        expected_s=6.0,
    ),
    CompileMode(
        "persistent-tma",
        "inductor",
        options={**_GEMM, "max_autotune_gemm_backends": "TRITON", "triton.enable_persistent_tma_matmul": True},
        gpu_only="Triton persistent TMA templates",
        doc="Inductor's Triton GEMM templates with the persistent TMA ones enabled",
        expected_s=4.0,
    ),
    CompileMode(
        "aoti",
        "inductor",
        runner="aoti",
        isolated_only="a failing AOTInductor package load can kill the process (SIGSEGV)",
        unavailable=_no_aoti,
        doc="torch.export, AOTInductor package built, loaded and run",
        expected_s=6.0,
    ),
    CompileMode(
        "mark-dynamic",
        "inductor",
        runner="mark-dynamic",
        doc="default Inductor, M marked dynamic, run at three M: one compiled frame expected",
        expected_s=4.0,
    ),
    CompileMode(
        "mark-unbacked",
        "inductor",
        runner="mark-unbacked",
        unavailable=_no_mark_unbacked,
        doc="default Inductor, M marked unbacked, run at three M: one compiled frame expected",
        expected_s=4.0,
    ),
)
_MODE_BY_NAME = {m.name: m for m in MODES}
# The `mode` axis's values (schema.COMPILE_MODES is this list): register_mode adds to it.
MODE_NAMES = [m.name for m in MODES]
_MODE_REGISTERED_BY: dict[str, str] = {}  # a registered mode -> the module that registered it


def register_mode(row: CompileMode) -> None:
    """Adds a compile mode; its runner must be in RUNNERS and its name new. Register it in the
    module that registers its runner (runners.registering_modules): a child process imports that
    module to know the mode."""
    if row.name in _MODE_BY_NAME:
        raise ValueError(f"a compile mode named {row.name!r} exists")
    if row.runner not in RUNNERS:
        raise ValueError(f"compile mode {row.name!r}: no runner named {row.runner!r}")
    _MODE_BY_NAME[row.name] = row
    MODE_NAMES.append(row.name)
    _MODE_REGISTERED_BY[row.name] = sys._getframe(1).f_globals.get("__name__", "")


def unregister_mode(name: str) -> None:
    """Removes a mode register_mode added."""
    if name in {m.name for m in MODES}:
        raise ValueError(f"{name!r} is a built-in mode")
    _MODE_BY_NAME.pop(name, None)
    _MODE_REGISTERED_BY.pop(name, None)
    if name in MODE_NAMES:
        MODE_NAMES.remove(name)


def inductor_modes() -> set[str]:
    """The names of the modes that compile with Inductor, registered ones included."""
    return {m.name for m in _MODE_BY_NAME.values() if m.uses_inductor}


def compile_mode(name: str) -> CompileMode:
    """The row of a mode name; KeyError for a name the table does not have."""
    return _MODE_BY_NAME[name]


def autotune_limit(mode: str, max_configs: int) -> dict | None:
    """Inductor options capping the GEMM configs an autotuning mode benchmarks. The Triton
    template path is still generated, compiled and benchmarked; only the search is shorter.
    None when there is no cap or this torch has no such knob."""
    if not max_configs or not compile_mode(mode).autotunes:
        return None
    import torch._inductor.config as inductor_config  # noqa: PLC0415  lazy: torch-free collection

    if "test_configs.max_mm_configs" not in inductor_config.get_config_copy():
        return None
    return {"test_configs.max_mm_configs": max_configs}


def compile_settings(mode: str, max_autotune_configs: int = 0) -> dict:
    """{"backend", "mode", "options", "dynamic"}: what torch.compile(fullgraph=True) is given for
    this mode (verdict/pipeline.compile_counted), the autotune cap included; plain values, so that
    a repro script can carry them as a literal."""
    row = compile_mode(mode)
    options = dict(row.options) if row.options is not None else None
    limit = autotune_limit(mode, max_autotune_configs) if row.uses_inductor else None
    if limit:
        options = {**(options or {}), **limit}
    return {"backend": row.backend, "mode": row.mode, "options": options, "dynamic": row.dynamic}


def extension_modules() -> list[str]:
    """The modules that registered runners and modes, in order: a child process or a repro
    script imports them to know the same modes."""
    found = registering_modules() + list(_MODE_REGISTERED_BY.values())
    return [name for name in dict.fromkeys(found) if name and name != "__main__"]
