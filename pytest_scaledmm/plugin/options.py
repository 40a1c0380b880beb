"""Command-line options, declared once for the pytest plugin and the `scaledmm` console script.
The plugin reads their values through settings.py only."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

DEVICE_CHOICES_HELP = "auto (cuda when torch sees a GPU, else cpu), cpu, cuda (xdist worker gwN takes GPU N mod GPUs) or cuda:N"


@dataclass(frozen=True)
class Option:
    flag: str  # pytest spelling; the console script drops the "scaledmm-" prefix
    help: str
    kwargs: dict = field(default_factory=dict)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def cli_flag(self) -> str:
        return self.flag.replace("--scaledmm-", "--")


MATRIX = Option(
    "--scaledmm-matrix",
    "run the scaled-mm compatibility matrix from PATH (default: matrix.yaml in the rootdir)",
    {"nargs": "?", "const": "matrix.yaml", "default": None, "metavar": "PATH"},
)
PROFILE = Option("--scaledmm-profile", "profile of matrix.yaml bounding the cases (default: default)", {"default": "default"})
REPORT = Option(
    "--scaledmm-report",
    "write the JSON report to PATH (default: .scaledmm/reports/<time>.json under the rootdir)",
    {"default": None, "metavar": "PATH"},
)
SEED = Option("--scaledmm-seed", "seed for case generation and inputs (default: the matrix's seed)", {"type": int, "default": None})
DEVICE = Option("--scaledmm-device", f"device to run on: {DEVICE_CHOICES_HELP}", {"default": "auto"})
REUSE_CACHE = Option(
    "--scaledmm-reuse-cache",
    "reuse the Inductor/Triton cache in the environment instead of a fresh one for this run",
    {"action": "store_true", "default": False},
)
BASELINE = Option(
    "--scaledmm-baseline",
    "gate against this earlier report: fail the session on a case that newly fails, on an incomplete"
    " run, on missing cases and on capability lost",
    {"default": None, "metavar": "REPORT"},
)
ALLOW_MISSING = Option(
    "--scaledmm-allow-missing",
    "let the gate compare a partial run: an incomplete report and baseline cases missing from the"
    " candidate are notes instead of failures",
    {"action": "store_true", "default": False},
)
ALLOW_CAPABILITY_LOSS = Option(
    "--scaledmm-allow-capability-loss",
    "let the gate accept cases that ran in the baseline and are UNSUPPORTED or SKIPPED now (a note"
    " instead of a failure)",
    {"action": "store_true", "default": False},
)
STRICT_ERRORS = Option(
    "--scaledmm-strict-errors",
    "fail the run (and the gate) on error parity on invalid input too: boundary cases where eager and"
    " compiled raise differently (BOUNDARY_PARITY), otherwise counted and shown as tolerated",
    {"action": "store_true", "default": False},
)

TIMEOUT = Option(
    "--scaledmm-timeout",
    "seconds one case may take (eager, compile, run) before its process is killed: TIMEOUT (default 300;"
    " a max-autotune compile can take tens of seconds)",
    {"type": float, "default": 300.0, "metavar": "SECONDS"},
)
ISOLATE = Option(
    "--scaledmm-isolate",
    "run cases in a child process restarted after a crash or hang (yes, default) or in the pytest"
    " process itself (no: for a debugger; no timeout, a crash ends the run)",
    {"choices": ["yes", "no"], "default": "yes"},
)
REPRO_DIR = Option(
    "--scaledmm-repro-dir",
    "write one standalone repro script per failure signature into DIR",
    {"default": None, "metavar": "DIR"},
)
TRIAGE = Option(
    "--scaledmm-triage",
    "walk the triage ladder for one failing case per signature (backends, bf16, fresh cache, GEMM"
    " backends, scale rank); on by default",
    {"action": argparse.BooleanOptionalAction, "default": True},
)
TRIAGE_BUDGET = Option(
    "--scaledmm-triage-budget",
    "seconds of triage per process, after which further signatures are not triaged (default 600)",
    {"type": float, "default": 600.0, "metavar": "SECONDS"},
)
CASE = Option(
    "--scaledmm-case",
    "run only the case with this id (repeatable); ids are the same as in the report",
    {"action": "append", "default": None, "metavar": "ID"},
)
EXPLORE = Option(
    "--scaledmm-explore",
    "search the matrix's axes with hypothesis instead of running the profile's cases; minimal"
    " failures are saved to the corpus",
    {"action": "store_true", "default": False},
)
EXPLORE_EXAMPLES = Option(
    "--scaledmm-explore-examples",
    "examples hypothesis tries per kernel in explore mode (default 100)",
    {"type": int, "default": 100, "metavar": "N"},
)
CORPUS = Option(
    "--scaledmm-corpus",
    "corpus file explore mode adds its minimal failures to (default scaledmm-corpus.yaml beside the"
    " matrix, a file to commit); list it under `include:` in matrix.yaml to replay them",
    {"default": None, "metavar": "PATH"},
)

MAX_AUTOTUNE_CONFIGS = Option(
    "--scaledmm-max-autotune-configs",
    "GEMM configs an autotuning mode may benchmark per case (default 4; 0 = Inductor's full search)",
    {"type": int, "default": 4, "metavar": "N"},
)
FIRST_FAILURE = Option(
    "--scaledmm-first-failure",
    "run the cases most likely to fail first: last run's failures, then mixed-rank scale pairs under Inductor",
    {"action": "store_true", "default": False},
)

PLUGIN_OPTIONS = [
    MATRIX,
    MAX_AUTOTUNE_CONFIGS,
    FIRST_FAILURE,
    PROFILE,
    REPORT,
    SEED,
    DEVICE,
    REUSE_CACHE,
    BASELINE,
    ALLOW_MISSING,
    ALLOW_CAPABILITY_LOSS,
    STRICT_ERRORS,
    TIMEOUT,
    ISOLATE,
    REPRO_DIR,
    TRIAGE,
    TRIAGE_BUDGET,
    CASE,
    EXPLORE,
    EXPLORE_EXAMPLES,
    CORPUS,
]

SHARD = Option(
    "--scaledmm-shard",
    "run shard I of N (1-based, e.g. 2/4): every shard generates the same full case list and keeps"
    " its part, balanced by expected cost; join the shards' reports with `scaledmm merge`",
    {"default": None, "metavar": "I/N"},
)
KEEP = Option(
    "--scaledmm-keep",
    "after the run, keep only the N newest reports in the default report directory"
    " (<project>/.scaledmm/reports); only reports this plugin named there are removed (N >= 1)",
    {"type": int, "default": None, "metavar": "N"},
)
PLUGIN_OPTIONS += [SHARD, KEEP]


def add_pytest_options(group) -> None:
    for option in PLUGIN_OPTIONS:
        group.addoption(option.flag, dest=option.dest, help=option.help, **option.kwargs)


def check_seconds(option: Option, value: float) -> str | None:
    """None when `value` is a finite number of seconds above 0, else the message naming the option."""
    import math

    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return None
    return f"{option.flag} must be a finite number of seconds above 0, got {value!r}"


def validate_device(value: str) -> str | None:
    """None when the value is acceptable, else the message."""
    if value in ("auto", "cpu", "cuda"):
        return None
    if value.startswith("cuda:") and value[5:].isdigit():
        return None
    return f"unknown value {value!r} for --scaledmm-device: use {DEVICE_CHOICES_HELP}"
