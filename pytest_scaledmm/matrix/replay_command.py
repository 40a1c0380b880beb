"""The command line that replays one case, from any directory: the matrix by its absolute path,
given twice, as the option's value and as a path argument, so that pytest finds the matrix's
project from it (rootdir, ini file, the conftest.py that declares hook kernels) wherever it runs."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional


def replay_command(matrix_path: Optional[str], case_id: str, profile: Optional[str] = None,
                   seed: Optional[int] = None) -> str:
    # A report records the absolute path; a relative one (hand-made) is left as it is.
    matrix = shlex.quote(str(Path(matrix_path or "matrix.yaml")))
    words = [f"pytest {matrix} --scaledmm-matrix {matrix}"]
    if profile and profile != "default":
        words.append(f"--scaledmm-profile {shlex.quote(profile)}")
    if seed is not None:
        words.append(f"--scaledmm-seed {int(seed)}")
    words.append(f"--scaledmm-case {shlex.quote(case_id)}")
    return " ".join(words)
