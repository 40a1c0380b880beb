"""What a matrix run was asked to do: every --scaledmm-* option, checked and resolved once in
pytest_configure into one frozen Settings. The rest of the plugin reads the Settings, never
config.getoption; a bad value is one usage error before anything runs."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..matrix.errors import MatrixError
from ..matrix.replay_command import MATRIX_SUFFIXES, parse_recorded_on, valid_case_id
from ..reports.files import write_problem
from ..reports.report_dir import check_keep, default_report_dir, default_report_name
from . import options as opt
from .sources import Sources, resolve_options


@dataclass(frozen=True)
class ExploreSettings:
    examples: int  # hypothesis examples per kernel
    corpus: Path  # where minimal failures are added


@dataclass(frozen=True)
class Settings:
    matrix: Path  # the matrix file, resolved
    profile: str
    seed: int | None  # None: the matrix's own seed
    device: str  # as requested: auto, cpu, cuda, cuda:N
    report: Path  # where the controller writes the report
    worker: bool  # an xdist worker: it runs cases, the controller gathers and writes
    reuse_cache: bool
    isolate: bool
    timeout: float
    triage: bool
    triage_budget: float
    max_autotune_configs: int
    cases: tuple[str, ...]  # --scaledmm-case ids; empty: every case
    explore: ExploreSettings | None
    repro_dir: Path | None
    first_failure: bool
    baseline: str | None
    allow_missing: bool
    allow_capability_loss: bool
    allow_worse: bool
    allow_looser_slack: bool
    allow_unchecked: tuple[str, ...]
    strict_errors: bool  # error parity on invalid input fails the run; recorded as session.strict_errors
    shard: tuple[int, int] | None = None  # --scaledmm-shard (I, N), 1-based; None: every case
    keep: int | None = None  # --scaledmm-keep: reports kept in the default report directory
    recorded_on: dict | None = None  # --scaledmm-recorded-on, parsed: {"torch": ..., "tox": ...}
    strict_coverage: bool = False  # a value a limit keeps from a checked case fails the run
    after: tuple[str, ...] = ()  # --scaledmm-after: case ids run before each case, in a fresh process
    sequence: tuple[int, ...] | None = None  # --scaledmm-sequence: the calls after the first each case makes

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings | None:
        """None unless --scaledmm-matrix was given; pytest.UsageError for a bad value, naming
        where it came from (the command line, a SCALEDMM_* variable, the ini file)."""

        sources = resolve_options(config)  # every option's value, written back to config.option
        get = config.getoption
        matrix = get(opt.MATRIX.dest)
        if matrix is None:
            return None
        device = get(opt.DEVICE.dest)
        problem = opt.validate_device(device)
        if problem and sources.given[opt.DEVICE.dest].origin in ("environment", "ini"):
            problem = sources.problem(opt.DEVICE, f"not a device; use {opt.DEVICE_CHOICES_HELP}")
        for option in (opt.TIMEOUT, opt.TRIAGE_BUDGET):
            seconds = opt.seconds_problem(get(option.dest))
            if seconds and not problem:
                problem = (
                    sources.problem(option, seconds)
                    if sources.given[option.dest].origin != "command line"
                    else opt.check_seconds(option, get(option.dest))
                )
        # Whole-number settings in range: a negative config count would reach Inductor as it is.
        for option, low, high in (
            (opt.SEED, 0, 2**63 - 1),
            (opt.MAX_AUTOTUNE_CONFIGS, 0, 10**6),
            (opt.EXPLORE_EXAMPLES, 1, 10**9),
        ):
            value = get(option.dest)
            if value is not None and not problem and not low <= value <= high:
                problem = sources.problem(option, f"must be a whole number from {low} to {high}, got {value}")
        if problem:
            raise pytest.UsageError(problem)
        if device.startswith("cuda") and not is_worker(config):  # the controller checked it
            from ..execution.device import resolve_device  # noqa: PLC0415  lazy: every pytest session loads settings

            try:  # an explicit GPU that is not there: one usage error now, not one per case
                resolve_device(device)
            except RuntimeError as exc:
                raise pytest.UsageError(str(exc)) from None
        cases = tuple(get(opt.CASE.dest) or ())
        matrix_path = _matrix_path(config, matrix)
        _check_matrix_conftest(config, matrix_path)
        explore = None
        if get(opt.EXPLORE.dest):
            if cases:
                raise pytest.UsageError("--scaledmm-explore searches the axes; it does not take --scaledmm-case")
            if get(opt.SHARD.dest) is not None:  # every shard would search the same axes
                raise pytest.UsageError(
                    f"{sources.label(opt.SHARD)}: --scaledmm-explore searches the axes; it is not split into shards"
                )

            corpus = get(opt.CORPUS.dest)
            from ..matrix.corpus import DEFAULT_NAME  # noqa: PLC0415  lazy: every pytest session loads settings

            explore = ExploreSettings(
                max(1, get(opt.EXPLORE_EXAMPLES.dest)),
                Path(corpus).resolve() if corpus else matrix_path.parent / DEFAULT_NAME,
            )
        if getattr(config.option, "dist", "no") == "each":  # xdist's option, absent without it
            raise pytest.UsageError(
                "--dist each: every worker would run every case, and a case has one record in the report;"
                " use --dist load (or -n alone) to run each case once"
            )
        report = get(opt.REPORT.dest)
        repro_dir = Path(get(opt.REPRO_DIR.dest)).resolve() if get(opt.REPRO_DIR.dest) else None
        if not (is_worker(config) or config.option.help):
            _check_run_files(config, sources, explore, repro_dir)
        return cls(
            matrix=matrix_path,
            profile=get(opt.PROFILE.dest),
            seed=get(opt.SEED.dest),
            device=device,
            report=Path(report).resolve() if report else _default_report_path(config, matrix_path),
            worker=is_worker(config),
            reuse_cache=get(opt.REUSE_CACHE.dest),
            isolate=get(opt.ISOLATE.dest) == "yes",
            timeout=get(opt.TIMEOUT.dest),
            triage=get(opt.TRIAGE.dest),
            triage_budget=get(opt.TRIAGE_BUDGET.dest),
            max_autotune_configs=get(opt.MAX_AUTOTUNE_CONFIGS.dest),
            cases=cases,
            explore=explore,
            repro_dir=repro_dir,
            first_failure=get(opt.FIRST_FAILURE.dest),
            baseline=get(opt.BASELINE.dest),
            allow_missing=get(opt.ALLOW_MISSING.dest),
            allow_capability_loss=get(opt.ALLOW_CAPABILITY_LOSS.dest),
            allow_worse=get(opt.ALLOW_WORSE.dest),
            allow_looser_slack=get(opt.ALLOW_LOOSER_SLACK.dest),
            allow_unchecked=tuple(get(opt.ALLOW_UNCHECKED.dest) or ()),
            strict_errors=get(opt.STRICT_ERRORS.dest),
            strict_coverage=bool(get(opt.STRICT_COVERAGE.dest)),
            recorded_on=_recorded_on(get, sources),
            after=_after(get, sources),
            sequence=_sequence(get, sources),
            **_ci_settings(get, sources),
        )


def _after(get: Callable[[str], Any], sources: Sources) -> tuple[str, ...]:
    """--scaledmm-after's ids; a usage error naming the option for one this plugin never writes."""
    text = get(opt.AFTER.dest)
    if not text:
        return ()
    ids = tuple(part.strip() for part in str(text).split(","))
    bad = [case_id for case_id in ids if not valid_case_id(case_id)]
    if bad:
        raise pytest.UsageError(f"{sources.label(opt.AFTER)}: {bad[0]!r} is not a case id")
    return ids


def _sequence(get: Callable[[str], Any], sources: Sources) -> tuple[int, ...] | None:
    """--scaledmm-sequence's indices; a usage error naming the option for anything else."""
    text = get(opt.SEQUENCE.dest)
    if text is None or str(text).strip() == "":
        return None
    parts = [part.strip() for part in str(text).split(",")]
    bad = [part for part in parts if not (part.isascii() and part.isdigit() and len(part) <= 3)]
    if bad:
        raise pytest.UsageError(
            f"{sources.label(opt.SEQUENCE)}: {bad[0]!r} is not an index of a call (0, 1, 2 ...); give them"
            " comma-separated, as a record's replay command does"
        )
    return tuple(sorted({int(part) for part in parts}))


def is_worker(config: pytest.Config) -> bool:
    """An xdist worker: it runs cases; the controller gathers their records and writes the report."""
    return hasattr(config, "workerinput")


def requested_report(config: pytest.Config) -> str | None:
    """--scaledmm-report as given: for a run refused before its Settings exist."""
    return config.getoption(opt.REPORT.dest, None)


def writes_report(config: pytest.Config, settings: Settings) -> bool:
    """Whether this process writes the report: not an xdist worker, --collect-only or --help."""
    option = config.option
    return not (settings.worker or option.collectonly or option.help)


MATRIX_FILE = "matrix.yaml"  # what a directory given as the matrix holds


def _matrix_path(config: pytest.Config, matrix: str) -> Path:
    # Relative to where pytest was invoked when the file is there, else to the rootdir; a
    # directory stands for its matrix.yaml.
    path = Path(matrix)
    if not path.is_absolute():
        invocation = Path(config.invocation_params.dir)
        path = invocation / path if (invocation / path).exists() else Path(config.rootpath) / path
    if path.is_dir():
        path = path / MATRIX_FILE
    return path.resolve()


def _check_matrix_conftest(config: pytest.Config, matrix_path: Path) -> None:
    """The conftest.py beside the matrix may declare kernels (pytest_scaledmm_kernels); pytest
    loads it before the run only when pytest was started in that directory or given a path in
    it. Without it those kernels would be left out without a word."""
    conftest = matrix_path.parent / "conftest.py"
    if not conftest.is_file():
        return
    loaded = {
        Path(str(getattr(plugin, "__file__", "") or "")).resolve() for plugin in config.pluginmanager.get_plugins()
    }
    if conftest.resolve() not in loaded:
        # A bare --scaledmm-matrix takes the matrix from a path argument named *.yaml or *.yml.
        value = "" if matrix_path.suffix in MATRIX_SUFFIXES else f" {matrix_path}"
        raise pytest.UsageError(
            f"{conftest} was not loaded (pytest loads the conftest.py files of the paths it is given): give the"
            f" matrix as a path, `pytest {matrix_path} --scaledmm-matrix{value}`,"
            f" or run pytest in {matrix_path.parent}"
        )


def _check_run_files(
    config: pytest.Config, sources: Sources, explore: ExploreSettings | None, repro: Path | None
) -> None:
    """The files a run reads or writes besides the matrix and its report (entry.py claims that):
    a bad one is one usage error now, not a traceback once the cases have run."""
    if explore is not None:
        problem = _corpus_problem(explore.corpus)
        if problem:
            raise pytest.UsageError(sources.problem(opt.CORPUS, problem))
    if repro is not None:
        problem = write_problem(repro, directory=True)
        if problem:
            raise pytest.UsageError(sources.problem(opt.REPRO_DIR, f"{repro}: {problem}"))
    junit = getattr(config.option, "xmlpath", None)  # pytest's junitxml writes it after the last case
    if junit:
        path = Path(config.invocation_params.dir, os.path.expanduser(os.path.expandvars(junit)))
        problem = write_problem(path)
        if problem:
            raise pytest.UsageError(f"--junitxml: {path}: {problem}")


def _corpus_problem(path: Path) -> str | None:
    """An existing corpus must be one (explore adds to it); a new one, writable where it goes."""
    from ..matrix.corpus import read_entries  # noqa: PLC0415  lazy: every pytest session loads settings

    if os.path.lexists(path) and not path.is_dir():
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            regular = False
        if not regular:  # a device or a FIFO would be read forever, then renamed over
            return f"{path}: it is there and is not a regular file"
        try:
            read_entries(path)
        except MatrixError as exc:
            return str(exc)
    problem = write_problem(path)
    return f"{path}: {problem}" if problem else None


def _default_report_path(config: pytest.Config, matrix_path: Path) -> Path:
    # The matrix's project, not pytest's rootdir guess (reports/report_dir.py).

    return default_report_dir(matrix_path, getattr(config.option, "rootdir", None)) / default_report_name()


def _recorded_on(get: Callable[[str], Any], sources: Sources) -> dict | None:

    value = get(opt.RECORDED_ON.dest)
    if value is None:
        return None
    try:
        return parse_recorded_on(value)
    except ValueError as exc:
        raise pytest.UsageError(sources.problem(opt.RECORDED_ON, str(exc))) from None


def _ci_settings(get: Callable[[str], Any], sources: Sources) -> dict:
    """--scaledmm-shard and --scaledmm-keep, checked (plugin/shard.py, reports/report_dir.py); a
    bad value names where it came from (the flag, SCALEDMM_SHARD=..., the ini file's line)."""

    keep = get(opt.KEEP.dest)
    problem = check_keep(keep)
    if problem:
        raise pytest.UsageError(sources.problem(opt.KEEP, problem))
    shard = get(opt.SHARD.dest)
    from .shard import parse_shard, shard_problem  # noqa: PLC0415  lazy: every pytest session loads settings

    problem = shard_problem(shard) if shard is not None else None
    if problem:
        raise pytest.UsageError(sources.problem(opt.SHARD, problem))
    return {"shard": parse_shard(shard), "keep": keep}
