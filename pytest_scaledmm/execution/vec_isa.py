"""Inductor's CPU vector-ISA check, made once per run and shared by its processes.

Before its first CPU kernel (on a GPU run too: a scale held on the host makes one), Inductor test-
builds and test-loads a library for each vector ISA the CPU reports; torch 2.11 loads each in a
new Python that imports torch. That is ~40 s per process on an H200 host, paid again by every
process whose cache is fresh. One process of the run makes the check and writes what passed into
the run's Inductor cache directory (kept with it by --scaledmm-reuse-cache); the others, when every
ISA the CPU reports passed, take that answer instead of repeating the builds, and so pick the same
ISA. When any ISA failed, or the file is for another torch, interpreter or compiler, nothing is
taken and Inductor checks for itself. These are torch internals: where a release lacks them,
nothing is done.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile

VERDICT_FILE = "scaledmm-vec-isa.json"


def _verdict_path() -> str | None:
    directory = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return os.path.join(directory, VERDICT_FILE) if directory else None


def _candidates() -> list:
    """The ISAs the CPU reports, in Inductor's order of preference (none off x86)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return []
    from torch._inductor import cpu_vec_isa  # noqa: PLC0415  lazy: imports Inductor

    flags = cpu_vec_isa.x86_isa_checker()
    return [isa for isa in cpu_vec_isa.supported_vec_isa_list if all(f in flags for f in str(isa).split())]


def _key() -> dict:
    import torch  # noqa: PLC0415  lazy: imports torch

    return {
        "torch": torch.__version__,
        "python": sys.executable,
        "cxx": os.environ.get("CXX", ""),
        "candidates": [str(isa) for isa in _candidates()],
    }


def share_check_result() -> None:
    """After Inductor's own check in this process: write which ISAs passed."""
    path = _verdict_path()
    if path is None:
        return
    try:
        from torch._inductor import cpu_vec_isa  # noqa: PLC0415  lazy: imports Inductor

        passed = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
        text = json.dumps({"key": _key(), "passed": passed})
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".vec-isa-")
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(temp, path)
    except Exception:  # the others check for themselves
        return


def checked_here() -> bool:
    """Whether this process already has Inductor's answer (checked, or taken)."""
    try:
        from torch._inductor import cpu_vec_isa  # noqa: PLC0415  lazy: imports Inductor

        return cpu_vec_isa.valid_vec_isa_list.cache_info().currsize > 0
    except Exception:
        return True  # nothing to take where the release lacks the cache


def take_shared_result() -> bool:
    """Take the run's shared answer when every ISA the CPU reports passed; True when taken."""
    path = _verdict_path()
    if path is None or not os.path.exists(path) or checked_here():
        return False
    try:
        with open(path, encoding="utf-8") as source:
            data = json.load(source)
        if data.get("key") != _key() or data.get("passed") != data["key"]["candidates"] or not data["passed"]:
            return False
        from torch._inductor import config, cpu_vec_isa  # noqa: PLC0415  lazy: imports Inductor

        # Computed once with the checks marked passed, then cached by Inductor for this process;
        # the config itself is left as it was (it is part of the FX graph cache's key).
        with config.patch({"cpp.vec_isa_ok": True}):
            listed = cpu_vec_isa.valid_vec_isa_list()
            for isa in listed:
                bool(isa)  # the ISA classes that cache their own answer keep this one
        return [str(isa) for isa in listed] == data["passed"]
    except Exception:
        return False
