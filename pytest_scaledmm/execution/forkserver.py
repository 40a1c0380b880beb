"""The run's fork server: one process imports torch and the compiler stack once, never opening a
device, and forks every isolated child of the run from there, ready for its settings.

Without it each child is a `spawn`ed Python that imports torch, Dynamo, AOT autograd and Inductor
itself: seconds each, more when every xdist worker's child does it at once, and again for every
child that replaces one that crashed. With it the run pays that import once, in the server,
while pytest starts its workers and collects; a child is a fork (tens of milliseconds) that
then opens its own device context.

- The process that owns the run (the xdist controller, or the one pytest process) starts it
  (`ForkServer.start`) before the workers start; they find its unix socket through ADDRESS_ENV,
  in a directory only this user can enter. `multiprocessing`'s own "forkserver" start method
  would be one server per worker, whose import is the first child's wait all the same.
- A worker asks for a child with `request_child`: the child's end of its pipe goes over the
  socket (SCM_RIGHTS) with the worker's environment, working directory, sys.path and argv; the
  server forks and the child takes them before it runs the target (isolate._child_main). The
  connection stays open for the child's life: on it the server says the child's pid, then how it
  exited (`ForkedChild` reads them, as multiprocessing.Process would); when the worker closes it
  or dies, the server kills the child's process group.
- The server forks only while it is sound to: one thread (/proc/self/task), no CUDA driver
  initialised, not a ROCm build, and the worker's environment equal to the one torch was imported
  under (but for PER_PROCESS_ENV; OMP_NUM_THREADS is applied in the child). Otherwise it refuses,
  and the worker spawns its children as before. Linux only: elsewhere (macOS, Windows) nothing
  starts and every child is spawned.

Only the standard library is imported here at module level (torch never): the pytest process
imports this module at its start, and the server before the imports it is for.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any

ADDRESS_ENV = "PYTEST_SCALEDMM_FORK_SERVER"
# Variables a worker's environment may hold with another value than the server's: xdist's own,
# the terminal size xdist gives its workers, the test pytest is in, this server's address, and
# the worker's share of the CPU threads (torch reads it at import: the child applies it).
PER_PROCESS_ENV = frozenset(
    {
        "PYTEST_XDIST_WORKER",
        "PYTEST_XDIST_WORKER_COUNT",
        "PYTEST_XDIST_TESTRUNUID",
        "COLUMNS",
        "LINES",
        "PYTEST_CURRENT_TEST",
        "OMP_NUM_THREADS",
        ADDRESS_ENV,
    }
)
# Modules whose files must be the same in the server and in the worker (where it imported them).
SAME_FILES = ("torch", "pytest_scaledmm")
# Set only while the server imports: numpy's OpenBLAS starts a thread per core when it loads
# (torch imports numpy), and a process with threads does not fork soundly. A child takes the
# worker's environment; its OpenBLAS stays at one thread (the harness computes with torch).
IMPORT_ONLY_ENV = {"OPENBLAS_NUM_THREADS": "1"}
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"  # one directory per GPU the driver found
REQUEST_TIMEOUT_S = 10.0
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux
NOTE = "not-forked"  # in the server's directory: why a child was spawned instead
# The server's program. It reads its settings (a literal) from stdin and takes the run's sys.path
# before it imports anything: a project's json.py or socket.py in the working directory (first
# on a `-c` program's path) must not be taken.
BOOT = (
    "import sys; config = eval(sys.stdin.readline()); sys.path[:] = config['path']; "
    "from pytest_scaledmm.execution.forkserver import serve; serve(config)"
)


def available() -> bool:
    """Whether children can be forked here: Linux (a fork on macOS is unsafe with its system
    frameworks; Windows has none)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")


# -- messages ------------------------------------------------------------------------------------


def _send(sock: socket.socket, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> Any:
    """The next message, or None at the end of the stream."""
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    data = _recv_exact(sock, struct.unpack("!I", head)[0])
    return None if data is None else pickle.loads(data)


# -- the owner's side ----------------------------------------------------------------------------


class ForkServer:
    """The run's fork server, held by the process that started it (see the module docstring)."""

    def __init__(self, proc, directory: str, address: str, alive: int):
        self.proc = proc
        self.directory = directory
        self.address = address
        self._alive = alive  # the write end of the pipe whose end tells the server to stop

    @classmethod
    def start(cls, preload: list[str], hidden: list[str]) -> ForkServer | None:
        """Start the server and name it in ADDRESS_ENV for this process and those it starts
        later (xdist's workers). `preload`: the modules it imports, in order; `hidden`: the
        directories left out of sys.path while it imports them (isolate._child_main). None
        where it cannot run here, or a server is already named (an enclosing run's)."""
        if not available() or os.environ.get(ADDRESS_ENV):
            return None
        import shutil  # noqa: PLC0415  lazy: the module's imports stay few (its docstring)
        import subprocess  # noqa: PLC0415
        import tempfile  # noqa: PLC0415

        directory = tempfile.mkdtemp(prefix="scaledmm-fork-")  # 0700: only this user connects
        address = os.path.join(directory, "socket")
        if len(os.fsencode(address)) > _SOCKET_PATH_MAX and os.path.isdir("/tmp"):
            shutil.rmtree(directory, ignore_errors=True)
            directory = tempfile.mkdtemp(prefix="scaledmm-fork-", dir="/tmp")
            address = os.path.join(directory, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        alive_r, alive_w = os.pipe()
        proc = None
        try:
            # Bound and listening before the server starts: a worker that asks before the
            # server has imported torch waits in the backlog.
            listener.bind(address)
            listener.listen(128)
            config = {
                "path": [entry for entry in sys.path if entry not in hidden],
                "listen_fd": listener.fileno(),
                "alive_fd": alive_r,
                "owner": os.getpid(),
                "preload": list(preload),
                "hidden": list(hidden),
                "directory": directory,
            }
            with open(os.path.join(directory, "server.log"), "ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, *_interpreter_flags(), "-c", BOOT, "scaledmm-fork-server"],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=log,
                    pass_fds=(listener.fileno(), alive_r),
                    start_new_session=True,  # Ctrl-C at the terminal is the run's to handle
                )
            try:
                if proc.stdin is not None:  # stdin=PIPE
                    with proc.stdin:
                        proc.stdin.write(repr(config).encode() + b"\n")
            except BrokenPipeError:
                pass  # it ended already: the workers cannot reach it, and say so
        except Exception as exc:  # no server: every child is spawned, as where there is none
            if proc is not None:
                proc.kill()
                proc.wait()
            os.close(alive_w)
            shutil.rmtree(directory, ignore_errors=True)
            _to_stderr(f"scaledmm: note: isolated children are spawned, each importing torch: no fork server ({exc})")
            return None
        finally:
            listener.close()  # the server's now: a dead server refuses connections
            os.close(alive_r)
        os.environ[ADDRESS_ENV] = address
        return cls(proc, directory, address, alive_w)

    def problem(self) -> str | None:
        """Why a child of this run was spawned rather than forked, if one was: the first reason
        the server refused one, or a worker could not ask it (either writes it down here)."""
        try:
            with open(os.path.join(self.directory, NOTE), encoding="utf-8") as handle:
                reason = handle.read().strip()
        except OSError:
            return None
        code = self.proc.poll()
        if code is not None:
            reason += f" (the server had ended, {_exit_words(code)}; its log ends: {self._log_tail()})"
        return reason or None

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.directory, "server.log"), encoding="utf-8", errors="replace") as handle:
                lines = [line.strip() for line in handle if line.strip()]
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(empty)"

    def close(self, say: Callable[[str], Any] | None = None) -> None:
        """Stop the server (it kills any child still alive) and remove its directory. Where some
        child was spawned instead of forked, `say` (stderr's print by default) gets one line
        that says why: the run was slower than it need be."""
        import shutil  # noqa: PLC0415  lazy: see start
        import subprocess  # noqa: PLC0415

        problem = self.problem()
        if os.environ.get(ADDRESS_ENV) == self.address:
            del os.environ[ADDRESS_ENV]
        if self._alive >= 0:
            os.close(self._alive)
            self._alive = -1
        if self.proc.poll() is None:
            self.proc.terminate()  # still importing: it ends at once; serving: it ends its children
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
        if problem:
            line = f"scaledmm: note: isolated children were spawned, each importing torch, not forked ready: {problem}"
            (say or _to_stderr)(line)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _note(directory: str, reason: str) -> None:
    """Write down why a child was not forked, unless a reason is there already (the first one
    is the one the owner says)."""
    try:
        with open(os.path.join(directory, NOTE), "x", encoding="utf-8") as handle:
            handle.write(reason)
    except OSError:
        pass


def _interpreter_flags() -> list[str]:
    """This Python's command-line flags (-W, -X ...), as multiprocessing gives a spawned child."""
    import subprocess  # noqa: PLC0415  lazy: see start

    flags = getattr(subprocess, "_args_from_interpreter_flags", None)
    return list(flags()) if callable(flags) else []


def _exit_words(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


# -- the worker's side ---------------------------------------------------------------------------

_UNUSABLE: dict[str, str] = {}  # server address -> why this process stopped asking it


def request_child(target: Callable, args: tuple):
    """Ask the run's fork server for a child that runs target(conn, *args): (ForkedChild, the
    worker's end of its pipe), or None where there is no server to ask (then spawn)."""
    address = os.environ.get(ADDRESS_ENV)
    if not address or address in _UNUSABLE or not available():
        return None
    import multiprocessing.connection  # noqa: PLC0415  lazy: see the module docstring

    mine, theirs = multiprocessing.connection.Pipe()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    request = {
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "sys_path": list(sys.path),
        "argv": list(sys.argv),
        "executable": sys.executable,
        "files": {name: getattr(sys.modules.get(name), "__file__", None) for name in SAME_FILES},
        "target": pickle.dumps((target, args)),
    }
    try:
        sock.settimeout(REQUEST_TIMEOUT_S)
        sock.connect(address)
        socket.send_fds(sock, [b"C"], [theirs.fileno()])
        _send(sock, request)
        sock.settimeout(None)
    except (OSError, pickle.PicklingError) as exc:
        sock.close()
        mine.close()
        stop_asking(f"a worker could not ask the fork server ({type(exc).__name__}: {exc})")
        return None
    finally:
        theirs.close()  # the child's now; it is the child's alone once the server forked
    return ForkedChild(sock), mine


def stop_asking(reason: str) -> None:
    """This process asks the run's server for no more children (they are spawned); the owner
    hears why, once."""
    address = os.environ.get(ADDRESS_ENV)
    if address and address not in _UNUSABLE:
        _UNUSABLE[address] = reason
        _note(os.path.dirname(address), reason)


class ForkedChild:
    """The worker's handle on a child the server forked: pid, is_alive, join, exitcode and kill,
    as multiprocessing.Process has them for a spawned one, from the server's messages."""

    def __init__(self, sock: socket.socket):
        self._sock: socket.socket | None = sock
        self._pid: int | None = None
        self.exitcode: int | None = None
        self.refused: str | None = None

    def _read(self, timeout: float | None) -> None:
        """Take the server's messages that arrive within `timeout` (0: those already here),
        until the one that says how the child ended or the end of the connection."""
        import select  # noqa: PLC0415  lazy: see the module docstring
        import time  # noqa: PLC0415

        deadline = None if timeout is None else time.monotonic() + timeout
        while self._sock is not None and self.exitcode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._sock], [], [], left)[0]:
                return
            try:
                message = _recv(self._sock)
            except OSError:
                message = None
            if message is None:  # the server is gone: so is the child (its parent-death signal)
                self._close()
                if self._pid is None and self.refused is None:
                    stop_asking("the fork server ended before it forked a child")
                return
            kind, value = message
            if kind == "pid":
                self._pid = value
            elif kind == "exit":
                self.exitcode = value
            elif kind == "refused":
                self.refused = value
                stop_asking(value)  # (the server wrote it down first)

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def pid(self) -> int | None:
        if self._pid is None:
            self._read(0)
        return self._pid

    def forked(self) -> bool:
        """Whether the server forked the child (False: it refused, or went away first)."""
        return self.pid is not None

    def is_alive(self) -> bool:
        self._read(0)
        if self._pid is None:
            return self._sock is not None and self.refused is None  # asked, not forked yet
        return self.exitcode is None and self._sock is not None

    def join(self, timeout: float | None = None) -> None:
        self._read(timeout)

    def kill(self) -> None:
        pid = self.pid
        if pid is not None and self.exitcode is None:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        """Let the server go of the child: it kills the child's group if it still runs and
        reaps it. Until then the child's pid, and its group's, name no other process."""
        self._close()


# -- the server ----------------------------------------------------------------------------------


class _Child:
    def __init__(self, control: socket.socket):
        self.control: socket.socket | None = control
        self.code: int | None = None  # how it exited, once it has (not yet reaped)


def serve(config: dict) -> None:
    """The server's process (started by ForkServer.start): import, then fork on request until
    the owner closes its pipe or dies."""
    import faulthandler  # noqa: PLC0415  lazy: see the module docstring

    faulthandler.enable(all_threads=True)  # to its log
    _parent_death_signal(signal.SIGTERM, config["owner"])
    listener = socket.socket(fileno=config["listen_fd"])
    alive = config["alive_fd"]
    for fd in (listener.fileno(), alive):
        os.set_inheritable(fd, False)
    # Ctrl-C is the run's to handle (the server is in a session of its own anyway); SIGTERM ends
    # the server at once until its loop handles it (then it kills its children first).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    env = dict(os.environ)  # what torch is imported under; a worker's must be the same
    unsound = _preload(config["preload"], config["hidden"]) or _unsound()
    _Server(listener, alive, config["directory"], unsound, env).loop(config["owner"])


def _parent_death_signal(number: int, parent: int) -> None:
    """Linux: the kernel sends this process `number` when its parent dies; a parent gone already
    (before the call) ends it now."""
    try:
        import ctypes  # noqa: PLC0415  lazy: see the module docstring

        ctypes.CDLL(None, use_errno=True).prctl(1, number)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != parent:
        os._exit(1)


def _preload(modules: list[str], hidden: list[str]) -> str | None:
    """Import the modules with the project's directories off sys.path, as a spawned child
    imports torch (isolate._child_main). A reason not to fork when torch itself fails; a later
    module may be missing on an older torch (the child's warm-up skips it too)."""
    import importlib  # noqa: PLC0415  lazy: see the module docstring
    import traceback  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    sys.path[:] = [entry for entry in sys.path if entry not in hidden]
    saved_env = {name: os.environ.get(name) for name in IMPORT_ONLY_ENV}
    os.environ.update(IMPORT_ONLY_ENV)
    restore_count = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # import noise; a child shows its own in its log
            for name in modules:
                try:
                    importlib.import_module(name)
                except Exception:
                    traceback.print_exc()
                    if name == "torch" or name.startswith("pytest_scaledmm"):
                        return f"importing {name} failed in the fork server (its log has why)"
                if name == "torch" and restore_count is None:
                    restore_count = _count_gpus_without_the_driver()
    finally:
        if restore_count is not None:
            restore_count()
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return None


def _count_gpus_without_the_driver() -> Callable[[], None] | None:
    """While the server imports, torch's CUDA device count comes from the kernel's list of
    NVIDIA GPUs instead of the driver: Inductor asks `torch.cuda.is_available()` at import
    (torch/_inductor/runtime/benchmarking.py), which runs cuInit, after which no fork may use
    CUDA. Only where the answer is the same: a CUDA build, every GPU visible
    (CUDA_VISIBLE_DEVICES unset) and the kernel's list readable. Returns the undo, or None
    (then the driver answers, and _unsound refuses to fork if it started)."""
    torch = sys.modules.get("torch")
    if torch is None or not getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None):
        return None
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return None
    try:
        count = len(os.listdir(NVIDIA_GPUS))
    except OSError:
        return None
    module = torch._C
    original = getattr(module, "_cuda_getDeviceCount", None)
    if original is None:
        return None
    module._cuda_getDeviceCount = lambda: count

    def restore() -> None:
        module._cuda_getDeviceCount = original

    return restore


def _unsound() -> str | None:
    """Why a fork of this process would not be a sound child, or None."""
    threads = _threads()
    if len(threads) > 1:
        return f"the fork server has {len(threads)} threads after its imports ({', '.join(threads)})"
    torch = sys.modules.get("torch")
    if torch is not None:
        if getattr(torch.version, "hip", None):
            return "a ROCm build of torch: a forked HIP runtime is not known to be sound"
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():
            return "torch initialised CUDA in the fork server"
    if _cuda_driver_initialised():
        return "the CUDA driver was initialised in the fork server"
    return None


def _threads() -> list[str]:
    try:
        tasks = sorted(os.listdir("/proc/self/task"))
    except OSError:
        import threading  # noqa: PLC0415  lazy: see the module docstring

        return [thread.name for thread in threading.enumerate()]
    names = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as handle:
                names.append(handle.read().strip())
        except OSError:
            names.append(task)
    return names


def _cuda_driver_initialised() -> bool:
    """Whether cuInit ran here: asked of the driver only when something loaded it already
    (cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED, 3, before cuInit)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            if "libcuda.so" not in handle.read():
                return False
    except OSError:
        return False
    import ctypes  # noqa: PLC0415  lazy: see the module docstring

    try:
        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        count = ctypes.c_int(0)
        return driver.cuDeviceGetCount(ctypes.byref(count)) != 3
    except (OSError, AttributeError):
        return True  # loaded but not answering: assume the worst


class _Server:
    def __init__(self, listener: socket.socket, alive: int, directory: str, unsound: str | None, env: dict):
        import selectors  # noqa: PLC0415  lazy: see the module docstring

        self.listener = listener
        self.alive = alive
        self.directory = directory
        self.unsound = unsound
        self.env = env
        # What the imports set in the environment (Inductor names its default cache dir there):
        # a spawned child's own imports set it too, so the child gets it over the worker's.
        self.imports_set = {name: value for name, value in os.environ.items() if env.get(name) != value}
        self.imports_unset = [name for name in env if name not in os.environ]
        self.children: dict[int, _Child] = {}
        self.stopping = False
        self.wake_r, self.wake_w = socket.socketpair()
        for end in (self.wake_r, self.wake_w):
            end.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(alive, selectors.EVENT_READ, "alive")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "signal")
        signal.set_wakeup_fd(self.wake_w.fileno())
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)

    def _stop(self, *_) -> None:
        self.stopping = True

    def loop(self, owner: int) -> None:
        try:
            while not self.stopping:
                for key, _ in self.selector.select(timeout=1.0):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "alive":
                        self.stopping = True  # the owner closed its end, or died
                    elif key.data == "signal":
                        self._drain()
                    else:
                        self._control(key.data)
                self._reap()
        finally:
            self._shutdown()
            if os.getppid() != owner:  # the owner died without closing it: nobody else cleans up
                import shutil  # noqa: PLC0415  lazy: see the module docstring

                shutil.rmtree(self.directory, ignore_errors=True)

    def _drain(self) -> None:
        try:
            while self.wake_r.recv(4096):
                pass
        except OSError:
            pass

    # requests
    def _accept(self) -> None:
        try:
            control, _ = self.listener.accept()
        except OSError:
            return
        fds: list[int] = []
        try:
            control.settimeout(REQUEST_TIMEOUT_S)
            creds = control.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", creds)
            if uid != os.getuid():
                raise OSError(f"a request from uid {uid}")
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
            for fd in fds:
                os.set_inheritable(fd, False)  # a compiler the child starts must not hold its pipe
            request = _recv(control)
            if len(fds) != 1 or request is None:
                raise OSError("an incomplete request")
        except Exception as exc:
            print(f"fork server: dropped a request: {exc}", flush=True)
            for fd in fds:
                os.close(fd)
            control.close()
            return
        try:
            reason = self._refusal(request)
            if reason is not None:
                self._refuse(control, reason)
            elif not _hung_up(control):
                self._fork(control, fds[0], request)
                return
            control.close()
        finally:
            os.close(fds[0])

    def _refusal(self, request: dict) -> str | None:
        if self.unsound:
            return self.unsound
        if request["executable"] != sys.executable:
            return f"the worker runs {request['executable']}, the fork server {sys.executable}"
        for name, path in request["files"].items():
            here = getattr(sys.modules.get(name), "__file__", None)
            if path is not None and path != here:  # (a worker that has not imported it: its child will)
                return f"the worker's {name} is {path}, the fork server's {here}"
        env = request["env"]
        differ = sorted(
            name
            for name in set(env) | set(self.env)
            if name not in PER_PROCESS_ENV and env.get(name) != self.env.get(name)
        )
        if differ:
            shown = ", ".join(differ[:5]) + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
            return f"the worker's environment differs from the one torch was imported under ({shown})"
        return None

    def _refuse(self, control: socket.socket, reason: str) -> None:
        print(f"fork server: refused: {reason}", flush=True)
        _note(self.directory, reason)
        try:
            _send(control, ("refused", reason))
        except OSError:
            pass

    def _fork(self, control: socket.socket, conn_fd: int, request: dict) -> None:
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # First: a server killed from here on takes the child with it (isolate.py's
                # _die_with_parent says the same again).
                _parent_death_signal(signal.SIGKILL, server)
                self._forget(control)
                code = _become_child(request, conn_fd, self)
            except BaseException:
                import traceback  # noqa: PLC0415  lazy: see the module docstring

                traceback.print_exc()
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
                os._exit(code)
        try:
            os.setpgid(pid, pid)  # as the child does first: a kill of the group reaches it at once
        except OSError:
            pass
        child = _Child(control)
        self.children[pid] = child
        import selectors  # noqa: PLC0415  lazy: see the module docstring

        self.selector.register(control, selectors.EVENT_READ, pid)
        try:
            _send(control, ("pid", pid))
        except OSError:
            self._release(pid)

    def _forget(self, control: socket.socket) -> None:
        """In a new child: nothing of the server's is its own (its signals, its sockets, the
        connections of the other children)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.selector.close()
        for sock in [self.listener, self.wake_r, self.wake_w, control]:
            sock.close()
        for child in self.children.values():
            if child.control is not None:
                child.control.close()
        os.close(self.alive)

    # the children
    def _control(self, pid: int) -> None:
        child = self.children.get(pid)
        if child is None or child.control is None:
            return
        try:
            data = child.control.recv(4096)
        except OSError:
            data = b""
        if not data:  # the worker let go of it, or died
            self._release(pid)

    def _release(self, pid: int) -> None:
        child = self.children[pid]
        if child.control is not None:
            self.selector.unregister(child.control)
            child.control.close()
            child.control = None
        _kill_group(pid)  # its leader unreaped until now: the group is still this child's
        self._reap()

    def _reap(self) -> None:
        for pid, child in list(self.children.items()):
            if child.code is None:
                try:
                    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    info = None
                    child.code = -signal.SIGKILL
                if info is not None:
                    child.code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                if child.code is not None and child.control is not None:
                    try:
                        _send(child.control, ("exit", child.code))
                    except OSError:
                        pass
            if child.code is not None and child.control is None:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                del self.children[pid]

    def _shutdown(self) -> None:
        import time  # noqa: PLC0415  lazy: see the module docstring

        for pid in list(self.children):
            _kill_group(pid)
        deadline = time.monotonic() + 5
        while self.children and time.monotonic() < deadline:
            for pid in list(self.children):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    del self.children[pid]
            time.sleep(0.01)


def _hung_up(control: socket.socket) -> bool:
    """Whether the worker closed the connection before the server came to its request."""
    import select  # noqa: PLC0415  lazy: see the module docstring

    if not select.select([control], [], [], 0)[0]:
        return False
    try:
        return control.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _become_child(request: dict, conn_fd: int, server: _Server) -> int:
    """Turn this fork into the worker's child: its environment, directory, sys.path and argv,
    then the target. Returns the exit status."""
    import importlib  # noqa: PLC0415  lazy: see the module docstring
    import multiprocessing.connection  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    env = request["env"]
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(server.imports_set)
    for name in server.imports_unset:
        os.environ.pop(name, None)
    tempfile.tempdir = None  # from the worker's TMPDIR, when asked
    try:
        os.chdir(request["cwd"])
    except OSError:
        pass
    sys.path[:] = request["sys_path"]
    sys.argv[:] = request["argv"]
    importlib.invalidate_caches()
    threads = env.get("OMP_NUM_THREADS")
    torch = sys.modules.get("torch")
    if torch is not None and threads != server.env.get("OMP_NUM_THREADS") and (threads or "").isdigit():
        # torch took its thread count at import, from the server's environment.
        torch.set_num_threads(max(1, int(threads or 1)))
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # as a new process seeds it (Python's random reseeds at fork itself)
    conn = multiprocessing.connection.Connection(os.dup(conn_fd))
    os.close(conn_fd)
    target, args = pickle.loads(request["target"])
    target(conn, *args)
    return 0
