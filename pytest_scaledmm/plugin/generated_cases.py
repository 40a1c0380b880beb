"""The cases generated once per run: the controller generates them right after xdist has started
its workers (pytest_sessionstart's end), while they boot, and leaves them in a file of a
directory only this user can enter; a worker that finds the file, made from the same matrix,
profile, seed and arch by the same plugin, reads it instead of generating them again. A worker
that finds none generates them itself, as before: it never waits for the file."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from typing import Any

from .. import __version__

FILE_NAME = "cases.pickle"


def generation_key(path: str, digest: str, profile: str, seed: int, arch: str) -> tuple:
    """What the generated cases are a function of (the matrix file by its digest)."""
    return (__version__, path, digest, profile, seed, arch)


def make_directory() -> str:
    return tempfile.mkdtemp(prefix="scaledmm-cases-")  # 0700


def remove_directory(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def write_generated(directory: str, key: tuple, generated: Any) -> None:
    """Leave `generated` for the workers; written whole or not at all (a rename)."""
    target = os.path.join(directory, FILE_NAME)
    handle, partial = tempfile.mkstemp(dir=directory, prefix=".cases-")
    try:
        with os.fdopen(handle, "wb") as out:
            pickle.dump((key, generated), out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, target)
    except OSError:
        if os.path.exists(partial):
            os.unlink(partial)


def read_generated(directory: str | None, key: tuple) -> Any | None:
    """What the controller generated for `key`, or None: no file (yet), another key, or a file
    this process cannot read."""
    if not directory:
        return None
    try:
        with open(os.path.join(directory, FILE_NAME), "rb") as handle:
            found_key, generated = pickle.load(handle)
    except Exception:  # absent, or not a file this plugin wrote: generate here
        return None
    return generated if found_key == key else None
