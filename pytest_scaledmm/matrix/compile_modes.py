"""Compile modes and a backend wrapper that proves compiled code ran."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

# mode name -> (backend, torch.compile mode, inductor options, dynamic)
MODE_SETTINGS: dict[str, tuple[str, Optional[str], Optional[dict], Optional[bool]]] = {
    "eager": ("eager", None, None, None),
    "aot_eager": ("aot_eager", None, None, None),
    "inductor": ("inductor", None, None, None),
    "max-autotune-no-cudagraphs": ("inductor", "max-autotune-no-cudagraphs", None, None),
    "max-autotune": ("inductor", "max-autotune", None, None),
    "reduce-overhead": ("inductor", "reduce-overhead", None, None),
    "dynamic": ("inductor", None, None, True),
    # Forces the Triton GEMM templates whatever the card's heuristics would pick.
    "triton-gemm": (
        "inductor",
        None,
        {"max_autotune": True, "max_autotune_gemm_backends": "TRITON", "triton.cudagraphs": False},
        None,
    ),
}

GPU_ONLY_MODES = {"triton-gemm"}


class CountingBackend:
    """Wraps a Dynamo backend; counts graphs compiled and compiled-graph calls, and records the
    layer that was active when something raised."""

    def __init__(self, inner: Callable, inner_name: str):
        self.inner = inner
        self.inner_name = inner_name
        self.graphs = 0
        self.calls = 0
        self.stage = "dynamo"

    def __call__(self, gm, example_inputs):
        self.stage = self.inner_name
        compiled = self.inner(gm, example_inputs)
        self.graphs += 1
        self.stage = "dynamo"
        backend = self

        def run(*args):
            backend.calls += 1
            backend.stage = "runtime"
            result = compiled(*args)
            backend.stage = "dynamo"
            return result

        run._boxed_call = getattr(compiled, "_boxed_call", False)
        return run

    def get_compiler_config(self):
        getter = getattr(self.inner, "get_compiler_config", None)
        return getter() if getter else None

    def reset(self):
        if hasattr(self.inner, "reset"):
            self.inner.reset()


@dataclass
class CompiledCall:
    fn: Callable
    backend: CountingBackend


AUTOTUNES = {"max-autotune-no-cudagraphs", "max-autotune", "triton-gemm"}


def autotune_limit(mode: str, max_configs: int) -> Optional[dict]:
    """Inductor options capping the GEMM configs an autotuning mode benchmarks. The Triton
    template path is still generated, compiled and benchmarked; only the search is shorter.
    None when there is no cap or this torch has no such knob."""
    if not max_configs or mode not in AUTOTUNES:
        return None
    import torch._inductor.config as inductor_config

    if "test_configs.max_mm_configs" not in inductor_config.get_config_copy():
        return None
    return {"test_configs.max_mm_configs": max_configs}


def compile_case(fn: Callable, mode: str, max_autotune_configs: int = 0) -> CompiledCall:
    """torch.compile(fn, fullgraph=True) in the given mode, through a counting backend."""
    import torch

    backend_name, torch_mode, options, dynamic = MODE_SETTINGS[mode]
    if backend_name == "inductor":
        limit = autotune_limit(mode, max_autotune_configs)
        if limit:
            options = {**(options or {}), **limit}
        # The wrapper takes a mode and options together (torch.compile refuses both at once).
        inner: Any = torch._TorchCompileInductorWrapper(torch_mode, options, dynamic)
        layer = "inductor"
    else:
        inner = torch._dynamo.lookup_backend(backend_name)
        layer = "aot_autograd" if backend_name == "aot_eager" else "dynamo"
    backend = CountingBackend(inner, layer)
    return CompiledCall(torch.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic), backend)
