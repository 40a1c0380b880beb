"""Throughput of a matrix run on this machine's device: cold and warm, side by side in one run.

    python benchmarks/bench_throughput.py --profiles default,full -n 14
    python benchmarks/bench_throughput.py --profiles default -n 14 --base-tree /tmp/main-of-today
    python benchmarks/bench_throughput.py --runs readme --base-tree /tmp/main-of-today

Each profile runs cold (an empty Inductor/Triton cache) then warm (the same cache again, as a CI
job that restores it), through `pytest --scaledmm-matrix -n N --scaledmm-reuse-cache`. Printed
per run: wall, checked valid cases a minute, the sums of compile / eager / compiled run /
reference check / child start-up / triage / harness seconds, the workers' busy fraction, the
longest case, the lower bound these imply (the longer of the longest case and the summed case
time over the workers), the FX graph cache's hits, and from the report's session.phases when the
workers' first cases began (median and latest, seconds after the run's start) and the seconds
after its last record (teardown and the report). With --base-tree the profile also runs
cold under that checkout's plugin, and the ids and outcomes of the two cold runs are compared:
nothing in the verdict may change for speed.

`--runs readme` runs the README's main job as written, in the checkout: `pytest --scaledmm-matrix
-n auto` (its matrix.yaml, a fresh cache of its own, xdist's worker count), its report written
outside the checkout; with --base-tree the base checkout's main job runs first, the same way.
Every row also prints wall ÷ bound: what the run spends beyond its cases' own time.

"Checked valid": a case of a valid configuration (model purpose `valid`) whose outcome is a
verdict (not skipped, unsupported, a harness error or a timeout).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOT_A_VERDICT = {"SKIPPED", "UNSUPPORTED", "HARNESS_ERROR", "TIMEOUT"}
# Timing fields summed per run; case_s is each case's whole time in its worker.
PARTS = {
    "compile": ("compile_s", "export_s", "package_s", "load_s"),
    "eager": ("eager_s", "eager_run_s", "eager_other_m_s", "eager_sequence_s"),
    "run": ("run_s", "other_m_s"),
    "check": ("check_s",),
    "startup": ("startup_s",),
    "triage": ("triage_s", "opcheck_s", "replay_alone_s", "shrink_s"),
}


def plugin_installed() -> bool:
    """Whether this Python loads the plugin by its entry point (else -p names it)."""
    from importlib.metadata import entry_points  # noqa: PLC0415

    return any(e.value.startswith("pytest_scaledmm") for e in entry_points(group="pytest11"))


def pytest_command(matrix: Path, profile: str, workers: int, report: Path) -> list[str]:
    load = [] if plugin_installed() else ["-p", "pytest_scaledmm.plugin.entry"]
    return [
        sys.executable,
        "-m",
        "pytest",
        *load,
        "-p",
        "no:cacheprovider",
        "-q",
        "--tb=no",
        "-rN",
        "-W",
        "ignore",
        "--scaledmm-matrix",
        str(matrix),
        "--scaledmm-profile",
        profile,
        "--scaledmm-report",
        str(report),
        "--scaledmm-reuse-cache",
        "-n",
        str(workers),
    ]


def readme_command(report: Path) -> list[str]:
    """The README's main job, its report sent to `report` (the rest as the README has it)."""
    load = [] if plugin_installed() else ["-p", "pytest_scaledmm.plugin.entry"]
    return [sys.executable, "-m", "pytest", *load, "--scaledmm-matrix", "-n", "auto", "--scaledmm-report", str(report)]


def started_workers(log: Path) -> int:
    """The workers xdist says it started (`-n auto` decides in the run)."""
    text = log.read_text(errors="replace")
    found = re.search(r"^(\d+) workers? \[", text, re.MULTILINE) or re.search(
        r"^created: (\d+)/\d+ workers?", text, re.MULTILINE
    )
    if not found:
        raise SystemExit(f"no 'N workers [...]' line from xdist in {log}: the worker count is unknown")
    return int(found.group(1))


def run_once(tree: Path, matrix: Path, profile: str, workers: int, cache: Path, work: Path, label: str) -> dict:
    """One run in a fresh process, in `work` (whose earlier report, if any, orders its cases);
    its wall from this process's clock, its report read back."""
    work.mkdir(parents=True, exist_ok=True)
    report = work / f"{label}.json"
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
    env["TRITON_CACHE_DIR"] = str(cache / "triton")
    return timed_run(pytest_command(matrix, profile, workers, report), tree, work, env, workers, label, report)


def run_readme(tree: Path, work: Path, label: str) -> dict:
    """The README's main job in the checkout `tree`, with the caches the plugin makes for it."""
    fresh_dir(work)
    report = work / f"{label}.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    run = timed_run(readme_command(report), tree, tree, env, 0, label, report)
    run["workers"] = started_workers(report.with_suffix(".log"))
    return run


def fresh_dir(path: Path) -> None:
    """An empty directory: a report left there by an earlier benchmark would order the run's cases."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


def timed_run(command: list[str], tree: Path, cwd: Path, env: dict, workers: int, label: str, report: Path) -> dict:
    """`command` in a fresh process importing the plugin from `tree`: its wall from this
    process's clock, its report read back."""
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("GITHUB_STEP_SUMMARY", None)  # a benchmark's runs are not the CI job's summary
    log = report.with_suffix(".log")
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=out)
    wall = time.perf_counter() - start
    # 0: every case passed; 1: some failed. Anything else (a usage error, a crash, an interrupt)
    # or a report the run did not finish is no figure: the placeholder a run claims its path
    # with exists from its start.
    data = json.loads(report.read_text()) if report.exists() else {}
    if proc.returncode not in (0, 1) or (data.get("session") or {}).get("complete") is not True:
        raise SystemExit(f"{label}: the run failed (exit {proc.returncode}, no complete report); see {log}")
    return {"label": label, "wall": wall, "workers": workers, "returncode": proc.returncode, "report": data}


def case_seconds(case: dict) -> float:
    timing = case.get("timing") or {}
    whole = timing.get("case_s")
    if isinstance(whole, (int, float)):
        return float(whole)
    return float(sum(v for v in timing.values() if isinstance(v, (int, float))))


def _compile_seconds(case: dict) -> float:
    return float((case.get("timing") or {}).get("compile_s") or 0.0)


def checked_valid(case: dict) -> bool:
    purpose = (case.get("model") or {}).get("purpose") or case["params"].get("purpose", "valid")
    return purpose == "valid" and case["outcome"] not in NOT_A_VERDICT


def session_phases(report: dict) -> dict:
    """From the report's session.phases (a checkout without it: none): when the workers' first
    cases began (median, latest), the longest generation, and the session's seconds after its
    last record (teardown and the report)."""
    session = report.get("session") or {}
    phases = session.get("phases") or {}
    processes = phases.get("processes") or {}
    starts = sorted(p["first_case_s"] for p in processes.values() if isinstance(p.get("first_case_s"), (int, float)))
    generation = [p["generation_s"] for p in processes.values() if isinstance(p.get("generation_s"), (int, float))]
    last, wall = phases.get("last_record_s"), session.get("wall_s")
    return {
        "first_case_median_s": starts[len(starts) // 2] if starts else None,
        "first_case_latest_s": starts[-1] if starts else None,
        "generation_max_s": round(max(generation), 2) if generation else None,
        "after_last_record_s": round(wall - last, 2) if isinstance(last, (int, float)) and wall else None,
    }


def figures(run: dict) -> dict:
    cases = run["report"]["cases"]
    sums = {name: 0.0 for name in PARTS}
    for case in cases:
        timing = case.get("timing") or {}
        for name, keys in PARTS.items():
            sums[name] += sum(float(timing.get(key) or 0.0) for key in keys)
    total = sum(case_seconds(c) for c in cases)
    sums["harness"] = max(0.0, total - sum(sums.values()))
    longest = max(cases, key=case_seconds) if cases else None
    valid = sum(1 for c in cases if checked_valid(c))
    workers = run["workers"]
    bound = max(total / workers, case_seconds(longest) if longest else 0.0)
    cache = (run["report"].get("session") or {}).get("compile_cache") or {}
    return {
        "label": run["label"],
        "workers": run["workers"],
        "cases": len(cases),
        "checked_valid": valid,
        "wall_s": round(run["wall"], 1),
        "checked_valid_per_min": round(valid / run["wall"] * 60, 1),
        "sums_s": {k: round(v, 1) for k, v in sums.items()},
        "case_s_sum": round(total, 1),
        "busy": round(total / (workers * run["wall"]), 3),
        "longest_s": round(case_seconds(longest), 1) if longest else 0.0,
        "longest_id": longest["id"] if longest else None,
        "longest_compile_s": round(max((_compile_seconds(c) for c in cases), default=0.0), 1),
        "lower_bound_s": round(bound, 1),
        "wall_over_bound": round(run["wall"] / bound, 2) if bound else None,
        "cache": cache,
        "returncode": run["returncode"],
        "summary": run["report"].get("summary"),
        "phases": session_phases(run["report"]),
    }


def outcome_changes(before: dict, after: dict) -> list[str]:
    """Ids missing on either side, and ids whose outcome differs."""
    old = {c["id"]: c["outcome"] for c in before["cases"]}
    new = {c["id"]: c["outcome"] for c in after["cases"]}
    lines = [f"only before: {i}" for i in sorted(old.keys() - new.keys())]
    lines += [f"only after: {i}" for i in sorted(new.keys() - old.keys())]
    lines += [f"{i}: {old[i]} -> {new[i]}" for i in sorted(old.keys() & new.keys()) if old[i] != new[i]]
    return lines


def table(rows: list[dict]) -> str:
    head = (
        "| run | workers | wall s | checked valid | /min | busy | compile | eager | run | check | start-up | triage"
        " | harness | longest s (compile) | bound s | wall/bound | FX cache hit/miss | first case s (median/latest)"
        " | after last record s |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for f in rows:
        s = f["sums_s"]
        lines.append(
            f"| {f['label']} | {f['workers']} | {f['wall_s']} | {f['checked_valid']}/{f['cases']} |"
            f" {f['checked_valid_per_min']} | {f['busy']:.0%} | {s['compile']} | {s['eager']} | {s['run']} |"
            f" {s['check']} | {s['startup']} |"
            f" {s['triage']} | {s['harness']} | {f['longest_s']} ({f['longest_compile_s']}) | {f['lower_bound_s']} |"
            f" {f['wall_over_bound']} | {f['cache'].get('hit', '?')}/{f['cache'].get('miss', '?')} |"
            f" {_shown(f['phases']['first_case_median_s'])}/{_shown(f['phases']['first_case_latest_s'])} |"
            f" {_shown(f['phases']['after_last_record_s'])} |"
        )
    return "\n".join(lines)


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def readme_runs(base_tree: Path | None, work: Path, rows: list[dict], compared: dict) -> None:
    """The README's main job under the base checkout (when given), then this one; each in a
    directory of its own, so that neither orders its cases by the other's report."""
    runs = {}
    for label, tree in (("readme-base", base_tree), ("readme", REPO)):
        if tree is None:
            continue
        runs[label] = run_readme(tree.resolve(), work / label, label)
        rows.append(figures(runs[label]))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
        (work / "figures.json").write_text(json.dumps({"runs": rows, "outcome_changes": compared}, indent=1))
    if len(runs) == 2:
        compared["readme"] = comparable_changes(runs["readme-base"]["report"], runs["readme"]["report"])


def comparable_changes(before: dict, after: dict) -> list[str] | None:
    """outcome_changes, or None when the two ran different matrix files (their ids differ by
    design: a base checkout's own matrix.yaml of another day)."""
    if before["matrix"].get("hash") != after["matrix"].get("hash"):
        return None
    return outcome_changes(before, after)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", type=Path, default=REPO / "matrix.yaml")
    parser.add_argument("--profiles", default="default")
    parser.add_argument("-n", "--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--base-tree", type=Path, help="an earlier checkout: its cold run's outcomes are compared")
    parser.add_argument(
        "--runs",
        default="cold,warm",
        help="of cold, warm (reuses the cold run's cache) and readme (the README's main job), comma-separated",
    )
    parser.add_argument("--out", type=Path, help="directory for the reports, logs and figures.json")
    args = parser.parse_args(argv)
    work = args.out or Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    work.mkdir(parents=True, exist_ok=True)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = sorted(set(runs) - {"cold", "warm", "readme"})
    if unknown:
        parser.error(f"--runs: unknown run(s) {', '.join(unknown)} (cold, warm, readme)")
    if not runs or len(set(runs)) != len(runs):
        parser.error(f"--runs: each of cold, warm and readme at most once, at least one: {args.runs!r}")
    if "warm" in runs and ("cold" not in runs or runs.index("warm") < runs.index("cold")):
        parser.error("--runs: warm reuses the cold run's cache: give cold before it")
    rows: list[dict] = []
    compared: dict[str, list[str] | None] = {}
    if "readme" in runs:
        runs.remove("readme")
        readme_runs(args.base_tree, work, rows, compared)
    for profile in [p for p in args.profiles.split(",") if p] if runs else []:
        cache = Path(tempfile.mkdtemp(prefix=f"bench-cache-{profile}-"))
        cold = None
        if args.base_tree:
            base_cache = Path(tempfile.mkdtemp(prefix=f"bench-cache-base-{profile}-"))
            label = f"{profile}-base-cold"
            base_tree, matrix = args.base_tree.resolve(), args.matrix.resolve()
            fresh_dir(work / label)  # cold: no report of an earlier benchmark to order its cases
            base = run_once(base_tree, matrix, profile, args.workers, base_cache, work / label, label)
            rows.append(figures(base))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
            shutil.rmtree(base_cache, ignore_errors=True)
        fresh_dir(work / profile)
        for kind in runs:
            # Cold starts with no earlier report; warm has the cold run's, as a CI job that keeps both.
            label = f"{profile}-{kind}"
            run = run_once(REPO, args.matrix.resolve(), profile, args.workers, cache, work / profile, label)
            rows.append(figures(run))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
            # Written after every run: a run cut short by a time limit keeps the earlier figures.
            (work / "figures.json").write_text(json.dumps({"runs": rows, "outcome_changes": compared}, indent=1))
            cold = run if kind == "cold" else cold
        if args.base_tree and cold is not None:
            compared[profile] = comparable_changes(base["report"], cold["report"])
        shutil.rmtree(cache, ignore_errors=True)
    (work / "figures.json").write_text(json.dumps({"runs": rows, "outcome_changes": compared}, indent=1))
    print(f"\nreports and logs in {work}\n")
    print(table(rows))
    for profile, changes in compared.items():
        if changes is None:
            print(f"\n{profile}: base vs this: different matrix files (their hashes differ): ids not compared")
            continue
        verdict = "identical ids and outcomes" if not changes else f"{len(changes)} difference(s)"
        print(f"\n{profile}: base vs this: {verdict}")
        for line in changes[:20]:
            print(f"  {line}")
    return 1 if any(compared.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
