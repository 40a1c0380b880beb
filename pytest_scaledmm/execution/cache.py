"""The compile caches a run uses: by default a fresh Inductor/Triton cache of its own, so that no
earlier run's compiled kernels decide an outcome; --scaledmm-reuse-cache keeps the environment's.

The cache directory is named in the environment, so xdist workers and the isolated child inherit
it; only a directory made here is ever deleted.
"""

from __future__ import annotations

import os
import shutil
import tempfile

CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
OWNED_CACHE_ENV = "PYTEST_SCALEDMM_RUN_CACHE"  # set while a run owns its cache


class FreshCache:
    """This run's own cache directory, from claim() to release()."""

    def __init__(self) -> None:
        self.path: str | None = None
        self._saved_env: dict[str, str | None] = {}

    def claim(self) -> None:
        """Point the caches at a new directory, unless a run already owns one (the xdist
        controller made it and this process inherited it)."""
        if os.environ.get(OWNED_CACHE_ENV):
            return
        self.path = tempfile.mkdtemp(prefix="scaledmm-cache-")
        self._saved_env = {name: os.environ.get(name) for name in CACHE_ENV}
        os.environ[OWNED_CACHE_ENV] = self.path
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self.path, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.path, "triton")

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
        self.path = None
