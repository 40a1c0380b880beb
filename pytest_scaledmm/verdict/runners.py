"""How a case's compiled side is made: one Runner per way, kept in RUNNERS under its name.

A compile mode (matrix/compile_modes.py) names its runner; the pipeline (and so the run, triage
and repro scripts) and the AOTInductor control build the compiled side through it. A new way of
compiling is one object with the Runner protocol, added with register_runner, and a mode row
that names it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .kernel_choice import package_code


class CompiledSide(Protocol):
    """What a runner builds: the callable the case calls, the graphs compiled and compiled-graph
    calls so far, the stage running now (a failure is attributed to it, ErrorInfo.layer), the
    seconds of its own build steps and the generated sources (kernel_choice reads them)."""

    @property
    def fn(self) -> Callable: ...

    @property
    def graphs(self) -> int: ...

    @property
    def calls(self) -> int: ...

    @property
    def stage(self) -> str: ...

    @property
    def timing(self) -> dict: ...

    @property
    def codes(self) -> list: ...

    def close(self) -> None: ...


class Runner(Protocol):
    """One way of making a case's compiled side (a compile mode's `runner`)."""

    @property
    def name(self) -> str: ...  # the compile mode's `runner`, a repro script's RUNNER

    @property
    def marks_m(self) -> str | None: ...  # "dynamic" / "unbacked": M marked so, run at other M

    @property
    def builds_package(self) -> bool: ...  # loads and runs a package: the AOTInductor control applies

    @property
    def how(self) -> str: ...  # one line for a repro script: how the compiled side is made

    def build(self, fn: Callable, settings: Mapping[str, Any]) -> CompiledSide: ...


# Dynamo backend -> the layer a failure inside it is attributed to (ErrorInfo.layer).
BACKEND_LAYERS = {"inductor": "inductor", "aot_eager": "aot_autograd"}


class CountingBackend:
    """Wraps a Dynamo backend; counts graphs compiled and compiled-graph calls, and records the
    layer that was active when something raised."""

    def __init__(self, inner: Callable, inner_name: str):
        self.inner = inner
        self.inner_name = inner_name
        self.graphs = 0
        self.calls = 0
        self.stage = "dynamo"

    def __call__(self, gm: Any, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        self.stage = self.inner_name
        compiled = self.inner(gm, example_inputs)
        self.graphs += 1
        self.stage = "dynamo"
        backend = self

        def run(*args: Any) -> Any:
            backend.calls += 1
            backend.stage = "runtime"
            result = compiled(*args)
            backend.stage = "dynamo"
            return result

        run._boxed_call = getattr(compiled, "_boxed_call", False)  # type: ignore[attr-defined]
        return run

    def get_compiler_config(self) -> Any:
        getter = getattr(self.inner, "get_compiler_config", None)
        return getter() if getter else None

    def reset(self) -> None:
        if hasattr(self.inner, "reset"):
            self.inner.reset()


@dataclass
class CompiledCall:
    """torch.compile's side: the compiled function and the backend that counts for it."""

    fn: Callable
    backend: CountingBackend
    timing: dict = field(default_factory=dict)
    codes: list = field(default_factory=list)

    @property
    def graphs(self) -> int:
        return self.backend.graphs

    @property
    def calls(self) -> int:
        return self.backend.calls

    @property
    def stage(self) -> str:
        return self.backend.stage

    def close(self) -> None:
        pass


def compile_counted(fn: Callable, settings: Mapping[str, Any]) -> CompiledCall:
    """torch.compile(fn, fullgraph=True) with `settings` (compile_modes.compile_settings: backend,
    mode, options, dynamic), through a counting backend."""
    import torch  # noqa: PLC0415  torch-free start-up (compile_modes reads RUNNERS)

    backend_name, dynamic = settings["backend"], settings.get("dynamic")
    if backend_name == "inductor":
        # The wrapper takes a mode and options together (torch.compile refuses both at once).
        inner: Any = torch._TorchCompileInductorWrapper(settings.get("mode"), settings.get("options"), dynamic)
    else:
        inner = torch._dynamo.lookup_backend(backend_name)
    backend = CountingBackend(inner, BACKEND_LAYERS.get(backend_name, "dynamo"))
    return CompiledCall(torch.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic), backend)


class AotiCall:
    """The compiled side of an AOTInductor mode: its first call exports the function
    (torch.export), builds an AOTInductor package in a temporary directory and loads it; every
    call runs the loaded package. It counts graphs and calls and names its stage like
    CompiledCall, so the verdict reads both alike; `timing` holds each step's seconds."""

    def __init__(self, fn: Callable, options: Mapping[str, Any] | None = None):
        self.user_fn = fn
        self.options = dict(options) if options else None
        self.graphs = 0
        self.calls = 0
        self.stage = "export"
        self.timing: dict = {}
        self.codes: list = []  # the package's sources (kernel_choice reads them)
        self.loaded: Any = None
        self.folder: str | None = None

    @property
    def fn(self) -> Callable:
        return self.call

    def call(self, *args: Any) -> Any:
        if self.loaded is None:
            self._build(args)
        self.calls += 1
        return self._aoti_run(args)

    # Loading and running have methods of their own: a crash there leaves only a faulthandler
    # stack, and these frames name the stage (execution/isolate._STACK_LAYERS).
    def _aoti_run(self, args: tuple) -> Any:
        self.stage = "runtime"
        result = self.loaded(*args)
        self.stage = "aoti"
        return result

    def _aoti_load(self, path: str) -> None:
        import torch  # noqa: PLC0415  torch-free start-up

        self.stage = "aoti_load"
        start = time.perf_counter()
        self.loaded = torch._inductor.aoti_load_package(path)
        self.timing["load_s"] = time.perf_counter() - start

    def _build(self, args: tuple) -> None:
        import torch  # noqa: PLC0415  torch-free start-up

        user_fn = self.user_fn

        class Case(torch.nn.Module):
            def forward(self, *inputs: Any) -> Any:
                return user_fn(*inputs)

        self.stage = "export"
        start = time.perf_counter()
        program = torch.export.export(Case(), tuple(args))
        self.timing["export_s"] = time.perf_counter() - start
        self.stage = "inductor"
        self.folder = tempfile.mkdtemp(prefix="scaledmm-aoti-")
        start = time.perf_counter()
        path = torch._inductor.aoti_compile_and_package(
            program, package_path=os.path.join(self.folder, "case.pt2"), inductor_configs=self.options
        )
        self.timing["package_s"] = time.perf_counter() - start
        self.graphs = 1
        self.codes = package_code(path)
        self._aoti_load(path)

    def close(self) -> None:
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


@dataclass(frozen=True)
class CompileRunner:
    """torch.compile(fullgraph=True) with the mode's settings; `marks_m`: the dynamic-M runners,
    which mark the M-dependent dims of each call's inputs (pipeline.mark_m)."""

    name: str
    marks_m: str | None = None
    how: str = "torch.compile(fullgraph=True, **COMPILE)"
    builds_package = False

    def build(self, fn: Callable, settings: Mapping[str, Any]) -> CompiledSide:
        return compile_counted(fn, settings)


@dataclass(frozen=True)
class AotiRunner:
    """torch.export, then an AOTInductor package built, loaded and run (AotiCall)."""

    name: str = "aoti"
    marks_m = None
    how: str = (
        "torch.export, then torch._inductor.aoti_compile_and_package(inductor_configs=COMPILE['options']), "
        "aoti_load_package and the call"
    )
    builds_package = True

    def build(self, fn: Callable, settings: Mapping[str, Any]) -> CompiledSide:
        return AotiCall(fn, settings.get("options"))


def _marking(marked: str) -> CompileRunner:
    how = f"torch.compile(fullgraph=True, **COMPILE), M marked {marked}, run at the case's M then at OTHER_M"
    return CompileRunner(f"mark-{marked}", marks_m=marked, how=how)


RUNNERS: dict[str, Runner] = {
    runner.name: runner
    for runner in (CompileRunner("compile"), AotiRunner(), _marking("dynamic"), _marking("unbacked"))
}


BUILT_IN = tuple(RUNNERS)
# The module that defines each registered runner: a child process or a repro script imports it
# to register the runner again.
REGISTERED_BY: dict[str, str] = {}


def register_runner(runner: Runner) -> None:
    """Adds a runner (a mode row names it by `name`); a name already taken is refused."""
    if runner.name in RUNNERS:
        raise ValueError(f"a runner named {runner.name!r} exists")
    RUNNERS[runner.name] = runner
    REGISTERED_BY[runner.name] = type(runner).__module__


def unregister_runner(name: str) -> None:
    """Removes a runner register_runner added."""
    if name in BUILT_IN:
        raise ValueError(f"{name!r} is a built-in runner")
    RUNNERS.pop(name, None)
    REGISTERED_BY.pop(name, None)


def runner_named(name: str) -> Runner:
    """The runner of a mode's `runner` name; KeyError for a name none has."""
    return RUNNERS[name]


def registering_modules() -> list[str]:
    """The modules that registered runners, in registration order: importing them again (in a
    child process) registers the same runners and the modes that use them."""
    return list(dict.fromkeys(REGISTERED_BY.values()))
