"""Benchmark a matrix profile on this machine's device and print the figures of the speed budget.

    python benchmarks/bench_matrix.py --profile smoke
    python benchmarks/bench_matrix.py --profile default -n 8 --configs 0,4

Prints, per run: cases, wall, cases/s, share of case time spent compiling, median case time per
compile mode, time from start to the first failure signature, and the harness overhead against
a bare loop running the same cases through the same eager -> compile -> check pipeline
(verdict/pipeline.py: same inputs, compile settings and checks) without pytest, isolation or
reports, measured side by side. Ratios only: these machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TICK = re.compile(r"\[scaledmm \+([\d.]+)s\] new signature")


def run_harness(args, configs: int, extra: list[str]) -> dict:
    """One `pytest --scaledmm-matrix` run in a child process; wall from the parent's clock."""
    report = Path(tempfile.mkdtemp(prefix="bench-")) / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-W",
        "ignore",
        "--scaledmm-matrix",
        str(args.matrix),
        "--scaledmm-profile",
        args.profile,
        "--scaledmm-report",
        str(report),
        "--scaledmm-device",
        args.device,
        "--scaledmm-max-autotune-configs",
        str(configs),
        *extra,
    ]
    if args.workers > 1:
        cmd += ["-n", str(args.workers)]
    start = time.perf_counter()
    first_failure = None
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO) as proc:
        for line in proc.stdout:
            # The summary lists each new signature with the time it appeared.
            found = TICK.search(line)
            if first_failure is None and found:
                first_failure = float(found.group(1))
    wall = time.perf_counter() - start
    data = json.loads(report.read_text())
    return {"wall": wall, "first_failure": first_failure, "report": data, "returncode": proc.returncode}


def case_seconds(case: dict) -> float:
    t = case.get("timing") or {}
    return t.get("eager_s", 0.0) + t.get("compile_s", 0.0) + t.get("run_s", 0.0)


def bare_loop(args, configs: int) -> dict:
    """The cases through the run's pipeline, without pytest, isolation, opcheck or reports."""
    code = f"""
import json, sys, time, torch
from pytest_scaledmm.matrix.spec import load_spec
from pytest_scaledmm.matrix.case_params import input_seed
from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.kernels import resolve_kernels
from pytest_scaledmm.matrix.compile_modes import compile_settings
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.oracle import case_checker
from pytest_scaledmm.verdict.pipeline import eager_compile_check
from pytest_scaledmm.execution.device import resolve_device
from pytest_scaledmm.plugin.session import target_arch  # the cases the run generates for this device
spec = load_spec({str(args.matrix)!r})
cases, _ = generate_cases(spec, spec.profile({args.profile!r}), target_arch({args.device!r}))
kernels = resolve_kernels(spec.path, spec.kernels); device = resolve_device({args.device!r})
start = time.perf_counter()
for case in cases:
    p = case.params
    try:
        x = make_inputs(p, input_seed(spec.seed, case.id), device)
    except Exception:
        continue
    k = kernels[p.kernel]
    def fn(a, b, sa, sb, bias, k=k, od=x.out_dtype, fa=x.use_fast_accum):
        return k(a, b, sa, sb, bias=bias, out_dtype=od, use_fast_accum=fa)
    eager_compile_check(fn, x.args(), compile_settings(p.mode, {configs}), device, case_checker(p, x, spec.slack))
print(json.dumps({{"wall": time.perf_counter() - start, "cases": len(cases)}}))
"""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="bench-bare-"))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    total = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"bare loop failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    data["process_wall"] = total
    return data


def describe(label: str, run: dict) -> list[str]:
    cases = run["report"]["cases"]
    ran = [c for c in cases if c["outcome"] != "SKIPPED"]
    per_mode = defaultdict(list)
    for c in ran:
        per_mode[c["params"]["mode"]].append(case_seconds(c))
    compile_s = sum((c.get("timing") or {}).get("compile_s", 0.0) for c in ran)
    case_s = sum(case_seconds(c) for c in ran)
    env = run["report"]["environment"]
    lines = [
        f"== {label}: {env.get('device_name')} [{env.get('arch')}] torch {env.get('torch')}",
        f"cases {len(cases)} (ran {len(ran)}), wall {run['wall']:.1f} s, {len(cases) / run['wall']:.2f} cases/s",
        f"compile share of case time {compile_s / case_s:.0%}" if case_s else "compile share n/a",
        "first failure signature at " + (f"{run['first_failure']:.1f} s" if run["first_failure"] else "(no failure)"),
        "outcomes: " + ", ".join(f"{k} {v}" for k, v in run["report"]["summary"].items()),
        "cases per device: "
        + ", ".join(
            f"{d} {n}" for d, n in sorted(Counter((c.get("extra") or {}).get("device") or "?" for c in ran).items())
        ),
        "median case seconds per mode: "
        + ", ".join(f"{m} {statistics.median(v):.2f} (n={len(v)})" for m, v in sorted(per_mode.items())),
    ]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", type=Path, default=REPO / "matrix.yaml")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--device", default="auto")
    parser.add_argument("-n", "--workers", type=int, default=1)
    parser.add_argument(
        "--configs", default="4", help="comma list of --scaledmm-max-autotune-configs values to compare"
    )
    parser.add_argument("--no-bare", action="store_true", help="skip the bare-loop comparison")
    parser.add_argument("--isolate", default="yes", choices=["yes", "no"])
    parser.add_argument(
        "--triage", action="store_true", help="keep triage on (off by default here: it is not case time)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--first-failure", action="store_true", help="pass --scaledmm-first-failure")
    parser.add_argument("-k", dest="select", help="pytest -k expression selecting cases (harness runs only)")
    args = parser.parse_args(argv)
    extra = [f"--scaledmm-isolate={args.isolate}"] + ([] if args.triage else ["--no-scaledmm-triage"])
    extra += ["--scaledmm-first-failure"] if args.first_failure else []
    extra += ["-k", args.select] if args.select else []
    figures = {}
    for configs in [int(c) for c in args.configs.split(",")]:
        run = run_harness(args, configs, extra)
        label = f"harness, max-autotune configs {configs or 'full'}, -n {args.workers}, isolate {args.isolate}"
        print("\n".join(describe(label, run)), flush=True)
        figures[label] = {
            "wall": run["wall"],
            "first_failure": run["first_failure"],
            "cases": len(run["report"]["cases"]),
        }
        if args.json:
            (args.json.parent / f"{args.json.stem}_report{configs}.json").write_text(json.dumps(run["report"]))
        if not args.no_bare and args.workers == 1:
            bare = bare_loop(args, configs)
            overhead = run["wall"] / bare["process_wall"] - 1
            print(
                f"bare loop: {bare['cases']} cases, loop {bare['wall']:.1f} s, process {bare['process_wall']:.1f} s;"
                f" harness overhead {overhead:+.1%} (process walls, side by side)",
                flush=True,
            )
            figures[label]["bare_process_wall"] = bare["process_wall"]
            figures[label]["overhead"] = overhead
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
