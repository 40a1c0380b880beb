"""The run's fork server: isolated children forked ready from one process that imported torch
once (execution/forkserver.py), replaced from it after a crash, killed with their worker or the
server, and spawned as before wherever the server cannot start or refuses."""

import json
import os
import threading
import time
from pathlib import Path

import pytest

from matrices import matrix_text, planted
from pytest_scaledmm.execution import forkserver, isolate

pytestmark = pytest.mark.skipif(not forkserver.available(), reason="children are forked on Linux only")

KERNELS = [
    planted("ok", "records_process", module="planted_fork_kernels"),
    planted("aborts", module="planted_crash"),
]
AXES = {"scale_a": ["tensor_0d"], "scale_b": ["tensor_1d"], "mode": ["aot_eager"], "m": [4], "k": [32], "n": [16]}
PRELOAD = [*isolate.COMPILER_STACK, *isolate.CHILD_MODULES]


@pytest.fixture
def process_log(tmp_path, monkeypatch):
    """Where planted_fork_kernels.records_process says which process ran it (set before any
    server starts: a worker's environment must be the one the server imported torch under)."""
    path = tmp_path / "processes.jsonl"
    monkeypatch.setenv("SCALEDMM_TEST_PROCESS_LOG", str(path))
    monkeypatch.delenv(forkserver.ADDRESS_ENV, raising=False)

    def read() -> dict:
        """pid -> what that process said (its last line)."""
        if not path.exists():
            return {}
        return {record["pid"]: record for record in map(json.loads, path.read_text().splitlines())}

    return read


@pytest.fixture
def server(process_log):
    started = forkserver.ForkServer.start(PRELOAD, [])
    assert started is not None
    yield started
    started.close(say=lambda line: None)


@pytest.fixture
def spawns(monkeypatch):
    """The children started by spawn."""
    spawned = []
    real = isolate._spawn

    def spawn(*args):
        spawned.append(args)
        return real(*args)

    monkeypatch.setattr(isolate, "_spawn", spawn)
    return spawned


def _runner(tmp_path):
    """A ChildRunner on the CPU for KERNELS, and its cases by kernel."""
    from pytest_scaledmm.execution.run import RunContext
    from pytest_scaledmm.matrix.cases import generate_cases
    from pytest_scaledmm.matrix.kernels import resolve_kernels
    from pytest_scaledmm.matrix.spec import parse_spec

    spec = parse_spec(tmp_path / "matrix.yaml", matrix_text(KERNELS, AXES))
    cases, _ = generate_cases(spec, spec.profile("default"))
    ctx = RunContext(
        device="cpu",
        run_seed=spec.seed,
        kernel_specs={k.name: k for k in spec.kernels},
        kernels=resolve_kernels(spec.path, spec.kernels),
    )
    return isolate.ChildRunner(ctx, timeout=120, uses_inductor=False), {case.params.kernel: case for case in cases}


def _gone(pid: int, within: float = 30.0) -> bool:
    """Whether the process ends (or is a zombie nobody reaped) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _forked_pid(proc) -> int:
    deadline = time.monotonic() + 120  # the server may still be importing torch
    while proc.pid is None:
        assert proc.is_alive(), "the server did not fork the child"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return proc.pid


def test_a_child_is_forked_from_the_server_and_a_crashed_one_is_replaced_from_it(server, process_log, spawns, tmp_path):
    runner, cases = _runner(tmp_path)
    try:
        assert runner.run(cases["ok"]).outcome == "PASS"
        crashed = runner.run(cases["aborts"])
        assert crashed.signature == "CRASH: process killed by SIGABRT"
        assert "Fatal Python error: Aborted" in crashed.detail  # the child's own log, as spawned
        assert crashed.layer == "eager"
        assert runner.run(cases["ok"]).outcome == "PASS"
    finally:
        runner.close()
    assert spawns == []
    seen = process_log()
    assert len(seen) == 2  # the first child, and the one that replaced it
    for pid, record in seen.items():
        assert record["ppid"] == server.proc.pid  # forked by the server, not spawned here
        assert record["pgid"] == pid  # its own process group: a kill reaches its compile workers
        assert _gone(pid)
    assert runner.restarts == 1


def test_a_child_dies_when_its_worker_lets_go_and_when_the_server_dies(server, tmp_path):
    log = str(tmp_path / "child.log")
    first, conn = isolate._start_child(log, "cpu", False)
    assert isinstance(first, forkserver.ForkedChild)
    pid = _forked_pid(first)
    assert not _gone(pid, within=0.2)
    first.close()  # as a worker that dies closes its end: the server kills the child's group
    conn.close()
    assert _gone(pid)

    second, conn = isolate._start_child(log, "cpu", False)
    pid = _forked_pid(second)
    server.proc.kill()  # the child's parent-death signal
    assert _gone(pid)
    assert not second.is_alive()
    conn.close()
    second.close()


def test_without_a_server_children_are_spawned(process_log, spawns, tmp_path):
    # What macOS and Windows do, and a run whose server could not start.
    runner, cases = _runner(tmp_path)
    try:
        assert runner.run(cases["ok"]).outcome == "PASS"
    finally:
        runner.close()
    assert len(spawns) == 1
    assert [record["ppid"] for record in process_log().values()] == [os.getpid()]


def test_a_server_that_cannot_be_reached_means_spawned_children(process_log, spawns, tmp_path, monkeypatch):
    monkeypatch.setenv(forkserver.ADDRESS_ENV, str(tmp_path / "socket"))  # nobody listens there
    runner, cases = _runner(tmp_path)
    try:
        assert runner.run(cases["ok"]).outcome == "PASS"
        assert runner.run(cases["aborts"]).outcome == "CRASH"
        assert runner.run(cases["ok"]).outcome == "PASS"
    finally:
        runner.close()
    assert len(spawns) == 2  # the server was asked once, then never again
    assert all(record["ppid"] == os.getpid() for record in process_log().values())
    assert "could not ask the fork server" in (tmp_path / forkserver.NOTE).read_text()


def test_a_refused_child_is_spawned_and_the_owner_says_why_once(server, process_log, spawns, tmp_path, monkeypatch):
    # A variable torch may read at import, set after the server imported it: a fork would not be
    # the child a spawn gives.
    monkeypatch.setenv("TORCHINDUCTOR_FORK_SERVER_TEST", "1")
    runner, cases = _runner(tmp_path)
    try:
        assert runner.run(cases["ok"]).outcome == "PASS"
        assert runner.run(cases["aborts"]).outcome == "CRASH"
        assert runner.run(cases["ok"]).outcome == "PASS"
    finally:
        runner.close()
    assert len(spawns) == 2
    assert all(record["ppid"] == os.getpid() for record in process_log().values())
    said = []
    server.close(say=said.append)
    (line,) = said
    assert line.startswith("scaledmm: note: isolated children were spawned")
    assert "TORCHINDUCTOR_FORK_SERVER_TEST" in line


def test_a_server_never_forks_with_threads_or_a_cuda_driver_initialised(monkeypatch):
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="extra")
    thread.start()
    try:
        assert "threads after its imports" in forkserver._unsound()
    finally:
        stop.set()
        thread.join()
    monkeypatch.setattr(forkserver, "_threads", lambda: ["python"])
    monkeypatch.setattr(forkserver, "_cuda_driver_initialised", lambda: True)
    assert forkserver._unsound() == "the CUDA driver was initialised in the fork server"


def test_the_imports_start_no_thread_pool_and_leave_the_environment_as_it_was(monkeypatch, tmp_path):
    # A module that records what it was imported under: numpy's OpenBLAS reads this variable
    # when it loads and starts one thread per core without it.
    (tmp_path / "records_blas_threads.py").write_text(
        "import os\nSEEN = os.environ.get('OPENBLAS_NUM_THREADS')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    assert forkserver._preload(["records_blas_threads"], []) is None
    import records_blas_threads  # noqa: PLC0415

    assert records_blas_threads.SEEN == "1"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "8"


def test_inductor_asks_for_gpus_without_starting_the_cuda_driver(monkeypatch, tmp_path):
    import torch  # noqa: PLC0415

    gpus = tmp_path / "gpus"
    for bus in ("0000:00:06.0", "0000:00:07.0"):
        (gpus / bus).mkdir(parents=True)
    monkeypatch.setattr(forkserver, "NVIDIA_GPUS", str(gpus))
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def driver_count() -> int:  # stands for the driver's answer (a CPU build has none)
        raise AssertionError("the CUDA driver was asked")

    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", driver_count, raising=False)
    original = torch._C._cuda_getDeviceCount
    restore = forkserver._count_gpus_without_the_driver()
    assert restore is not None
    try:
        assert torch._C._cuda_getDeviceCount() == 2
    finally:
        restore()
    assert torch._C._cuda_getDeviceCount is original
    # Where the kernel's list may not be torch's answer, the driver answers (and the server
    # then refuses to fork if it started).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert forkserver._count_gpus_without_the_driver() is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(forkserver, "NVIDIA_GPUS", str(tmp_path / "no-driver"))
    assert forkserver._count_gpus_without_the_driver() is None
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(forkserver, "NVIDIA_GPUS", str(gpus))
    assert forkserver._count_gpus_without_the_driver() is None


# -- whole runs -------------------------------------------------------------------------------------


def test_under_xdist_one_server_forks_every_workers_children(matrix_project, pytester, process_log):
    # queue.py beside the matrix, named like a module torch imports: the server imports torch
    # without the project's directories on sys.path, as a spawned child does. (Not in the
    # directory pytest starts in: xdist's workers would import it themselves.)
    project = pytester.mkpydir("project")
    (project / "queue.py").write_text("raise RuntimeError('not the standard library queue')")
    (project / "matrix.yaml").write_text(matrix_text(KERNELS, {**AXES, "m": [4, 8, 12]}))
    pytester.makeini(f"[pytest]\npythonpath = {Path(__file__).parent}\n")
    result = matrix_project.run(
        "--scaledmm-matrix",
        "project/matrix.yaml",
        "--scaledmm-report",
        "report.json",
        "--no-scaledmm-triage",
        "-n",
        "2",
    )
    result.assert_outcomes(passed=3, failed=3)
    assert "scaledmm: note" not in result.stderr.str()
    seen = process_log()
    parents = {record["ppid"] for record in seen.values()}
    assert len(parents) == 1  # one server for the run
    (parent,) = {record["parent"] for record in seen.values()}
    assert "scaledmm-fork-server" in parent
    for record in seen.values():
        assert record["worker"] in ("gw0", "gw1")
        assert record["threads"] == int(record["omp"])  # the worker's share, not the server's
        assert "scaledmm-cache-" in record["tempdir"] and "scaledmm-cache-" in record["cache"]
    assert not os.environ.get(forkserver.ADDRESS_ENV)
    assert all(_gone(pid) for pid in parents | set(seen))


@pytest.mark.parametrize("how", ["exits-at-start", "preload-fails", "not-linux"])
def test_a_run_whose_server_cannot_fork_spawns_its_children(matrix_project, process_log, monkeypatch, how):
    if how == "exits-at-start":
        monkeypatch.setattr(forkserver, "_interpreter_flags", lambda: ["-c", "raise SystemExit(3)"])
    elif how == "preload-fails":
        monkeypatch.setattr(isolate, "CHILD_MODULES", (*isolate.CHILD_MODULES, "pytest_scaledmm.no_such_module"))
    else:
        monkeypatch.setattr(forkserver, "available", lambda: False)
    matrix_project.write_matrix(matrix_text(KERNELS, AXES))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", "--no-scaledmm-triage")
    result.assert_outcomes(passed=1, failed=1)
    assert [record["ppid"] for record in process_log().values()] == [os.getpid()]  # spawned by the run
    notes = [line for line in result.stderr.lines if line.startswith("scaledmm: note")]
    if how == "not-linux":
        assert notes == []  # nothing to say: the platform spawns
    else:
        (note,) = notes
        assert note.startswith("scaledmm: note: isolated children were spawned, each importing torch")
        expected = {"exits-at-start": "exit status 3", "preload-fails": "pytest_scaledmm.no_such_module"}[how]
        assert expected in note
    assert not os.environ.get(forkserver.ADDRESS_ENV)


def test_collecting_leaves_no_fork_server(matrix_project, process_log):
    matrix_project.write_matrix(matrix_text(KERNELS[:1], AXES))
    matrix_project.run("--scaledmm-matrix", "--collect-only").assert_outcomes()
    assert _fork_servers_of_this_process() == set()
    assert not os.environ.get(forkserver.ADDRESS_ENV)


def _fork_servers_of_this_process() -> set:
    found = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                _, rest = handle.read().rsplit(")", 1)
            state, parent = rest.split()[:2]
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                named = b"scaledmm-fork-server" in handle.read()
        except (OSError, ValueError):
            continue
        if named and int(parent) == os.getpid() and state != "Z":
            found.add(int(entry))
    return found
