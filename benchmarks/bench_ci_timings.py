"""The README's two commands timed under this checkout and under an earlier commit, side by side in
one run:

    python benchmarks/bench_ci_timings.py --before f798d71

1. the main job, `pytest --scaledmm-matrix -n auto` (the report goes to a temporary file, not
   the project's report directory);
2. the test command, `pytest -n 2` (each side's own tests and tier selection).

The earlier commit runs from a temporary git worktree put first on PYTHONPATH, as
bench_before_after.py does; the four runs go one after the other on the same machine. Prints
wall seconds, pytest's own last line and the ratios after / before, with the date and versions.
`--tests after` times this checkout's test command alone (the earlier one took 14 minutes here).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_before_after import REPO  # noqa: E402

PYTEST = Path(sys.executable).parent / "pytest"  # the venv's script, as the README writes it


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else ""


def timed(root: Path, args: list, env: dict) -> dict:
    start = time.perf_counter()
    done = subprocess.run([str(PYTEST), *args], cwd=root, env=env, capture_output=True, text=True)
    return {"wall": time.perf_counter() - start, "exit": done.returncode, "last": _last_line(done.stdout)}


def main_job(root: Path) -> dict:
    report = Path(tempfile.mkdtemp(prefix="bench-ci-")) / "report.json"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return timed(root, ["--scaledmm-matrix", "-n", "auto", "--scaledmm-report", str(report)], env)


def test_command(root: Path) -> dict:
    return timed(root, ["-n", "2"], {**os.environ, "PYTHONPATH": str(root)})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument(
        "--tests",
        choices=("both", "after", "none"),
        default="both",
        help="which sides' test command to time (the earlier one may take far longer)",
    )
    args = parser.parse_args(argv)
    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-ci-before-") as folder:
        worktree = Path(folder) / "before"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), args.before],
            check=True,
            capture_output=True,
        )
        try:
            figures["main job"] = (main_job(worktree), main_job(REPO))
            if args.tests != "none":
                before = test_command(worktree) if args.tests == "both" else None
                figures["test command"] = (before, test_command(REPO))
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)], capture_output=True
            )
    import torch  # here: its import-time warnings after the runs, not before

    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, Python {platform.python_version()}; "
        f"before {args.before}, after {head.stdout.strip()}"
    )
    for name, (before, after) in figures.items():
        print(f"{name}:")
        for label, side in (("before", before), ("after", after)):
            if side is not None:
                print(f"  {label:6} {side['wall']:7.1f} s  exit {side['exit']}  {side['last']}")
        if before is not None:
            print(f"  after / before: {after['wall'] / before['wall']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
