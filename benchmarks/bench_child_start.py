"""How long an isolated child takes to start, and to be replaced after a crash: spawned, forked
by the run's fork server, and forked by multiprocessing's own per-process "forkserver", side by
side in one run.

    python benchmarks/bench_child_start.py --repeat 3
    python benchmarks/bench_child_start.py --repeat 3 --no-inductor

Each repeat, in this order and in this process (which imports torch, as an xdist worker does):
- spawn: a ChildRunner without a fork server; its first child's start (the case's startup_s: the
  spawn, torch and the compiler stack imported, the kernels loaded), then a case that aborts its
  process and the start of the child that replaces it;
- fork server: ForkServer.start, then the same runner (its first child waits for the server's
  imports), a second runner whose child the warm server forks ready, and the restart after the
  same crash;
- multiprocessing's "forkserver" with set_forkserver_preload (in a fresh process, for its own
  server): the first child (the server's imports, then a fork) and the second. What one such
  server per xdist worker would save.
The load average is printed before and after: on a shared machine compare figures of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the planted kernels of the test suite

AXES = {"scale_a": ["tensor_0d"], "scale_b": ["tensor_1d"], "mode": ["aot_eager"], "m": [4], "k": [32], "n": [16]}


def runner_and_cases(work: Path, uses_inductor: bool):
    from matrices import matrix_text, planted
    from pytest_scaledmm.execution.isolate import ChildRunner
    from pytest_scaledmm.execution.run import RunContext
    from pytest_scaledmm.matrix.cases import generate_cases
    from pytest_scaledmm.matrix.kernels import resolve_kernels
    from pytest_scaledmm.matrix.spec import parse_spec

    kernels = [planted("ok", "correct", module="planted_crash"), planted("aborts", module="planted_crash")]
    spec = parse_spec(work / "matrix.yaml", matrix_text(kernels, AXES))
    cases, _ = generate_cases(spec, spec.profile("default"))
    ctx = RunContext(
        device="cpu",
        run_seed=spec.seed,
        kernel_specs={k.name: k for k in spec.kernels},
        kernels=resolve_kernels(spec.path, spec.kernels),
    )
    return ChildRunner(ctx, timeout=300, uses_inductor=uses_inductor), {c.params.kernel: c for c in cases}


def first_child_and_restart(work: Path, uses_inductor: bool, crash: bool = True) -> dict:
    """The first child's start (startup_s of the first case) and, after a crash, its replacement's."""
    runner, cases = runner_and_cases(work, uses_inductor)
    try:
        start = time.perf_counter()
        runner.start()
        first = runner.run(cases["ok"])
        assert first.outcome == "PASS", first.signature
        figures = {"first_s": runner.take_startup_seconds(), "first_wall_s": time.perf_counter() - start}
        if crash:
            crashed = runner.run(cases["aborts"])
            assert crashed.outcome == "CRASH", crashed.signature
            runner.take_startup_seconds()
            again = runner.run(cases["ok"])
            assert again.outcome == "PASS", again.signature
            figures["restart_s"] = runner.take_startup_seconds()
        return figures
    finally:
        runner.close()


def spawned(work: Path, uses_inductor: bool) -> dict:
    from pytest_scaledmm.execution.forkserver import ADDRESS_ENV

    assert not os.environ.get(ADDRESS_ENV)
    return first_child_and_restart(work, uses_inductor)


def forked(work: Path, uses_inductor: bool) -> dict:
    from pytest_scaledmm.execution.forkserver import ForkServer
    from pytest_scaledmm.execution.isolate import CHILD_MODULES, COMPILER_STACK, INDUCTOR

    preload = [*COMPILER_STACK, *(INDUCTOR if uses_inductor else ()), *CHILD_MODULES]
    started = time.perf_counter()
    server = ForkServer.start(preload, [])
    assert server is not None
    try:
        cold = first_child_and_restart(work, uses_inductor, crash=False)
        cold["first_wall_s"] = time.perf_counter() - started
        warm = first_child_and_restart(work, uses_inductor)
        problem = server.problem()
        assert problem is None, problem
    finally:
        server.close()
    return {
        "cold_server_first_s": cold["first_s"],
        "cold_server_first_wall_s": cold["first_wall_s"],
        "first_s": warm["first_s"],
        "restart_s": warm["restart_s"],
    }


MP_PROBE = """
import json, multiprocessing as mp, sys, time
def ready(conn):
    conn.send(time.perf_counter())
if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(json.loads(sys.argv[1]))
    out = []
    for _ in range(2):
        a, b = ctx.Pipe()
        start = time.perf_counter()
        p = ctx.Process(target=ready, args=(b,))
        p.start()
        b.close()
        out.append(a.recv() - start)
        p.join()
    print(json.dumps(out))
"""


def mp_forkserver(work: Path, uses_inductor: bool) -> dict:
    from pytest_scaledmm.execution.isolate import COMPILER_STACK, INDUCTOR

    preload = [*COMPILER_STACK, *(INDUCTOR if uses_inductor else ())]
    script = work / "mp_probe.py"
    script.write_text(MP_PROBE)
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(script), json.dumps(preload)], capture_output=True, text=True, check=True
    )
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    return {"first_s": first, "second_s": second}


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-inductor", action="store_true", help="the stack without Inductor")
    args = parser.parse_args(argv)
    uses_inductor = not args.no_inductor
    from pytest_scaledmm.execution.quiet import import_torch

    import_torch()  # as a worker has
    results: dict[str, list[dict]] = {"spawn": [], "fork server": [], "multiprocessing forkserver": []}
    print(f"load average before: {load()}", flush=True)
    methods = (("spawn", spawned), ("fork server", forked), ("multiprocessing forkserver", mp_forkserver))
    for repeat in range(args.repeat):
        for name, measure in methods:
            with tempfile.TemporaryDirectory(prefix="bench-child-") as work:
                figures = measure(Path(work), uses_inductor)
            results[name].append(figures)
            shown = ", ".join(f"{key} {value:.3f}" for key, value in figures.items())
            print(f"[{repeat + 1}] {name}: {shown} (load {load()})", flush=True)
    print(f"load average after: {load()}\n")
    print("| start method | figure | median s | min-max s |")
    print("| --- | --- | --- | --- |")
    for name, runs in results.items():
        for key in runs[0]:
            values = [run[key] for run in runs]
            print(f"| {name} | {key} | {statistics.median(values):.3f} | {min(values):.3f}-{max(values):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
