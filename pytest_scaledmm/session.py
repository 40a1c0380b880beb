"""State of one matrix run: the spec, its cases, how to run them, and what came back."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

from . import outcome as oc
from .cases import Case, generate_cases
from .spec import Spec

CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
OWNED_CACHE_ENV = "PYTEST_SCALEDMM_RUN_CACHE"


class MatrixSession:
    def __init__(self, spec: Spec, profile_name: str, seed: Optional[int], device: str, report_path: Path):
        self.spec = spec
        self.profile = spec.profile(profile_name)
        self.seed = spec.seed if seed is None else seed
        if self.seed != spec.seed:
            from dataclasses import replace

            self.spec = replace(spec, seed=self.seed)
        self.requested_device = device
        self.report_path = report_path
        self.records: dict[str, dict] = {}
        self.environment: Optional[dict] = None
        self.generation_notes: dict = {}
        self.started = time.time()
        self._cases: Optional[list[Case]] = None
        self._context = None
        self._kernels: dict = {}
        self.owned_cache: Optional[str] = None
        self._catalogue = None

    # -- collection ---------------------------------------------------------------------------
    def cases(self) -> list[Case]:
        if self._cases is None:
            self._cases, self.generation_notes = generate_cases(self.spec, self.profile)
        return self._cases

    # -- running ------------------------------------------------------------------------------
    def load_kernels(self) -> None:
        """Import every kernel now, so a bad `impl` is one usage error before any case runs."""
        from .kernels import resolve_kernels

        self._kernels = resolve_kernels(self.spec.path, self.spec.kernels)

    def context(self):
        if self._context is None:
            import logging

            # torch's structured-trace logger emits DEBUG records meant for tlparse; keep them out
            # of pytest's captured-log sections.
            logging.getLogger("torch.__trace").propagate = False
            from .device import resolve_device
            from .run import RunContext

            self._context = RunContext(
                device=resolve_device(self.requested_device),
                run_seed=self.seed,
                kernel_specs={k.name: k for k in self.spec.kernels},
                kernels=self._kernels,
                archs=self.spec.archs,
                slack=self.spec.slack,
            )
        return self._context

    def local_environment(self) -> dict:
        from .device import environment

        return environment(self.context().device)

    def run(self, case: Case) -> oc.Outcome:
        from .run import run_case

        return run_case(case, self.context())

    @staticmethod
    def record(case: Case, result: oc.Outcome) -> dict:
        data = result.to_json()
        return {
            "id": case.id,
            "params": case.to_json(),
            "outcome": data.pop("outcome"),
            "signature": data.pop("signature"),
            "layer": data.pop("layer"),
            **data,
        }

    # -- known failures -----------------------------------------------------------------------
    def apply_known_failures(self, record: dict) -> dict:
        """matrix.yaml's known_failures on one record: an expected failure becomes XFAIL, a listed
        case that passes becomes FIXED_UPSTREAM (see known_failures.py)."""
        if not self.spec.known_failures:
            return record
        if self._catalogue is None:
            from .known_failures import Catalogue

            self._catalogue = Catalogue.from_spec(self.spec)
        env = self.environment or {}
        return self._catalogue.apply(record, str(env.get("torch") or ""), env.get("arch"))

    # -- caches -------------------------------------------------------------------------------
    def use_fresh_cache(self) -> None:
        """Give this run its own Inductor/Triton cache; workers inherit it through the environment.
        Only a directory made here is ever deleted."""
        if os.environ.get(OWNED_CACHE_ENV):
            return
        self.owned_cache = tempfile.mkdtemp(prefix="scaledmm-cache-")
        os.environ[OWNED_CACHE_ENV] = self.owned_cache
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self.owned_cache, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.owned_cache, "triton")

    def drop_owned_cache(self) -> None:
        if self.owned_cache:
            shutil.rmtree(self.owned_cache, ignore_errors=True)
            if os.environ.get(OWNED_CACHE_ENV) == self.owned_cache:
                del os.environ[OWNED_CACHE_ENV]

    # -- reporting ----------------------------------------------------------------------------
    def matrix_block(self) -> dict:
        return {
            "path": str(self.spec.path),
            "hash": self.spec.digest,
            "profile": self.profile.name,
            "seed": self.seed,
            "cases": len(self._cases or []),
            "generation": self.generation_notes,
        }

    def counts(self) -> Counter:
        return Counter(r["outcome"] for r in self.records.values())

    def build_report(self, complete: bool = True) -> dict:
        from .report import build_report

        session = {"started": self.started, "wall_s": round(time.time() - self.started, 3), "complete": complete}
        return build_report(self.environment or {}, self.matrix_block(), self.records.values(), session)
