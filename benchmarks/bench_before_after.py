"""A profile's wall time under this checkout and under an earlier commit, side by side in one run.

    python benchmarks/bench_before_after.py --before 3b11432 --profile default -n 2

Each side is one `pytest --scaledmm-matrix` run in a child process, the earlier commit from a
temporary git worktree put first on PYTHONPATH (its own matrix.yaml), this checkout as it is;
the two run one after the other on the same machine. Prints cases, reference-checked cases,
wall seconds, cases per second and the ratio after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(root: Path, profile: str, workers: int) -> dict:
    report = Path(tempfile.mkdtemp(prefix="bench-ba-")) / "report.json"
    env = {**os.environ, "PYTHONPATH": str(root)}
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
        str(root / "matrix.yaml"),
        "--scaledmm-profile",
        profile,
        "--scaledmm-report",
        str(report),
    ]
    if workers > 1:
        cmd += ["-n", str(workers)]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if not report.exists():
        raise SystemExit(f"no report from {root}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    data = json.loads(report.read_text())
    checked = data.get("coverage", {}).get("cases", {}).get("reference_checked_valid")
    outcomes: dict = {}
    for case in data["cases"]:
        outcomes[case["outcome"]] = outcomes.get(case["outcome"], 0) + 1
    return {
        "wall": wall,
        "cases": len(data["cases"]),
        "checked": checked,
        "exit": done.returncode,
        "outcomes": dict(sorted(outcomes.items(), key=lambda item: -item[1])),
        "production": data.get("coverage", {}).get("production"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--profile", default="default")
    parser.add_argument("-n", "--workers", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-before-") as folder:
        worktree = Path(folder) / "before"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), args.before],
            check=True,
            capture_output=True,
        )
        try:
            before = run(worktree, args.profile, args.workers)
            after = run(REPO, args.profile, args.workers)
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)], capture_output=True
            )
    print(f"profile {args.profile}, -n {args.workers}, {os.cpu_count()} cores")
    for label, figures in (("before " + args.before, before), ("after (this checkout)", after)):
        print(
            f"  {label:24} {figures['cases']:5d} cases, {figures['checked']} reference-checked valid, "
            f"{figures['wall']:7.1f} s, {figures['cases'] / figures['wall']:.2f} cases/s, exit {figures['exit']}"
        )
        print(f"    outcomes: {figures['outcomes']}")
        if figures["production"]:
            print(f"    production data: {json.dumps(figures['production'])}")
    print(f"  wall after / before: {after['wall'] / before['wall']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
