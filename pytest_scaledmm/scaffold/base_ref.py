"""The project's directory as committed on a git ref, extracted for the baseline env of a
one-release tox.ini (`scaledmm init --torch 2.13.0`): its matrix and kernels run there under the
same torch as the working tree's, so that the gate judges the kernel change alone.

    python -m pytest_scaledmm.scaffold.base_ref PROJECT REF DIR

`git archive REF:./` run in PROJECT holds the files of that directory at REF, whatever the
directory's place in the repository. DIR is made anew: it may be missing, empty, or an earlier
extraction (it carries MARK), and is emptied; anything else there is refused, never removed. Every failure is
one line on stderr, exit 2.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from ..errors import ScaledmmError

MARK = ".scaledmm-base-ref"  # what an extraction leaves in DIR: the ref it holds


class BaseRefError(ScaledmmError):
    """One line for the user: the ref, the directory, and why."""


def _clear(directory: Path) -> None:
    """Empty `directory` (kept: it is the env's working directory) when an extraction made it."""
    if not os.path.lexists(directory):
        directory.mkdir(parents=True)
        return
    if not directory.is_dir() or directory.is_symlink():
        raise BaseRefError(f"{directory}: it is there and is not a directory: never replaced")
    entries = list(directory.iterdir())
    if entries and not (directory / MARK).is_file():
        raise BaseRefError(f"{directory}: it holds files of its own (no {MARK}): never removed")
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def extract(project: Path, ref: str, directory: Path) -> Path:
    """Write the files of `project` at `ref` into `directory`. Raises BaseRefError."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(project), "archive", "--format=tar", f"{ref}:./"], capture_output=True, check=False
        )
    except OSError as exc:
        raise BaseRefError(f"cannot run git: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        why = lines[-1] if lines else f"git archive exited {proc.returncode}"
        raise BaseRefError(
            f"{project} at {ref}: {why} (the baseline env runs the kernels committed on a git ref: set SCALEDMM_BASE)"
        )
    _clear(directory)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as archive:
        if hasattr(tarfile, "data_filter"):  # no member outside DIR, no device file
            archive.extractall(directory, filter="data")
        else:  # pragma: no cover (Python without extraction filters); git writes no such member
            archive.extractall(directory)  # noqa: S202
    (directory / MARK).write_text(ref + "\n")
    return directory


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 3:
        print("usage: python -m pytest_scaledmm.scaffold.base_ref PROJECT REF DIR", file=sys.stderr)
        return 2
    project, ref, directory = Path(args[0]), args[1], Path(args[2])
    try:
        extract(project, ref, directory)
    except (BaseRefError, OSError) as exc:
        reason = exc if isinstance(exc, BaseRefError) else f"{directory}: {exc.strerror or exc}"
        print(f"scaledmm baseline: error: {reason}", file=sys.stderr)
        return 2
    print(f"scaledmm baseline: {project} as committed on {ref}, in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
