"""State of one matrix run: the spec, its cases, how to run them, and what came back."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

from ..verdict import outcome as oc
from ..matrix.cases import Case, generate_cases
from ..matrix.spec import Spec

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
        self.max_autotune_configs = 0
        self.owned_cache: Optional[str] = None
        # How cases run (isolate.py) and whether failures are triaged (triage.py).
        self.isolate, self.timeout = True, 300.0
        self.triage_enabled, self.triage_budget = True, 600.0
        self._runner = None
        self._spare_child = None
        self._triage = None
        self.explore = None  # explore.ExploreSettings in explore mode
        self._catalogue = None
        # Why the report may not cover the run (see incomplete_reasons): what ended the session
        # early (interrupts, internal errors), and what explains cases without a record.
        self.interruptions: list[str] = []
        self.subset_causes: list[str] = []
        self.finished = False  # the final report: until then every report is partial
        self.signalled: Optional[str] = None  # "SIGINT" / "SIGTERM" received while cases ran

    # -- collection ---------------------------------------------------------------------------
    def cases(self) -> list[Case]:
        if self._cases is None:
            self._cases, self.generation_notes = generate_cases(self.spec, self.profile)
        return self._cases

    # -- running ------------------------------------------------------------------------------
    def load_kernels(self) -> None:
        """Import every kernel now, so a bad `impl` is one usage error before any case runs."""
        from ..matrix.kernels import resolve_kernels

        self._kernels = resolve_kernels(self.spec.path, self.spec.kernels)

    def context(self):
        if self._context is None:
            import logging

            # torch's structured-trace logger emits DEBUG records meant for tlparse; keep them out
            # of pytest's captured-log sections.
            logging.getLogger("torch.__trace").propagate = False
            from ..execution.device import resolve_device
            from ..execution.run import RunContext

            self._context = RunContext(
                device=resolve_device(self.requested_device),
                run_seed=self.seed,
                kernel_specs={k.name: k for k in self.spec.kernels},
                kernels=self._kernels,
                archs=self.spec.archs,
                slack=self.spec.slack,
                max_autotune_configs=self.max_autotune_configs,
            )
        return self._context

    def local_environment(self) -> dict:
        from ..execution.device import environment

        return environment(self.context().device)

    def attach_environment(self, item) -> None:
        """The first item a process runs carries its environment to the controller."""
        if self.environment is None:
            import json

            # Plain JSON: xdist ships user_properties through execnet, which refuses TorchVersion.
            self.environment = json.loads(json.dumps(self.local_environment(), default=str))
            item.user_properties.append(("scaledmm_env", self.environment))

    def configure_runner(self, isolate: bool, timeout: float, triage: bool, triage_budget: float) -> None:
        self.isolate, self.timeout = isolate, timeout
        self.triage_enabled, self.triage_budget = triage, triage_budget

    def kernels(self) -> dict:
        return dict(self._kernels)

    def prestart_child(self) -> None:
        """Spawn the isolated child now, so that its start-up overlaps collection; see isolate.py.
        Only when some kernel can run there (a kernel defined in a conftest runs in-process)."""
        from ..execution.isolate import SpareChild, kernel_refs

        if not self.isolate or self._spare_child is not None or self._runner is not None:
            return
        specs = {k.name: k for k in self.spec.kernels}
        if any(ref is not None for ref in kernel_refs(self._kernels, specs).values()):
            try:
                self._spare_child = SpareChild(self.requested_device, self.compiles_with_inductor())
            except Exception:  # e.g. out of processes or files: the first case starts one, or says why
                self._spare_child = None

    def compiles_with_inductor(self) -> bool:
        from .speed import INDUCTOR_MODES

        return bool(set(self.spec.axes_for(self.profile).get("mode", ())) & INDUCTOR_MODES)

    def runner(self):
        """The child process that runs cases (or the in-process runner); started on first use."""
        if self._runner is None:
            from ..execution.isolate import make_runner

            spare, self._spare_child = self._spare_child, None
            self._runner = make_runner(self.context(), self.isolate, self.timeout, spare, self.compiles_with_inductor())
            if not self.isolate and self.context().device == "cpu" and self.compiles_with_inductor():
                from ..execution.device import probe_cpu_vector_isa_in_background

                probe_cpu_vector_isa_in_background()
        return self._runner

    def run(self, case: Case, triage: bool = True) -> oc.Outcome:
        result = self.runner().run(case)
        if triage and self.triage_enabled and result.failed:
            found = self.triage(case, result)
            if found:
                result.extra["triage"] = found
        return result

    def triage(self, case: Case, result: oc.Outcome) -> Optional[dict]:
        if self._triage is None:
            from ..execution.triage import Triage

            self._triage = Triage(self.runner(), self.context().device, self.triage_budget)
        return self._triage(case, result)

    def close(self) -> None:
        if self._spare_child is not None:
            self._spare_child.close()
            self._spare_child = None
        if self._runner is not None:
            self._runner.close()
            self._runner = None

    def harness_error_record(self, case: Case, error: BaseException | str, when: str = "call") -> dict:
        """The record of a case the harness could not run or check: the case is never dropped."""
        import traceback

        if isinstance(error, BaseException):
            info = oc.describe_exception(error)
            signature = f"HARNESS_ERROR: {oc.signature_of(info)}"
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        else:
            signature = f"HARNESS_ERROR: {oc.normalise_message(error, max_lines=1)}"[:240]
            text = error
        detail = f"the harness failed ({when}), not the case:\n" + "\n".join(text.splitlines()[-40:])
        return self.record(case, oc.Outcome(oc.HARNESS_ERROR, signature, None, detail))

    @staticmethod
    def record(case: Case, result: oc.Outcome) -> dict:
        data = result.to_json()
        triage = data["extra"].pop("triage", None)
        return {
            "id": case.id,
            "params": case.to_json(),
            "outcome": data.pop("outcome"),
            "signature": data.pop("signature"),
            "layer": data.pop("layer"),
            **data,
            **({"triage": triage} if triage else {}),
        }

    # -- known failures -----------------------------------------------------------------------
    def apply_known_failures(self, record: dict) -> dict:
        """matrix.yaml's known_failures on one record: an expected failure becomes XFAIL, a listed
        case that passes becomes FIXED_UPSTREAM (see known_failures.py)."""
        if not self.spec.known_failures:
            return record
        if self._catalogue is None:
            from ..matrix.known_failures import Catalogue

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
        self._saved_cache_env = {name: os.environ.get(name) for name in CACHE_ENV}
        os.environ[OWNED_CACHE_ENV] = self.owned_cache
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self.owned_cache, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.owned_cache, "triton")

    def drop_owned_cache(self) -> None:
        if self.owned_cache:
            shutil.rmtree(self.owned_cache, ignore_errors=True)
            if os.environ.get(OWNED_CACHE_ENV) == self.owned_cache:
                del os.environ[OWNED_CACHE_ENV]
                # Give the process back the caches it had (the user's, or none).
                for name, value in self._saved_cache_env.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
            self.owned_cache = None

    # -- reporting ----------------------------------------------------------------------------
    def matrix_block(self) -> dict:
        return {
            "path": str(self.spec.path),
            "hash": self.spec.digest,
            "profile": self.profile.name,
            "seed": self.seed,
            "cases": len(self.cases()),  # the xdist controller has not collected: generate here
            "generation": self.generation_notes,
        }

    def counts(self) -> Counter:
        return Counter(r["outcome"] for r in self.records.values())

    def interrupted(self, reason: str) -> None:
        if reason not in self.interruptions:
            self.interruptions.append(reason)

    def missing_ids(self) -> list[str]:
        return [case.id for case in self.cases() if case.id not in self.records]

    def incomplete_reasons(self) -> list[str]:
        """Empty when every generated case has a record and nothing cut the session short."""
        reasons = []
        if not self.finished:
            reasons.append("written while the run was in progress")
        missing = self.missing_ids()
        if missing:
            reasons.append(f"{len(missing)} of {len(self.cases())} generated case(s) have no record (e.g. {missing[0]})")
            reasons += self.subset_causes
        if self.explore is not None:
            reasons.append("explore mode: hypothesis searched the axes instead of running the profile's cases")
        return reasons + [r for r in self.interruptions if r not in reasons]

    def build_report(self) -> dict:
        """The report as it stands: partial (complete: false) until the session has finished."""
        from ..reports.report import build_report

        reasons = self.incomplete_reasons()
        session = {
            "started": self.started,
            "wall_s": round(time.time() - self.started, 3),
            "complete": not reasons,
            "incomplete_reasons": reasons,
            "generated": len(self.cases()),
            "recorded": len(self.records),
        }
        return build_report(self.environment or {}, self.matrix_block(), self.records.values(), session)
