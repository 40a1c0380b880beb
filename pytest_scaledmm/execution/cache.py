"""The compile caches a run uses: by default a fresh Inductor/Triton cache of its own, so that no
earlier run's compiled kernels decide an outcome; --scaledmm-reuse-cache keeps the environment's.

The run's directory also holds its temporary directory (TMPDIR): torch keeps its precompiled C++
headers under its default cache dir in the temp dir whatever TORCHINDUCTOR_CACHE_DIR says, the
host compiler leaves its cc*.s files there when it is killed, and an AOTInductor package is
built there. So everything a run compiles goes with its directory.

The directories are named in the environment, so xdist workers, the isolated child and the
compilers they start inherit them; only a directory made here is ever deleted.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
TEMP_ENV = "TMPDIR"
OWNED_CACHE_ENV = "PYTEST_SCALEDMM_RUN_CACHE"  # set while a run owns its cache
# torch's switches for precompiled headers: cpp kernels and cpp_wrapper, then AOTInductor.
HEADER_SWITCHES = (("", "cpp_cache_precompile_headers"), ("aot_inductor", "precompile_headers"))


class FreshCache:
    """This run's own cache directory, from claim() to release()."""

    def __init__(self) -> None:
        self.path: str | None = None
        self._saved_env: dict[str, str | None] = {}
        self._saved_tempdir: str | None = None
        self._saved_switches: list[tuple[object, str, object]] = []

    def claim(self) -> None:
        """Point the caches and the temp dir at a new directory, unless a run already owns one
        (the xdist controller made it and this process inherited it)."""
        if os.environ.get(OWNED_CACHE_ENV):
            return
        self.path = tempfile.mkdtemp(prefix="scaledmm-cache-")
        temp = os.path.join(self.path, "tmp")
        os.mkdir(temp)
        self._saved_env = {name: os.environ.get(name) for name in (*CACHE_ENV, TEMP_ENV)}
        os.environ[OWNED_CACHE_ENV] = self.path
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self.path, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.path, "triton")
        os.environ[TEMP_ENV] = temp
        # This process's own temp files (the child's log, an in-process AOTInductor package).
        self._saved_tempdir, tempfile.tempdir = tempfile.tempdir, temp
        self._saved_switches = _no_headers_outside()

    def release(self) -> None:
        """Delete the directory claim() made and give the process back the caches it had."""
        if not self.path:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        if os.environ.get(OWNED_CACHE_ENV) == self.path:
            del os.environ[OWNED_CACHE_ENV]
            for name, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            tempfile.tempdir = self._saved_tempdir
            for owner, switch, was in self._saved_switches:
                setattr(owner, switch, was)
            self._saved_switches = []
        self.path = None


def _no_headers_outside() -> list[tuple[object, str, object]]:
    """torch fixes its headers' directory when Inductor's codecache is imported; imported before
    the claim (a conftest, a run with --scaledmm-isolate=no), that directory is outside the run's,
    so this process compiles without precompiled headers until release(). Returns what to put back."""
    if "torch._inductor.codecache" not in sys.modules:
        return []
    config = sys.modules.get("torch._inductor.config")
    saved = []
    for group, name in HEADER_SWITCHES:
        owner = getattr(config, group, None) if group else config
        if owner is not None and isinstance(getattr(owner, name, None), bool):
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, False)
    return saved
