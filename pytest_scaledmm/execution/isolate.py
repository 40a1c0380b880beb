"""Run cases in a persistent child process, so that a case which kills its process or hangs
becomes a CRASH or TIMEOUT outcome and the run goes on.

The child is forked ready by the run's fork server (forkserver.py: one process that imported torch
and the compiler stack once and never opened a device; a forked CUDA context is unusable, so each
child opens its own), or, where there is none (macOS, Windows, a server that cannot start or
refuses), started with `spawn` and imports torch itself. It loads the kernels by their
declarations and then runs one request at a time. After a crash, a timeout or a CUDA error that
leaves the context unusable it is replaced before the next case. Each xdist worker owns its own
child. `--scaledmm-isolate=no` runs everything in the pytest process.

The first child is asked for when the session starts (`SpareChild`, before collection): whatever
is left of its start-up overlaps the parent's collection instead of following it. Every child
learns what to run (kernels, settings) in a second step, the setup message.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from ..matrix.case_params import Case
from ..verdict import outcome as oc
from ..verdict.outcome import BOTH_CHECKED, EAGER_CHECKED, Outcome, SideEvidence
from ..verdict.signature_text import TIMEOUT_SIGNATURE
from .child_messages import Answer, CaseRequest, Failed, Ready, RunCase, RunControl, RunRung, Setup, SideMade

STARTUP_TIMEOUT_S = 120.0
# What the fork server imports before it forks a child: what _child_main and _warm_up import (the
# compiler stack, Inductor only when the run compiles with it), then the child's own modules.
COMPILER_STACK = ("torch", "torch._dynamo", "torch._functorch.aot_autograd")
INDUCTOR = ("torch._inductor.compile_fx",)
CHILD_MODULES = (
    "pytest_scaledmm.execution.isolate",
    "pytest_scaledmm.execution.device",
    "pytest_scaledmm.execution.quiet",
    "pytest_scaledmm.execution.run",
    "pytest_scaledmm.matrix.kernels",
)
# Errors after which a CUDA/HIP context cannot be used again: every later case would fail.
POISONED = re.compile(
    r"illegal memory access|device-side assert|unspecified launch failure|misaligned address|"
    r"CUDA error: an illegal|hipErrorIllegalAddress|HIP error: an illegal|illegal instruction",
    re.I,
)


# -- kernels by declaration ------------------------------------------------------------------


def kernel_refs(kernels: dict[str, Callable], kernel_specs: dict) -> dict[str, str | None]:
    """How the child finds each kernel: 'builtin:NAME', 'impl:module:qualname', or None when the
    callable cannot be imported by name (a lambda, a closure from a hook): run it in-process."""

    from ..matrix.kernels import BUILTIN_IMPLS, load_impl  # noqa: PLC0415  lazy: see _child_main

    refs: dict[str, str | None] = {}
    for name, fn in kernels.items():
        spec = kernel_specs.get(name)
        if BUILTIN_IMPLS.get(name) is fn:
            refs[name] = f"builtin:{name}"
            continue
        candidates = []
        if spec is not None and spec.impl:
            candidates.append(spec.impl)
        module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
        # A conftest is imported by pytest under a name that another directory's conftest can
        # shadow on the child's sys.path: run its kernels in-process.
        if module and qualname and "<" not in qualname and module.rpartition(".")[2] != "conftest":
            candidates.append(f"{module}:{qualname}")
        refs[name] = None
        for candidate in candidates:
            try:
                if load_impl(candidate) is fn:
                    refs[name] = f"impl:{candidate}"
                    break
            except Exception:
                continue
    return refs


def _load_kernel(ref: str) -> Callable:

    from ..matrix.kernels import BUILTIN_IMPLS, load_impl  # noqa: PLC0415  lazy: see _child_main

    kind, _, rest = ref.partition(":")
    return BUILTIN_IMPLS[rest] if kind == "builtin" else load_impl(rest)


# -- the child ---------------------------------------------------------------------------------


def _child_main(conn, log_path: str, requested_device: str, uses_inductor: bool, import_dirs=()) -> None:
    """Entry point of the child process: warm up, take the run's settings, then answer requests
    until told to stop. `import_dirs`: the project directories the parent put in front of
    sys.path after it imported torch; torch is imported here without them too, so that a
    project file named like a module torch imports (queue.py) does not replace it."""

    if hasattr(os, "setpgrp"):
        os.setpgrp()  # own process group: a kill also reaches Inductor's compile workers
    _die_with_parent()
    log = open(log_path, "a", buffering=1, encoding="utf-8", errors="replace")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    import faulthandler  # noqa: PLC0415  lazy: this module's imports stay few (the docstring)
    import logging  # noqa: PLC0415

    faulthandler.enable(file=log, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)
    hidden = [directory for directory in dict.fromkeys(import_dirs) if directory in sys.path]
    sys.path[:] = [entry for entry in sys.path if entry not in hidden]
    try:
        from .quiet import quiet_torch_imports  # noqa: PLC0415  lazy: the child imports it

        with quiet_torch_imports():
            import torch  # noqa: F401, PLC0415

            logging.getLogger("torch.__trace").propagate = False
            _warm_up(requested_device, uses_inductor)
    except BaseException:
        print(traceback.format_exc(), flush=True)  # the log keeps it should the parent be gone
        conn.send(Failed.now())
        return
    finally:
        sys.path[:0] = hidden  # the kernels import from them, as in the parent
    try:
        setup = conn.recv()
    except EOFError:
        return
    if not isinstance(setup, Setup):
        return
    ctx_blob, refs, hooked = setup.ctx, setup.refs, setup.hooked
    try:
        for module in setup.extensions:  # runners and modes a plugin registered in the parent
            if module not in sys.modules:
                __import__(module)
        kernels = {name: _load_kernel(ref) for name, ref in refs.items()}
        specs = dict(ctx_blob.kernel_specs)
        for name in hooked:
            if name in kernels:
                specs[name] = dataclasses.replace(specs[name], fn=kernels[name])
        ctx = dataclasses.replace(
            ctx_blob, kernels=kernels, kernel_specs=specs, in_child=True, side_sink=_side_sender(conn)
        )
        if ctx.host_lane and ctx.device.startswith("cuda"):  # the CPU device's warm-up did it
            from .device import probe_cpu_vector_isa_in_background  # noqa: PLC0415  lazy: the child

            probe_cpu_vector_isa_in_background()
    except BaseException:
        conn.send(Failed.now())
        return
    conn.send(Ready(os.getpid()))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        try:
            conn.send(Answer(_serve(request, ctx)))
        except BaseException:
            conn.send(Failed.now())


def _side_sender(conn) -> Callable:
    """The child's pipeline.SideSink: each side's evidence goes to the parent when it is made."""

    def send(side: str, evidence) -> None:
        conn.send(SideMade(side, evidence.to_json()))

    return send


def _die_with_parent() -> None:
    """Linux: the kernel kills the child when the process that started it dies (a hard-killed
    xdist worker must not leave a hung case running on the GPU)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes  # noqa: PLC0415  lazy: the child imports it

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _warm_up(requested_device: str, uses_inductor: bool) -> None:
    """Import the compiler stack and open the device context now, while the parent collects (for
    a restarted child: within the start-up limit) rather than in the first case. Inductor only when
    the profile compiles with it: importing it starts its compile workers on some releases."""

    modules = ["torch._dynamo", "torch._functorch.aot_autograd"]
    modules += ["torch._inductor.compile_fx"] if uses_inductor else []
    for name in modules:
        try:
            __import__(name)
        except Exception:  # an older or trimmed torch: the case will say what is missing
            pass
    try:
        from .device import resolve_device  # noqa: PLC0415  lazy: the child imports it

        device = resolve_device(requested_device)
        if device.startswith("cuda"):
            import torch  # noqa: PLC0415  lazy: the child imports it

            torch.empty(1, device=device)
    except Exception:  # a missing or failing device: each case reports it
        return
    if device == "cpu" and uses_inductor:
        from .device import probe_cpu_vector_isa_in_background  # noqa: PLC0415  lazy: the child

        probe_cpu_vector_isa_in_background()


def _serve(request: CaseRequest, ctx):
    """One request's answer. Whatever run_case raises (a harness bug) is answered as the case's
    HARNESS_ERROR outcome, so the parent always gets a record for it."""
    case = request.case()
    case_id = case.id
    start = time.perf_counter()
    if isinstance(request, RunCase):
        from . import run  # noqa: PLC0415  lazy: the child imports it

        try:
            return run.run_case(case, ctx, request.keep).to_json()
        except BaseException as exc:
            return oc.harness_error(exc, f" running case {case_id} in the isolated child").to_json()
    if isinstance(request, RunControl):
        from .aoti_control import control_answer  # noqa: PLC0415  lazy: the child imports it

        return control_answer(ctx.device, catching=BaseException)
    if isinstance(request, RunRung):
        from . import triage  # noqa: PLC0415  lazy: the child imports it

        try:
            return triage.execute_rung(case, request.rung, ctx)
        except BaseException as exc:
            return _rung_answer(oc.harness_error(exc, f" running a triage rung of {case_id}"), start)
    raise ValueError(f"unknown request {request!r}")


def _rung_answer(result: Outcome, start: float) -> dict:
    return {
        "outcome": result.outcome,
        "signature": result.signature,
        "layer": result.layer,
        "seconds": round(time.perf_counter() - start, 3),
    }


# -- the parent side ---------------------------------------------------------------------------


class HarnessError(RuntimeError):
    """The harness itself failed in the child (not the case): shown as a test error."""


@dataclasses.dataclass
class Death:
    kind: str  # oc.CRASH or oc.TIMEOUT
    signature: str
    detail: str
    layer: str | None
    seconds: float
    # side -> its evidence (pipeline.SideEvidence.to_json) that reached the parent before the end
    evidence: dict = dataclasses.field(default_factory=dict)

    def outcome(self) -> Outcome:
        """The case's outcome: the death, with each side's check or error sent before it."""
        result = Outcome(self.kind, self.signature, self.layer, self.detail, timing={"total_s": self.seconds})
        for side, data in self.evidence.items():
            made = SideEvidence.from_json(data)
            if made.check is not None:
                result.errors[side] = made.check
            if made.error is not None:
                setattr(result, f"{side}_error", made.error)
        if "compiled" in self.evidence:
            result.observations.died_after = BOTH_CHECKED
        elif "eager" in self.evidence:
            result.observations.died_after = EAGER_CHECKED
        return result


class InProcessRunner:
    """Runs requests in the pytest process: for debugging, and for kernels the child cannot import."""

    isolated = False
    earlier: tuple = ()  # no fresh process to replay a case in: nothing is judged by its order

    def __init__(self, ctx):
        self.ctx = ctx

    def replayable(self, case: Case) -> bool:
        return False

    def run_after(self, earlier, case: Case, keep: Sequence[int] | None = None) -> Outcome:
        for before in earlier:
            self.run(before)
        return self.run(case, keep)

    def start(self) -> None:
        pass

    def take_startup_seconds(self) -> float:
        return 0.0

    def run(self, case: Case, keep: Sequence[int] | None = None) -> Outcome:
        from . import run  # noqa: PLC0415  lazy: the child imports it

        try:
            return run.run_case(case, self.ctx, keep)
        except Exception as exc:  # a KeyboardInterrupt here may be the user's: it stops the run
            return oc.harness_error(exc, f" running case {case.id}")

    def rung(self, case: Case, rung: dict) -> dict:
        from . import triage  # noqa: PLC0415  lazy: the child imports it

        start = time.perf_counter()
        try:
            return triage.execute_rung(case, rung, self.ctx)
        except Exception as exc:
            return _rung_answer(oc.harness_error(exc, f" running a triage rung of {case.id}"), start)

    def aoti_control(self, case: Case) -> dict:
        """aoti_control.run_control in this process (a harness error answered as the child does)."""
        from .aoti_control import control_answer  # noqa: PLC0415  lazy: the child imports it

        return control_answer(self.ctx.device)

    def close(self) -> None:
        pass


def start_fork_server(kernels: dict[str, Callable], kernel_specs, uses_inductor: bool):
    """Start the run's fork server (forkserver.py) in the process that owns the run, before the
    xdist workers start: they inherit its address. None where no kernel runs in a child (a
    kernel defined in a conftest runs in-process) or no server can run here."""

    from ..matrix.kernels import added_import_dirs  # noqa: PLC0415  lazy: see _child_main
    from .forkserver import ForkServer  # noqa: PLC0415

    specs = {spec.name: spec for spec in kernel_specs}
    if not any(ref is not None for ref in kernel_refs(kernels, specs).values()):
        return None
    preload = [*COMPILER_STACK, *(INDUCTOR if uses_inductor else ()), *CHILD_MODULES]
    return ForkServer.start(preload, added_import_dirs())


def _start_child(log_path: str, requested_device: str, uses_inductor: bool):
    """A new child and the parent's end of its pipe: forked by the run's fork server where there
    is one that forks, else spawned."""

    from ..matrix.kernels import added_import_dirs  # noqa: PLC0415  lazy: see _child_main
    from .forkserver import request_child  # noqa: PLC0415

    forked = request_child(_child_main, (log_path, requested_device, uses_inductor, added_import_dirs()))
    return forked if forked is not None else _spawn(log_path, requested_device, uses_inductor)


def _spawn(log_path: str, requested_device: str, uses_inductor: bool):

    import multiprocessing  # noqa: PLC0415  lazy: see _child_main

    from ..matrix.kernels import added_import_dirs  # noqa: PLC0415  lazy: see _child_main

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    # Not daemonic: Inductor (2.3 at least) starts a compile pool at import, and a daemonic
    # process may not have children. close() and the parent-death signal end it instead.
    proc = context.Process(
        target=_child_main,
        args=(child, log_path, requested_device, uses_inductor, added_import_dirs()),
        name="scaledmm-child",
        daemon=False,
    )
    proc.start()
    child.close()
    return proc, parent


class SpareChild:
    """A child started before the run's settings are known; a ChildRunner adopts it."""

    def __init__(self, requested_device: str, uses_inductor: bool):
        self.dir = tempfile.mkdtemp(prefix="scaledmm-child-")
        self.log = os.path.join(self.dir, "child.log")
        try:
            self.proc, self.conn = _start_child(self.log, requested_device, uses_inductor)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def close(self) -> None:
        """Only for a spare nobody adopted (no case ran in this process)."""
        if self.proc is not None:
            _end(self.proc, self.conn)
            self.proc = self.conn = None
        shutil.rmtree(self.dir, ignore_errors=True)


class ChildRunner:
    """Runs requests in a persistent child; see the module docstring."""

    isolated = True

    def __init__(
        self,
        ctx,
        timeout: float,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        spare: SpareChild | None = None,
        uses_inductor: bool = True,
    ):
        self.ctx = ctx
        self.timeout = timeout
        self.startup_timeout = max(startup_timeout, timeout)
        self.uses_inductor = uses_inductor
        self.refs = kernel_refs(dict(ctx.kernels), dict(ctx.kernel_specs))
        self.in_process = InProcessRunner(ctx)
        # The child and its pipe: set by _spawn (or taken from the spare) before any request.
        self._proc: Any = None
        self._conn: Any = None
        self._ready = False  # the child has its settings and answers requests
        if spare is not None:
            self._dir, self._log = spare.dir, spare.log
            self._proc, self._conn = spare.proc, spare.conn
            spare.proc = spare.conn = None
        else:
            self._dir = tempfile.mkdtemp(prefix="scaledmm-child-")
            self._log = os.path.join(self._dir, "child.log")
        self.restarts = 0
        # The cases the current child ran, in order: the state a later case may depend on.
        self.earlier: list[Case] = []
        self._setup_sent = False
        self.startup_s = 0.0  # waited for a child to start, not yet charged to a case
        # Where the current child's output begins in the log it shares with the children it
        # replaced: a dump they left says nothing about one that did not start.
        self._log_start = 0

    def start(self) -> None:
        """Send the child its settings now (after collection), so that it loads the kernels while
        the first case is handed out; the first request waits only for what is left."""
        if self._proc is None:
            self._proc, self._conn = _start_child(self._log, self.ctx.device, self.uses_inductor)
        if not self._ready and not self._setup_sent:
            self._send_setup()

    def take_startup_seconds(self) -> float:
        """The seconds cases waited for a child's start since the last call (its first case's
        and a restarted child's start-up belong to the case that waited)."""
        seconds, self.startup_s = self.startup_s, 0.0
        return seconds

    # requests
    def run(self, case: Case, keep: Sequence[int] | None = None) -> Outcome:
        """The case's outcome from the child; `keep`: run.run_case's (a shrunk sequence)."""
        if self.refs.get(case.params.kernel) is None:
            result = self.in_process.run(case, keep)
            result.observations.isolation = "in-process: kernel cannot be imported by name"
            return result
        answer = self._request(RunCase.of(case, keep=None if keep is None else tuple(keep)), case)
        if isinstance(answer, Death):
            return answer.outcome()
        result = Outcome.from_json(answer)
        self.earlier.append(case)
        if _poisons_context(result):
            # The context is gone for every later case; start over before the next one.
            self._stop(kill=True)
            result.observations.isolation = "child replaced: the device context is unusable after this error"
        return result

    def replayable(self, case: Case) -> bool:
        """Whether `case` runs in the child (a fresh child replays it), not in this process."""
        return self.refs.get(case.params.kernel) is not None

    def run_after(self, earlier, case: Case, keep: Sequence[int] | None = None) -> Outcome:
        """`case` in a fresh child, after `earlier` (their outcomes are not kept): a replay alone,
        or after the cases a failure may depend on (alone.py), or with a shorter sequence (`keep`,
        shrink.py)."""
        self._stop(kill=False)
        for before in earlier:
            self.run(before)
        return self.run(case, keep)

    def rung(self, case: Case, rung: dict) -> dict:
        if self.refs.get(case.params.kernel) is None:
            return self.in_process.rung(case, rung)
        answer = self._request(RunRung.of(case, rung=rung), case)
        if isinstance(answer, Death):
            return {
                "outcome": answer.kind,
                "signature": answer.signature,
                "layer": answer.layer,
                "seconds": answer.seconds,
            }
        return answer

    def aoti_control(self, case: Case) -> dict:
        """aoti_control.run_control in the child (whatever the case's kernel): a control that
        kills its process is a crash at the stage its stack names, and the run goes on."""
        answer = self._request(RunControl.of(case), case)
        if isinstance(answer, Death):
            return {
                "ok": False,
                "outcome": answer.kind,
                "stage": answer.layer,
                "error": answer.signature,
                "seconds": answer.seconds,
            }
        return answer

    def close(self) -> None:
        # At the session's end nothing in the child is left to finish (each compile wrote its
        # cache entries as it ended): it is ended at once, not after seconds of torch's shutdown.
        self._stop(kill=False)
        shutil.rmtree(self._dir, ignore_errors=True)

    # machinery
    def _send_setup(self) -> None:
        # Callables stay behind (a hook's may not pickle); the child loads them by reference.
        specs = {
            name: dataclasses.replace(spec, fn=None) if spec.fn is not None else spec
            for name, spec in self.ctx.kernel_specs.items()
        }
        blob = dataclasses.replace(self.ctx, kernels={}, kernel_specs=specs)
        refs = {name: ref for name, ref in self.refs.items() if ref is not None}
        hooked = {name for name, spec in self.ctx.kernel_specs.items() if spec.fn is not None}
        self._setup_sent = True
        try:
            from ..matrix.compile_modes import extension_modules  # noqa: PLC0415  lazy: see _child_main

            self._conn.send(Setup(blob, refs, frozenset(hooked), tuple(extension_modules())))
        except OSError:
            pass  # it is gone already: what it left in the pipe, or its exit status, says why

    def _setup(self) -> Death | None:
        """Send the child (just spawned, or the spare) its settings, unless start() did, and wait
        until it is ready; the wait is start-up time of the case that waited."""
        start = time.monotonic()
        try:
            return self._await_ready(start)
        finally:
            self.startup_s += time.monotonic() - start

    def _await_ready(self, start: float) -> Death | None:
        if not self._setup_sent:
            self._send_setup()
        if not self._conn.poll(self.startup_timeout):
            if self._spawn_instead("no child within the start-up limit"):
                return self._await_ready(start)
            headline = f"the child did not start within {self.startup_timeout:g} s"
            death = self._death(oc.TIMEOUT, start, headline, self._log_start)
            self._stop(kill=True)
            return death
        try:
            message = self._conn.recv()
        except (EOFError, OSError):
            if self._spawn_instead(None):
                return self._await_ready(start)
            return self._died(start, self._log_start, "while starting")
        if not isinstance(message, Ready):
            self._stop(kill=True)
            raise HarnessError(f"the isolated child could not start:\n{getattr(message, 'traceback', message)}")
        self._ready = True
        return None

    def _spawn_instead(self, reason: str | None) -> bool:
        """The fork server refused the child, went away or stayed silent before it forked one:
        spawn the child instead (True), the case none the wiser. False for any other child."""
        from .forkserver import ForkedChild, stop_asking  # noqa: PLC0415  lazy: see _child_main

        proc = self._proc
        if not isinstance(proc, ForkedChild) or proc.forked():
            return False
        if reason is not None:
            stop_asking(reason)
        _end(proc, self._conn)
        self._proc, self._conn = _spawn(self._log, self.ctx.device, self.uses_inductor)
        self._setup_sent = False
        return True

    def _request(self, request: CaseRequest, case: Case):
        if self._proc is None or (self._ready and not self._proc.is_alive()):
            self._stop(kill=True)
            self._proc, self._conn = _start_child(self._log, self.ctx.device, self.uses_inductor)
        if not self._ready:
            death = self._setup()
            if death is not None:
                return death
        offset = _size(self._log)
        start = time.monotonic()
        self._conn.send(request)
        evidence: dict = {}
        while True:
            left = start + self.timeout - time.monotonic()
            if left <= 0 or not self._conn.poll(left):
                _dump_stacks(self._proc)
                headline = f"case {case.id} gave no result within {self.timeout:g} s"
                death = self._death(oc.TIMEOUT, start, headline, offset)
                self._stop(kill=True)
                return dataclasses.replace(death, evidence=evidence)
            try:
                message = self._conn.recv()
            except (EOFError, ConnectionError):
                return dataclasses.replace(self._died(start, offset, f"case {case.id}"), evidence=evidence)
            if isinstance(message, SideMade):  # a side's evidence, sent as it was made; the answer follows
                evidence[message.side] = message.evidence
                continue
            if isinstance(message, Failed):
                raise HarnessError(f"the harness failed in the isolated child:\n{message.traceback}")
            if not isinstance(message, Answer):
                raise HarnessError(
                    f"the isolated child answered with {type(message).__name__}, not a message of its protocol"
                )
            return message.payload

    def _died(self, start: float, offset: int, what: str) -> Death:
        self._proc.join(5)
        code = self._proc.exitcode
        how = _exit_words(code)
        death = self._death(oc.CRASH, start, f"{what} killed its process ({how})", offset, how)
        self._stop(kill=True)
        return death

    def _death(self, kind, start, headline, offset=0, how=None) -> Death:
        tail = _tail(self._log, offset)
        if kind == oc.TIMEOUT:
            signature = f"{TIMEOUT_SIGNATURE} {self.timeout:g} s"
        else:
            signature = f"CRASH: process {how}"
        detail = headline + (f"\nlast output of the child:\n{tail}" if tail else "")
        return Death(kind, signature, detail, _layer_from_stack(tail), round(time.monotonic() - start, 3))

    def _stop(self, kill: bool) -> None:
        """End the child and its process group; `kill`: a restart, counted."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        self._ready = self._setup_sent = False
        self.earlier = []
        if proc is None:
            return
        self.restarts += 1 if kill else 0
        _end(proc, conn)
        self._log_start = _size(self._log)


def _poisons_context(result: Outcome) -> bool:
    for error in (result.eager_error, result.compiled_error):
        if error is not None and POISONED.search(f"{error.message}\n{error.root_message}"):
            return True
    return False


def _end(proc, conn) -> None:
    from .forkserver import ForkedChild  # noqa: PLC0415  lazy: see _child_main

    # Always the whole group: compile workers or ISA builds may outlive a clean exit. A child the
    # fork server has not forked yet has no pid: closing its connection tells the server.
    if proc.pid is not None:
        _kill_group(proc)
        proc.join(10)
    if conn is not None:
        conn.close()
    if isinstance(proc, ForkedChild):
        proc.close()  # the server reaps it now (until then its pid names no other process)


def _kill_group(proc) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except Exception:
            pass


def _dump_stacks(proc) -> None:
    """Ask a hung child for its Python stacks (faulthandler on SIGUSR1) before it is killed."""
    if proc is None or proc.pid is None or not hasattr(signal, "SIGUSR1"):
        return
    try:
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(0.5)
    except ProcessLookupError:
        pass


def _exit_words(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _tail(path: str, offset: int, lines: int = 25) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()]
    fatal = [line for line in kept[:-lines] if line.startswith("Fatal Python error")]
    # Other threads' stacks can push the headline out of the window: keep it.
    return "\n".join(fatal[-1:] + (["..."] if fatal else []) + kept[-lines:])


_STACK_LAYERS = [
    ("torchinductor", "runtime"),  # code Inductor generated, run from its cache directory
    ("scaledmm-cache-", "runtime"),
    ("torch/export/pt2_archive", "aoti_load"),  # loading an AOTInductor package (mode aoti)
    ("torch/_inductor", "inductor"),
    ("torch/export", "export"),
    ("torch/_functorch", "aot_autograd"),
    ("torch/_dynamo", "dynamo"),
    ("triton/", "runtime"),
]


# Frames of verdict/runners.AotiCall that name its stage, whatever runs inside them: the
# package loader and a loaded package are native code called from torch/_inductor/package,
# which the markers above would read as "inductor".
_AOTI_STAGE_FRAMES = [(" in _aoti_load", "aoti_load"), (" in _aoti_run", "runtime")]


def _layer_from_stack(text: str) -> str | None:
    """The compiler layer of the innermost frame in the thread that was running the case, read
    from a faulthandler dump (threads are listed most recent call first); "eager" when no
    compiler frame is on that stack, None without a dump. Inside an AOTInductor package's load
    or run (_AOTI_STAGE_FRAMES), that stage."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith(("Thread 0x", "Current thread")) and current:
            blocks.append(current)
            current = []
        current.append(line.replace("\\", "/"))
    blocks.append(current)
    for block in blocks:
        if not any("run_case" in line or "_serve" in line for line in block):
            continue
        for line in block:
            if line.strip().startswith("File ") and "verdict/runners.py" in line:
                for ending, layer in _AOTI_STAGE_FRAMES:
                    if line.rstrip().endswith(ending):
                        return layer
        for line in block:
            for marker, layer in _STACK_LAYERS:
                if line.strip().startswith("File ") and marker in line:
                    return layer
        return "eager"
    return None


def make_runner(ctx, isolate: bool, timeout: float, spare: SpareChild | None = None, uses_inductor: bool = True):
    if not isolate:
        return InProcessRunner(ctx)
    return ChildRunner(ctx, timeout, spare=spare, uses_inductor=uses_inductor)
