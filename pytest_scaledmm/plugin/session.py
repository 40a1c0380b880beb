"""State of one matrix run: the spec, its cases, how to run them, and what came back.

The session is built complete from the spec and the Settings and owns everything that changes
while the run goes on (the runner, triage, the cache directory, the records); the plugin's hooks
change it only through its methods.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from ..execution.alone import ReplayAlone
from ..execution.aoti_control import apply_control, control_dtype, failed_stage
from ..execution.cache import FreshCache
from ..execution.device import (
    device_info,
    environment,
    gpu_count,
    probe_cpu_vector_isa_in_background,
    resolve_device,
)
from ..execution.forkserver import ForkServer
from ..execution.isolate import ChildRunner, InProcessRunner, SpareChild, kernel_refs, make_runner, start_fork_server
from ..execution.run import RunContext, planned_other_m, planned_sequence_record
from ..execution.sequence_plan import drawn_values
from ..execution.shrink import ShrinkSequence
from ..execution.triage import SHARED_DIR_ENV, Triage
from ..matrix.case_params import Case
from ..matrix.cases import generate_cases
from ..matrix.code_digest import code_block
from ..matrix.compile_modes import inductor_modes
from ..matrix.kernels import resolve_kernels
from ..matrix.known_failures import Catalogue
from ..matrix.replay_command import after_of, forced_options, replay_command, sequence_of
from ..matrix.spec import Spec
from ..records import CaseRecord, ChecksRecord, CodeBlock, ErrorRecord, Report, RunRecord, ShardBlock
from ..reports.coverage import coverage_block, coverage_lines, model_block
from ..reports.report import build_report, iso_time
from ..verdict import outcome as oc
from .generated_cases import generation_key, make_directory, read_generated, remove_directory, write_generated
from .schedule import HOST_LANE_WORKER, builds_host_kernel
from .settings import Settings
from .shard import shard_block, shard_slice
from .timeline import ProcessTimeline, phases_block


def plain_json(data: object) -> Any:
    """JSON-plain copy: xdist ships user_properties through execnet, which refuses str
    subclasses such as torch's TorchVersion."""
    return json.loads(json.dumps(data, default=str))


def plain_record(record: CaseRecord) -> CaseRecord:
    """A case record's JSON-plain copy, still a CaseRecord."""
    plain: CaseRecord = plain_json(record)
    return plain


def checks_record(errors: Mapping[str, Any]) -> ChecksRecord:
    """The checks of a case's sides (verdict/oracle.py), the sides it has."""
    checks = ChecksRecord()
    if "eager" in errors:
        checks["eager"] = errors["eager"]
    if "compiled" in errors:
        checks["compiled"] = errors["compiled"]
    return checks


def error_record(error: oc.ErrorInfo | None) -> ErrorRecord | None:
    """An exception's record, field by field (records.ErrorRecord)."""
    if error is None:
        return None
    return ErrorRecord(
        type=error.type,
        message=error.message,
        root_type=error.root_type,
        layer=error.layer,
        root_message=error.root_message,
        source=error.source,
    )


def target_arch(requested: str) -> str:
    """The arch of the device `--scaledmm-device` names (auto: the first GPU torch sees, else the
    CPU), without choosing a worker's GPU: every process of a run generates for the same arch."""
    if requested == "cpu" or not gpu_count():
        return "cpu"  # a cuda request without a GPU fails at run time, with its reason
    device = "cuda:0" if requested in ("auto", "cuda") else requested
    try:
        return device_info(device).arch
    except Exception:  # an index torch does not see: the run reports it
        return device_info("cuda:0").arch


def _rank(record: CaseRecord) -> int:
    """A record's severity, 0 the worst; a class this version does not know ranks worse still."""
    known = oc.outcome_class(record["outcome"])
    return known.severity if known is not None else -1


def repeated_record(earlier: CaseRecord, later: CaseRecord) -> CaseRecord:
    """A case recorded again (a rerun plugin, a hook that runs an item twice): the worse record
    counts (the earlier on a tie), and `runs` lists every run in the order they came, so that a
    pass never replaces a failed run."""
    runs = list(earlier.get("runs") or [RunRecord(outcome=earlier["outcome"], signature=earlier.get("signature"))])
    runs.append(RunRecord(outcome=later["outcome"], signature=later.get("signature")))
    kept = (later if _rank(later) < _rank(earlier) else earlier).copy()
    kept["runs"] = runs
    return kept


def compile_cache_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Inductor's FX graph cache over the run's compiled sides: hits, misses, bypasses, and how
    many cases compiled with Inductor at all. A warm cache shows as hits."""
    totals = {"hit": 0, "miss": 0, "bypass": 0, "cases": 0}
    for record in records:
        counts = (record.get("extra") or {}).get("compile_cache")
        if isinstance(counts, dict):
            totals["cases"] += 1
            for name in ("hit", "miss", "bypass"):
                value = counts.get(name)
                totals[name] += value if isinstance(value, int) and not isinstance(value, bool) else 0
    return totals


class MatrixSession:
    def __init__(self, spec: Spec, settings: Settings):
        """Raises MatrixError for an unknown profile or a kernel that cannot be imported, so that
        either is one usage error before any case runs."""

        self.settings = settings
        self.profile = spec.profile(settings.profile)
        self.seed = spec.seed if settings.seed is None else settings.seed
        self.spec = spec if self.seed == spec.seed else replace(spec, seed=self.seed)
        self.report_path = settings.report
        self.started = time.time()
        self.timeline = ProcessTimeline(os.environ.get("PYTEST_XDIST_WORKER", "?") if settings.worker else "main")
        self.cases_dir: str | None = None  # where the controller leaves its generated cases
        self._timelines: dict[str, dict] = {}  # each worker's, as its first case carried it
        self._last_record: float | None = None
        self._kernels = resolve_kernels(self.spec.path, self.spec.kernels)
        self._cases: list[Case] | None = None
        self._shard: ShardBlock | None = None  # the report's shard block, for a --scaledmm-shard run
        self._generation_notes: dict = {}
        self._possible: dict = {}  # per kernel, what valid cases can cover (reports/coverage.py)
        self._target_arch: str | None = None
        self._context: RunContext | None = None
        self._spare_child: SpareChild | None = None
        self._fork_server: ForkServer | None = None  # the run's, in the process that owns the run
        self._triage_dir: str | None = None
        self._runner: InProcessRunner | ChildRunner | None = None
        self._triage: Triage | None = None
        self._alone: ReplayAlone | None = None  # judges failures by their replay alone (execution/alone.py)
        self._shrink: ShrinkSequence | None = None  # shortens a failing call sequence (execution/shrink.py)
        self._drawn: dict = {}  # kernel -> the dtypes its cases are drawn with (sequence_plan.drawn_values)
        self._aoti_controls: dict = {}  # device -> the AOTInductor control's answer, once per session
        self._catalogue: Catalogue | None = None
        self._cache = FreshCache()
        self._records: dict[str, CaseRecord] = {}
        self._environment: dict | None = None
        self._code: CodeBlock | None = None  # the digests of the code the run runs, taken once
        # Why the report may not cover the run (see incomplete_reasons): what ended the session
        # early (interrupts, internal errors), and what explains cases without a record.
        self._interruptions: list[str] = []
        self._subset_causes: list[str] = []
        self._finished = False  # the final report: until then every report is partial
        self._signalled: str | None = None  # "SIGINT" / "SIGTERM" received while cases ran
        self.import_dirs: tuple[str, ...] = ()  # put first on sys.path for the kernels (plugin/entry.py)

    # -- what came back, read-only outside ------------------------------------------------------
    @property
    def records(self) -> Mapping[str, CaseRecord]:
        return MappingProxyType(self._records)

    @property
    def environment(self) -> dict | None:
        return self._environment

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def signalled(self) -> str | None:
        return self._signalled

    @property
    def interruptions(self) -> tuple[str, ...]:
        return tuple(self._interruptions)

    # -- collection ---------------------------------------------------------------------------
    @property
    def target_arch(self) -> str:
        """The arch the cases are generated for (support models depend on it): that of the device
        the run asks for, the same in every process of the run."""
        if self._target_arch is None:
            self._target_arch = target_arch(self.settings.device)
        return self._target_arch

    def cases(self) -> list[Case]:
        """The run's cases: the profile's, or this shard's slice of them (plugin/shard.py)."""
        if self._cases is None:
            start = time.monotonic()
            key = generation_key(str(self.spec.path), self.spec.digest, self.profile.name, self.seed, self.target_arch)
            generated = read_generated(self.cases_dir, key) if self.settings.worker else None
            self.timeline.cases_from = "controller" if generated is not None else "generated here"
            if generated is None:
                generated = generate_cases(self.spec, self.profile, self.target_arch)
                if self.cases_dir and not self.settings.worker:
                    write_generated(self.cases_dir, key, generated)
            cases, notes = generated[0], dict(generated[1])
            self._drawn = drawn_values(cases)  # the whole profile's, a shard's too
            self.timeline.generated(time.monotonic() - start)
            self._possible = notes.pop("possible", {})
            self._generation_notes = notes
            shard = getattr(self.settings, "shard", None)
            if shard:
                self._cases = shard_slice(cases, *shard)
                index, count = shard
                self._shard = plain_json(shard_block(index, count, cases, self._cases, self._possible))
            else:
                self._cases = cases
        return self._cases

    def _drawn_values(self) -> dict:
        try:
            self.cases()
        except Exception:
            return {}  # the run reports why it has no cases; no sequence needs them
        return self._drawn

    def pregenerate(self) -> None:
        """Generate now (the controller, while its workers boot): a matrix that cannot be
        generated raises where it did before, when its cases are first asked for."""
        try:
            self.cases()
        except Exception:
            pass

    def share_generated_cases(self) -> None:
        """The controller's directory for the cases it generates once (generated_cases.py)."""
        if self.cases_dir is None and not self.settings.worker:
            self.cases_dir = make_directory()

    def drop_generated_cases(self) -> None:
        if self.cases_dir is not None and not self.settings.worker:
            remove_directory(self.cases_dir)
        self.cases_dir = None

    def empty_shard(self) -> int | None:
        """The matrix's number of cases when this shard's slice holds none of them (more shards
        than cases), else None."""
        self.cases()
        if self._shard is not None and not self._cases and self._shard["total_cases"]:
            return self._shard["total_cases"]
        return None

    # -- running ------------------------------------------------------------------------------
    def context(self) -> RunContext:
        if self._context is None:
            # torch's structured-trace logger emits DEBUG records meant for tlparse; keep them out
            # of pytest's captured-log sections.
            logging.getLogger("torch.__trace").propagate = False

            self._context = RunContext(
                device=resolve_device(self.settings.device),
                run_seed=self.seed,
                kernel_specs={k.name: k for k in self.spec.kernels},
                kernels=self._kernels,
                archs=self.spec.archs,
                slack=self.spec.slack,
                max_autotune_configs=self.settings.max_autotune_configs,
                host_lane=self._runs_host_lane(),
                sequence=self.settings.sequence,
                drawn=self._drawn_values(),
            )
        return self._context

    def _runs_host_lane(self) -> bool:
        """Whether this process is the host lane's worker (schedule.py) and has its cases."""
        if os.environ.get("PYTEST_XDIST_WORKER", HOST_LANE_WORKER) != HOST_LANE_WORKER:
            return False
        return any(builds_host_kernel(case.params) for case in self.cases())

    def environment_to_send(self) -> dict | None:
        """This process's environment the first time it is asked, else None: the first item a
        process runs carries it to the controller."""
        if self._environment is not None:
            return None

        self._environment = plain_json(environment(self.context().device))
        return self._environment

    def kernels(self) -> dict:
        return dict(self._kernels)

    def prestart_child(self) -> None:
        """Spawn the isolated child now, so that its start-up overlaps collection; see isolate.py.
        Only when some kernel can run there (a kernel defined in a conftest runs in-process)."""

        if not self.settings.isolate or self._spare_child is not None or self._runner is not None:
            return
        specs = {k.name: k for k in self.spec.kernels}
        if any(ref is not None for ref in kernel_refs(self._kernels, specs).values()):
            try:
                self._spare_child = SpareChild(self.settings.device, self.compiles_with_inductor())
            except Exception:  # e.g. out of processes or files: the first case starts one, or says why
                self._spare_child = None

    def compiles_with_inductor(self) -> bool:

        modes = {mode for part in self.profile.leaves for mode in self.spec.axes_for(part).get("mode", ())}
        return bool(modes & inductor_modes())

    def runner(self) -> InProcessRunner | ChildRunner:
        """The child process that runs cases (or the in-process runner); started on first use."""
        if self._runner is None:
            isolate = self.settings.isolate
            spare, self._spare_child = self._spare_child, None
            self._runner = make_runner(
                self.context(), isolate, self.settings.timeout, spare, self.compiles_with_inductor()
            )
            if not isolate and self.context().device == "cpu" and self.compiles_with_inductor():
                probe_cpu_vector_isa_in_background()
        return self._runner

    def start_runner(self) -> None:
        """After collection: the child gets its settings and loads the kernels while the first
        case is handed out (a child that cannot start says so in the first case). Only for the
        child prestart_child spawned: without one no kernel runs there."""
        if self._spare_child is None:
            return
        try:
            self.runner().start()
        except Exception:
            pass

    def run(self, case: Case, triage: bool = True) -> oc.Outcome:
        runner = self.runner()
        after = self._after_cases(case)
        if isinstance(after, oc.Outcome):
            return after
        if after:
            earlier = after
            result = runner.run_after(after, case)
        else:
            earlier = list(runner.earlier)
            result = runner.run(case)
        result = self._aoti_controlled(case, result)
        if self._alone is None:
            self._alone = ReplayAlone(runner, self._aoti_controlled)
        began = time.perf_counter()
        result = self._alone.judge(case, result, earlier)
        if result.observations.replayed_alone is not None:
            result.timing["replay_alone_s"] = round(time.perf_counter() - began, 6)
        if self._shrink is None:
            self._shrink = ShrinkSequence(runner, self._aoti_controlled, named=self.settings.sequence is not None)
        began = time.perf_counter()
        result = self._shrink.judge(case, result)
        shrunk = (result.observations.sequence or {}).get("shrunk")
        if isinstance(shrunk, dict) and shrunk.get("replays"):
            result.timing["shrink_s"] = round(time.perf_counter() - began, 6)
        if result.outcome in (oc.CRASH, oc.TIMEOUT) and result.observations.other_m is None:
            # The process died before its record named the call at another M: name it here.
            planned = planned_other_m(case, self.context())
            result.observations.other_m = planned[0]["m"] if planned else None
        if result.outcome in (oc.CRASH, oc.TIMEOUT) and result.observations.sequence is None:
            # ... and the steps of its call sequence (made or not: the repro script makes them).
            result.observations.sequence = planned_sequence_record(case, self.context())
        startup = runner.take_startup_seconds()
        if startup:
            result.timing["startup_s"] = round(startup, 6)
        if triage and result.failed:
            start = time.perf_counter()
            found = self.triage(case, result)
            result.timing["triage_s"] = round(time.perf_counter() - start, 6)
            if found:
                result.observations.triage = found
        return result

    def _after_cases(self, case: Case) -> list[Case] | oc.Outcome:
        """The cases --scaledmm-after runs before `case`; a HARNESS_ERROR outcome when this
        profile does not generate one of them (the replay would not be the finding's)."""
        if not self.settings.after:
            return []
        by_id = {c.id: c for c in self.cases()}
        missing = [case_id for case_id in self.settings.after if case_id not in by_id]
        if missing:
            return oc.Outcome(
                oc.HARNESS_ERROR,
                signature="HARNESS_ERROR: --scaledmm-after names a case this run does not generate",
                detail=f"--scaledmm-after names {missing[0]}, which profile {self.profile.name!r} does not generate",
            )
        return [by_id[case_id] for case_id in self.settings.after if case_id != case.id]

    def _aoti_controlled(self, case: Case, result: oc.Outcome) -> oc.Outcome:
        """An aoti case that failed while its package loaded or ran, judged against the
        AOTInductor control (execution/aoti_control.py), run on the first such case only."""

        stage = failed_stage(case, result)
        if stage is None:
            return result
        device = self.context().device
        if device not in self._aoti_controls:
            # A control that died cannot say its device and dtype: both are known here.
            self._aoti_controls[device] = {
                "device": device,
                "dtype": control_dtype(device),
                **self.runner().aoti_control(case),
                "ran_for": case.id,
            }
        return apply_control(result, stage, self._aoti_controls[device])

    def triage(self, case: Case, result: oc.Outcome) -> dict | None:
        """The triage ladder for a failing case (None when --no-scaledmm-triage or nothing found)."""
        if not self.settings.triage:
            return None
        if self._triage is None:
            shared = os.environ.get(SHARED_DIR_ENV)
            self._triage = Triage(self.runner(), self.context().device, self.settings.triage_budget, shared)
        return self._triage(case, result)

    def close(self) -> None:
        if self._spare_child is not None:
            self._spare_child.close()
            self._spare_child = None
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self._fork_server is not None:  # after the children it forked
            self._fork_server.close()
            self._fork_server = None

    # -- records ------------------------------------------------------------------------------
    def harness_error_record(self, case: Case, error: BaseException | str, when: str = "call") -> CaseRecord:
        """The record of a case the harness could not run or check: the case is never dropped."""

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
    def record(case: Case, result: oc.Outcome) -> CaseRecord:
        """The report's record of one case, field by field, JSON-plain."""
        extra = result.observations.to_json()
        triage = extra.pop("triage", None)
        record = CaseRecord(
            id=case.id,
            params=case.to_json(),
            outcome=result.outcome,
            signature=result.signature,
            layer=result.layer,
            detail=result.detail,
            root_cause=result.root_cause,
            met=result.met,
            errors=checks_record(result.errors),
            timing=result.timing,
            eager_error=error_record(result.eager_error),
            compiled_error=error_record(result.compiled_error),
            extra=extra,
        )
        if triage:
            record["triage"] = triage
        return plain_record(record)

    def apply_known_failures(self, record: CaseRecord) -> CaseRecord:
        """matrix.yaml's known_failures on one record: an expected failure becomes XFAIL, a listed
        case that passes becomes FIXED_UPSTREAM (see known_failures.py)."""
        if not self.spec.known_failures:
            return record
        if self._catalogue is None:
            self._catalogue = Catalogue.from_spec(self.spec)
        env = self._environment or {}
        return self._catalogue.apply(record, str(env.get("torch") or ""), env.get("arch"))

    def add_record(self, record: CaseRecord, environment: dict | None = None) -> None:
        """A case's record as it reached this process, and the environment of the process that
        ran it (the first one given is kept); a case recorded again keeps its worst run."""
        if self._environment is None and environment is not None:
            self._environment = environment
        self._last_record = time.time()
        if "model" not in record:
            env = self._environment or {}
            record = record.copy()
            record["model"] = model_block(record, self.target_arch, str(env.get("torch") or ""))
        earlier = self._records.get(record["id"])
        self._records[record["id"]] = record if earlier is None else repeated_record(earlier, record)

    def add_timeline(self, timeline: dict | None) -> None:
        """A worker's timeline (plugin/timeline.py), as its first case carried it here."""
        if isinstance(timeline, dict):
            self._timelines[str(timeline.get("process"))] = timeline

    def repeated(self) -> list[CaseRecord]:
        """The records of cases that ran more than once."""
        return [record for record in self._records.values() if len(record.get("runs") or ()) > 1]

    # -- caches -------------------------------------------------------------------------------
    def use_fresh_cache(self) -> None:
        """Give this run its own Inductor/Triton cache (execution/cache.py)."""
        self._cache.claim()

    def share_triage_claims(self) -> None:
        """The directory in which this run's processes claim failure signatures to triage, so
        that each is triaged once in the run (execution/triage.py); made by the controller. The
        run's fork server starts here too, for the same reason (execution/forkserver.py)."""
        if not self.settings.worker and self.settings.triage and not os.environ.get(SHARED_DIR_ENV):
            self._triage_dir = tempfile.mkdtemp(prefix="scaledmm-triage-")
            os.environ[SHARED_DIR_ENV] = self._triage_dir
        if not self.settings.worker and self.settings.isolate and self._fork_server is None:
            self._fork_server = start_fork_server(self._kernels, self.spec.kernels, self.compiles_with_inductor())

    def drop_triage_claims(self) -> None:
        if self._triage_dir is None:
            return
        shutil.rmtree(self._triage_dir, ignore_errors=True)
        if os.environ.get(SHARED_DIR_ENV) == self._triage_dir:
            del os.environ[SHARED_DIR_ENV]
        self._triage_dir = None

    def drop_owned_cache(self) -> None:
        self._cache.release()

    # -- how the session ends -----------------------------------------------------------------
    def note_signal(self, name: str) -> None:
        """SIGTERM or SIGINT arrived while cases ran; a SIGTERM is never hidden by a SIGINT."""
        if name == "SIGTERM" or self._signalled is None:
            self._signalled = name

    def interrupted(self, reason: str) -> None:
        if reason not in self._interruptions:
            self._interruptions.append(reason)

    def finish(self, subset_causes: list[str]) -> None:
        """The session is over; `subset_causes` say why some cases may not have run."""
        self._finished = True
        self._subset_causes = list(subset_causes)
        if self._environment is None and self.empty_shard() is not None:
            # No case brought one; `scaledmm merge` checks every shard's environment.
            self.environment_to_send()

    # -- reporting ----------------------------------------------------------------------------
    def code(self) -> CodeBlock:
        """The digests of the kernels' code and the plugin's (matrix/code_digest.py), taken the
        first time they are asked for: the controller asks at configure, before any case runs."""
        if self._code is None:
            roots = self.import_dirs or (str(self.spec.path.parent),)
            self._code = plain_json(code_block(self.spec.kernels, self._kernels, roots))
        return self._code

    def matrix_block(self) -> dict:
        cases = self.cases()  # the xdist controller has not collected: generate here
        return {
            "path": str(self.spec.path),
            "hash": self.spec.digest,
            "profile": self.profile.name,
            "seed": self.seed,
            "cases": len(cases),
            "arch": self.target_arch,
            "generation": self._generation_notes,
            "code": self.code(),
            # The seed and device the run was given, for replay commands (reports/cause_text.py).
            "forced": forced_options(self.settings.seed, self.settings.device),
            "tolerance": {
                "slack": self.spec.slack,
                # Kernels with a slack of their own, and why (the gate refuses a looser one).
                "kernels": {k.name: {"slack": k.slack, "reason": k.slack_reason} for k in self.spec.kernels if k.slack},
            },
        }

    def replay_command(self, case_id: str, record: Mapping | None = None) -> str:
        """The command that replays one case of this run from any directory (`record`: the
        case's, when it is not yet among the run's records)."""
        record = record if record is not None else self._records.get(case_id)
        return replay_command(
            str(self.spec.path),
            case_id,
            self.profile.name,
            self.settings.seed,
            self.settings.device,
            self._environment,
            after_of(record),
            sequence_of(record),
        )

    def counts(self) -> Counter:
        return Counter(r["outcome"] for r in self._records.values())

    def missing_ids(self) -> list[str]:
        return [case.id for case in self.cases() if case.id not in self._records]

    def incomplete_reasons(self) -> list[str]:
        """Empty when every generated case has a record and nothing cut the session short."""
        reasons = []
        if not self._finished:
            reasons.append("written while the run was in progress")
        missing = self.missing_ids()
        if missing:
            reasons.append(
                f"{len(missing)} of {len(self.cases())} generated case(s) have no record (e.g. {missing[0]})"
            )
            reasons += self._subset_causes
        if self.settings.explore is not None:
            reasons.append("explore mode: hypothesis searched the axes instead of running the profile's cases")
        return reasons + [r for r in self._interruptions if r not in reasons]

    def coverage_lines(self) -> list[str]:
        """What the run really tested, for the terminal summary (reports/coverage.py)."""

        records = self._records.values()
        block = coverage_block(records, self._possible, self.target_arch)
        lines = coverage_lines(block, records)
        # pytest counts as skipped every case it was told to skip (UNSUPPORTED ones too): the tested
        # line gives the same number, by outcome.
        skipped: dict = {}
        for record in records:
            known = oc.outcome_class(record.get("outcome"))
            if known is not None and known.pytest_status == "skipped":
                skipped[record["outcome"]] = skipped.get(record["outcome"], 0) + 1
        tail = f", {block['cases']['skipped']} skipped"
        if lines and lines[0].startswith("tested: ") and lines[0].endswith(tail):
            by_outcome = ", ".join(f"{outcome} {count}" for outcome, count in sorted(skipped.items()))
            lines[0] = (
                lines[0][: -len(tail)]
                + f", {sum(skipped.values())} skipped"
                + (f" ({by_outcome})" if by_outcome else "")
            )
        return lines

    def build_report(self) -> Report:
        """The report as it stands: partial (complete: false) until the session has finished."""

        reasons = self.incomplete_reasons()

        session = {
            "started": iso_time(self.started),
            "wall_s": round(time.time() - self.started, 3),
            "complete": not reasons,
            "incomplete_reasons": reasons,
            "generated": len(self.cases()),
            "recorded": len(self._records),
            "compile_cache": compile_cache_counts(self._records.values()),
            "phases": phases_block(self.started, self.timeline, self._timelines, self._last_record),
        }

        report = build_report(self._environment or {}, self.matrix_block(), self._records.values(), session)
        report["coverage"] = coverage_block(self._records.values(), self._possible, self.target_arch)
        if self._shard is not None:
            report["shard"] = self._shard
        return report
