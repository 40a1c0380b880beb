"""Where reports go when no path is given, and pruning old ones there (--scaledmm-keep).

The default directory is `<project>/.scaledmm/reports/`, where the project is the nearest
directory at or above the matrix file holding pytest.ini, .pytest.ini, pyproject.toml, tox.ini,
setup.cfg or setup.py (the matrix's own directory when none does), or pytest's `--rootdir` when
given: the same place wherever pytest is started from, unlike pytest's own rootdir, which
follows the working directory and the command line.

Pruning removes only what this plugin wrote there for the same series of runs: regular files
named as it names reports (`report-<UTC time>-<microseconds>-<pid>.json`) that start as its
reports do and record the same matrix file, profile and shard as this run, oldest first by the
time in their name, keeping the N newest. It never removes this run's report, the baseline the
run was given, a report whose run still holds its lock, a report of another matrix, profile or
shard in the same project (another job's results, a shard waiting to be merged), or any other
file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path

PROJECT_MARKERS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "setup.py")
REPORTS_SUBDIR = Path(".scaledmm") / "reports"
_NAME = re.compile(r"^report-(\d{8}-\d{6}-\d{6})-(\d+)\.json$")
# What write_atomic puts first in every report (json.dumps, indent 1, "schema" first).
_HEAD = b'{\n "schema": "pytest-scaledmm/report",'


_remove = os.unlink  # one place to remove a report (tests make it fail)


def project_dir(matrix_path: Path) -> Path:
    start = Path(matrix_path).resolve().parent
    for directory in (start, *start.parents):
        if any((directory / marker).is_file() for marker in PROJECT_MARKERS):
            return directory
    return start


def default_report_dir(matrix_path: Path, rootdir: str | None = None) -> Path:
    base = Path(rootdir).resolve() if rootdir else project_dir(matrix_path)
    return base / REPORTS_SUBDIR


def default_report_name(now: float | None = None) -> str:
    # Second, microsecond and pid: two runs never share a name, so no earlier report is replaced.
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"-{int(now % 1 * 1e6):06d}"
    return f"report-{stamp}-{os.getpid()}.json"


def check_keep(keep) -> str | None:
    """None when `keep` is absent or a whole number >= 1, else the problem."""
    if keep is None or (type(keep) is int and keep >= 1):
        return None
    return f"keeps at least one report (the run's own): N must be a whole number >= 1, got {keep!r}"


def _written_here(path: Path) -> bool:
    """A regular file (not a link) with a report's name that starts as this plugin's reports do."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with open(path, "rb") as handle:
            return handle.read(len(_HEAD)) == _HEAD
    except OSError:
        return False


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def report_series(report) -> tuple:
    """What makes reports successive runs of one job: matrix file, profile and shard."""
    if not isinstance(report, dict):
        return (None, None, None)
    raw_matrix, raw_shard = report.get("matrix"), report.get("shard")
    matrix = raw_matrix if isinstance(raw_matrix, dict) else {}
    shard = raw_shard if isinstance(raw_shard, dict) else {}
    position = (shard.get("index"), shard.get("count")) if shard else None
    return (matrix.get("path"), matrix.get("profile"), position)


def _series_of(path: Path) -> tuple:
    try:
        with open(path, "rb") as handle:
            return report_series(json.load(handle))
    except (OSError, ValueError, RecursionError, MemoryError):
        return (None, None, None)


def prune_reports(
    directory: Path, keep: int, protected: Iterable[Path] = (), series: tuple | None = None
) -> tuple[list[Path], list[str]]:
    """Remove all but the `keep` newest reports this plugin wrote in `directory` (of `series`,
    when given: report_series). Returns (the paths removed, one line per failure)."""
    directory = Path(directory)
    protected = [Path(p) for p in protected if p]
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"cannot list {directory}: {exc.strerror or exc}"]
    ours = sorted(
        (
            (match.group(1), int(match.group(2)), name)
            for name in names
            if (match := _NAME.match(name))
            and _written_here(directory / name)
            and (series is None or _series_of(directory / name) == series)
        ),
        reverse=True,
    )
    removed, problems = [], []
    for _, _, name in ours[keep:]:
        path = directory / name
        if any(_same(path, p) for p in protected) or os.path.lexists(f"{path}.lock"):
            continue
        try:
            _remove(path)
            removed.append(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"cannot remove {path}: {exc.strerror or exc}")
    return removed, problems
