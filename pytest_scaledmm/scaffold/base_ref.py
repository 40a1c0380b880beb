"""The project's directory as committed on a git ref, extracted for the baseline env of a
one-release tox.ini (`scaledmm init --torch 2.13.0`): its matrix and kernels run there under the
same torch as the working tree's, so that the gate judges the kernel change alone.

    python -m pytest_scaledmm.scaffold.base_ref PROJECT REF DIR

The files of PROJECT's directory at REF are read into a temporary index (`git read-tree`) and
written out by `git checkout-index`: every committed file, whatever .gitattributes says for
`git archive` (export-ignore, export-subst), a symlink as a symlink. DIR is made anew: it may be
missing, empty, or an earlier extraction (it carries MARK, written before any file, so that a
broken extraction is one too), and is emptied; anything else there is refused, never removed.
Every failure is one line on stderr, exit 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import ScaledmmError
from ..matrix.kernels import BASE_MARK

MARK = BASE_MARK  # what an extraction leaves in DIR: the ref it holds


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


_HINT = "(the baseline env runs the kernels committed on a git ref: set SCALEDMM_BASE)"


def _git(project: Path, *args: str, env: dict | None = None, cwd: Path | None = None) -> str:
    """git's stdout; its last stderr line as a BaseRefError when it fails."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd or project, env=env, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BaseRefError(f"cannot run git: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise BaseRefError(lines[-1] if lines else f"git {args[0]} exited {proc.returncode}")
    return proc.stdout


def _tree(project: Path, ref: str) -> tuple:
    """(the repository's top level, the tree of `project`'s directory at `ref`)."""
    if not ref or ref.startswith("-"):
        raise BaseRefError(f"{project} at {ref!r}: not a git ref (a branch, a tag or a commit) {_HINT}")
    try:
        top = Path(_git(project, "rev-parse", "--show-toplevel").strip())
        prefix = _git(project, "rev-parse", "--show-prefix").strip()
    except BaseRefError as exc:
        raise BaseRefError(f"{project} at {ref}: not in a git work tree ({exc}) {_HINT}") from None
    if not _git(project, "rev-list", "-n", "1", "--all").strip():
        raise BaseRefError(f"{project}: the repository has no commits yet: commit the kernels first {_HINT}")
    try:
        _git(project, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    except BaseRefError:
        raise BaseRefError(f"{project} at {ref}: no such commit, branch or tag {_HINT}") from None
    try:
        tree = _git(project, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}:{prefix}").strip()
    except BaseRefError:
        raise BaseRefError(
            f"{project} at {ref}: the directory {prefix or './'} is not in that commit {_HINT}"
        ) from None
    return top, tree


def extract(project: Path, ref: str, directory: Path) -> Path:
    """Write the files of `project` at `ref` into `directory`. Raises BaseRefError."""
    top, tree = _tree(project, ref)
    _clear(directory)
    (directory / MARK).write_text(ref + "\n")
    with tempfile.TemporaryDirectory(prefix="scaledmm-base-") as scratch:
        # A temporary index: the user's own index and work tree are never touched.
        env = {**os.environ, "GIT_INDEX_FILE": os.path.join(scratch, "index")}
        try:
            _git(project, "read-tree", tree, env=env)
            _git(project, "checkout-index", "--all", f"--prefix={directory.resolve()}{os.sep}", env=env, cwd=top)
        except BaseRefError as exc:
            raise BaseRefError(f"{project} at {ref}: cannot write its files into {directory}: {exc}") from None
    return directory


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 3:
        print("usage: python -m pytest_scaledmm.scaffold.base_ref PROJECT REF DIR", file=sys.stderr)
        return 2
    project, ref, directory = Path(args[0]), args[1], Path(args[2])
    try:
        extract(project, ref, directory)
    except (BaseRefError, OSError) as exc:  # OSError: writing DIR
        reason = exc if isinstance(exc, BaseRefError) else f"{directory}: {exc.strerror or exc}"
        print(f"scaledmm baseline: error: {reason}", file=sys.stderr)
        return 2
    print(f"scaledmm baseline: {project} as committed on {ref}, in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
