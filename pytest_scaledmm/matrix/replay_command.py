"""The command line that replays one case, from any directory: the matrix by its absolute path,
given twice, as the option's value and as a path argument, so that pytest finds the matrix's
project from it (rootdir, ini file, the conftest.py that declares hook kernels) wherever it runs.

It names every setting that decides which cases exist (the profile, always; the seed and device
when the run was given them), since the project's ini file or environment may say otherwise
where the command is replayed."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional


def replay_command(matrix_path: Optional[str], case_id: str, profile: Optional[str] = None,
                   seed: Optional[int] = None, device: Optional[str] = None) -> str:
    """`seed`, `device`: what the run was given (--scaledmm-seed, --scaledmm-device), None when it
    used the matrix's seed and picked the device itself; `profile` None: the default one."""
    # A report records the absolute path; a relative one (hand-made) is left as it is.
    matrix = shlex.quote(str(Path(matrix_path or "matrix.yaml")))
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
