"""The command line that replays one case, from any directory: the matrix by its absolute path,
given twice, as the option's value and as a path argument, so that pytest finds the matrix's
project from it (rootdir, ini file, the conftest.py that declares hook kernels) wherever it runs.

It names every setting that decides which cases exist (the profile, always; the seed and device
when the run was given them), since the project's ini file or environment may say otherwise
where the command is replayed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Optional

# What a case id this plugin writes is made of (matrix/cases.py case_id): never a leading "-"
# (an option), never a shell or path character. An id from a report is checked against it before
# it reaches a command or a file name.
CASE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,199}")
# A profile or device named in a command: a word, never an option.
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+=-]{0,99}")


def valid_case_id(case_id) -> bool:
    return isinstance(case_id, str) and CASE_ID.fullmatch(case_id) is not None


def unsafe_command(what: str) -> str:
    """What stands in for a replay command that report data would turn into another command."""
    return f"(no replay command: {what} is not one this plugin writes)"


def replay_command(matrix_path: Optional[str], case_id: str, profile: Optional[str] = None,
                   seed: Optional[int] = None, device: Optional[str] = None) -> str:
    """`seed`, `device`: what the run was given (--scaledmm-seed, --scaledmm-device), None when it
    used the matrix's seed and picked the device itself; `profile` None: the default one."""
    if not valid_case_id(case_id):
        return unsafe_command("the case id")
    for what, word in (("the profile", profile), ("the device", device)):
        if word is not None and not _WORD.fullmatch(str(word)):
            return unsafe_command(what)
    # A report records the absolute path; a relative one (hand-made) is kept relative, but never
    # as a word pytest would read as an option ("--debug=FILE").
    path = str(Path(matrix_path or "matrix.yaml"))
    if "\0" in path or any(ord(ch) < 32 for ch in path):
        return unsafe_command("the matrix path")
    if path.startswith("-"):
        path = "./" + path
    matrix = shlex.quote(path)
    words = [f"pytest {matrix} --scaledmm-matrix {matrix}", f"--scaledmm-profile {shlex.quote(profile or 'default')}"]
    if seed is not None:
        words.append(f"--scaledmm-seed {int(seed)}")
    if device and device != "auto":
        words.append(f"--scaledmm-device {shlex.quote(device)}")
    words.append(f"--scaledmm-case {shlex.quote(case_id)}")
    return " ".join(words)


def forced_options(seed: Optional[int], device: Optional[str]) -> dict:
    """What a report records under matrix.forced for its replay commands (see replay_command)."""
    return {"seed": seed, "device": None if device in (None, "auto") else device}
