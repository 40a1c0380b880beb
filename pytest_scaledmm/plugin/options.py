"""Command-line options, declared once for the pytest plugin and the `scaledmm` console script.
The plugin reads their values through settings.py only.

Every plugin option is also an ini option (`scaledmm_profile`, in pyproject.toml's
[tool.pytest.ini_options], pytest.ini, tox.ini or setup.cfg) and an environment variable
(`SCALEDMM_PROFILE`); the command line wins, then the environment, then the ini file, then the
default (sources.py resolves them)."""

from __future__ import annotations

import argparse
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import pytest

DEVICE_CHOICES_HELP = (
    "auto (cuda when torch sees a GPU, else cpu), cpu, cuda (xdist worker gwN takes GPU N mod GPUs) or cuda:N"
)


def integer(value: object) -> int:
    """An integer written in ASCII digits: int() also reads "٣" and "1_000", which no shell,
    ini file or report spells a number as."""
    if type(value) is int:
        return value
    text = value.strip() if isinstance(value, str) else value
    if not isinstance(text, str) or not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f"invalid int value: {value!r}")
    return int(text)


integer.__name__ = "int"  # argparse names the type in its message


@dataclass(frozen=True)
class Option:
    flag: str  # pytest spelling; the console script drops the "scaledmm-" prefix
    help: str
    kwargs: dict = field(default_factory=dict)
    path: bool = False  # a file or directory: relative to the ini file when it comes from there

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def ini_name(self) -> str:
        return self.dest

    @property
    def env_name(self) -> str:
        return self.dest.upper()

    @property
    def default(self) -> Any:
        return self.kwargs.get("default")

    @property
    def kind(self) -> str:
        """flag (on/off), list (repeatable) or value."""
        action = self.kwargs.get("action")
        if action in ("store_true", argparse.BooleanOptionalAction):
            return "flag"
        if action == "append":
            return "list"
        return "value"

    def cli_flag(self) -> str:
        return self.flag.replace("--scaledmm-", "--")


MATRIX = Option(
    "--scaledmm-matrix",
    "run the scaled-mm compatibility matrix from PATH, relative to the current directory when it is"
    " there, else to the rootdir; a directory stands for its matrix.yaml (default: matrix.yaml)",
    {"nargs": "?", "const": "matrix.yaml", "default": None, "metavar": "PATH"},
    path=True,
)
PROFILE = Option(
    "--scaledmm-profile",
    "profile bounding the cases: a key of the matrix file's own `profiles:`, which an unknown name lists"
    " (default: default; pytest-scaledmm's own matrix.yaml has smoke, default, full, bench and frontier)",
    {"default": "default", "metavar": "NAME"},
)
REPORT = Option(
    "--scaledmm-report",
    "write the JSON report to PATH (default: <project>/.scaledmm/reports/report-<UTC time>-<pid>.json,"
    " the project being the nearest directory at or above the matrix with pytest.ini, pyproject.toml,"
    " tox.ini, setup.cfg or setup.py (else the matrix's directory), or --rootdir when given)",
    {"default": None, "metavar": "PATH"},
    path=True,
)
SEED = Option(
    "--scaledmm-seed",
    "seed for case generation and inputs (default: the matrix's seed)",
    {"type": integer, "default": None, "metavar": "N"},
)
DEVICE = Option(
    "--scaledmm-device", f"device to run on: {DEVICE_CHOICES_HELP}", {"default": "auto", "metavar": "DEVICE"}
)
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
    path=True,
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
ALLOW_WORSE = Option(
    "--scaledmm-allow-worse",
    "let the gate accept cases that fail in both reports the same way but by much more (error/bound"
    " past 10x, off elements, rows or columns past 2x): a note instead of a failure",
    {"action": "store_true", "default": False},
)
ALLOW_LOOSER_SLACK = Option(
    "--scaledmm-allow-looser-slack",
    "let the gate accept a kernel whose own tolerance slack is larger than in the baseline (a note"
    " naming the kernel, both slacks and the reason instead of a failure)",
    {"action": "store_true", "default": False},
)
ALLOW_UNCHECKED = Option(
    "--scaledmm-allow-unchecked",
    "let the gate accept that the candidate checked less than the baseline for what PATTERN names"
    " (repeatable; fnmatch): KERNEL, KERNEL:SIDE or KERNEL:SIDE:AXIS=VALUE, as the gate's"
    " 'not proven' lines name them; a note instead of a failure",
    {"action": "append", "default": None, "metavar": "PATTERN"},
)
STRICT_ERRORS = Option(
    "--scaledmm-strict-errors",
    "fail the run (and the gate) on error parity on invalid input too: boundary cases where eager and"
    " compiled raise differently (BOUNDARY_PARITY), otherwise counted and shown as tolerated",
    {"action": "store_true", "default": False},
)
STRICT_COVERAGE = Option(
    "--scaledmm-strict-coverage",
    "fail the run when a limit the matrix sets (`limits:`) keeps a value or shape class of a kernel's"
    " space from a checked case (the summary's 'not proven' lines)",
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
    path=True,
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
    {"type": integer, "default": 100, "metavar": "N"},
)
CORPUS = Option(
    "--scaledmm-corpus",
    "corpus file explore mode adds its minimal failures to (default scaledmm-corpus.yaml beside the"
    " matrix, a file to commit); list it under `include:` in matrix.yaml to replay them",
    {"default": None, "metavar": "PATH"},
    path=True,
)

MAX_AUTOTUNE_CONFIGS = Option(
    "--scaledmm-max-autotune-configs",
    "GEMM configs an autotuning mode may benchmark per case (default 4; 0 = Inductor's full search)",
    {"type": integer, "default": 4, "metavar": "N"},
)
FIRST_FAILURE = Option(
    "--scaledmm-first-failure",
    "run the cases most likely to fail first: the failures of the newest earlier report in the report's"
    " directory, then mixed-rank scale pairs under Inductor",
    {"action": "store_true", "default": False},
)

RECORDED_ON = Option(
    "--scaledmm-recorded-on",
    "the environment a replayed case was recorded in, as replay commands write it"
    " (torch=VERSION,device=DEVICE,arch=ARCH,tox=ENV): a run under another torch version says so in"
    " one warning line",
    {"default": None, "metavar": "ENV"},
)

AFTER = Option(
    "--scaledmm-after",
    "before each case it runs, run these cases (comma-separated ids, in order) in the same fresh"
    " process: replays an ORDER_DEPENDENT case, which fails only after them (its record names them)",
    {"default": None, "metavar": "IDS"},
)

SEQUENCE = Option(
    "--scaledmm-sequence",
    "make only these of each case's calls after the first (comma-separated indices: the call at"
    " another M, then the sequence's steps, as the record lists them): replays a shrunk sequence"
    " exactly (its record's replay command names them)",
    {"default": None, "metavar": "INDICES"},
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
    ALLOW_WORSE,
    ALLOW_LOOSER_SLACK,
    ALLOW_UNCHECKED,
    STRICT_ERRORS,
    STRICT_COVERAGE,
    TIMEOUT,
    ISOLATE,
    REPRO_DIR,
    TRIAGE,
    TRIAGE_BUDGET,
    CASE,
    AFTER,
    SEQUENCE,
    EXPLORE,
    EXPLORE_EXAMPLES,
    CORPUS,
    RECORDED_ON,
]

SHARD = Option(
    "--scaledmm-shard",
    "run shard I of N (1-based, e.g. 2/4): every shard generates the same full case list and keeps"
    " its part, balanced by expected cost; join the shards' reports with `scaledmm merge`",
    {"default": None, "metavar": "I/N"},
)
KEEP = Option(
    "--scaledmm-keep",
    "after the run, keep only the N newest reports of this matrix, profile and shard in the default"
    " report directory (<project>/.scaledmm/reports); only reports this plugin named and wrote there"
    " are removed, never the baseline or another matrix's, profile's or shard's (N >= 1)",
    {"type": int, "default": None, "metavar": "N"},
)
PLUGIN_OPTIONS += [SHARD, KEEP]


def add_pytest_options(group: pytest.OptionGroup, parser: pytest.Parser | None = None) -> None:
    """Each option on the command line and, given the parser, as an ini option. The command line
    keeps None where an option is not given, so that sources.py can tell it from a default."""
    for option in PLUGIN_OPTIONS:
        kwargs = {**option.kwargs, "default": None}
        if option is MATRIX:
            kwargs["const"] = True  # given without a path: the ini's, the environment's or matrix.yaml
        where = f"ini {option.ini_name}, env {option.env_name}"
        group.addoption(option.flag, dest=option.dest, help=f"{option.help} [{where}]", **kwargs)
        if parser is not None:
            parser.addini(option.ini_name, f"{option.flag}: {option.help}", type=_ini_type(option), default=None)


def _ini_type(option: Option) -> Any:  # pytest's ini type: a name, or (9.2) a union
    if option.kind == "list":
        return "args"
    import pytest  # noqa: PLC0415  lazy: the CLI reads these options without pytest

    # pytest 9.2 takes a union, so that native TOML numbers and booleans ([tool.pytest]) pass.
    convert = option.kwargs.get("type")
    if getattr(pytest, "version_tuple", (0,)) >= (9, 2) and (option.kind == "flag" or convert in (int, float)):
        return Union[bool, str] if option.kind == "flag" else Union[convert, str]  # noqa: UP007  pytest compares the Union it is given
    return "string"


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def parse_value(option: Option, value: Any) -> Any:
    """An option's value from the environment (text) or an ini file (text, a list, or a native
    TOML value), converted as the command line would; ValueError says what is wrong."""
    kind = option.kind
    if kind == "list":
        items = shlex.split(value) if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ValueError("expected a list of words")
        return items
    if kind == "flag":
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"expected one of {', '.join(TRUE_WORDS + FALSE_WORDS)}")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected {_expected(option)}")
    convert = option.kwargs.get("type")
    if convert in (int, float, integer):
        if isinstance(value, float) and convert in (int, integer):
            raise ValueError("expected an integer")
        try:
            value = convert(value.strip() if isinstance(value, str) else value)
        except ValueError:
            raise ValueError(f"expected {_expected(option)}") from None
    elif not isinstance(value, str):
        raise ValueError("expected text")
    choices = option.kwargs.get("choices")
    if choices and value not in choices:
        raise ValueError(f"expected one of {', '.join(map(str, choices))}")
    return value


def _expected(option: Option) -> str:
    convert = option.kwargs.get("type")
    return {int: "an integer", integer: "an integer", float: "a number"}.get(convert, "text")


def check_seconds(option: Option, value: float) -> str | None:
    """None when `value` is a finite number of seconds above 0, else the message naming the option."""
    problem = seconds_problem(value)
    return f"{option.flag} {problem}, got {value!r}" if problem else None


def seconds_problem(value: float) -> str | None:
    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return None
    return "must be a finite number of seconds above 0"


def validate_device(value: str) -> str | None:
    """None when the value is acceptable, else the message."""
    if value in ("auto", "cpu", "cuda"):
        return None
    if value.startswith("cuda:") and value[5:].isdigit():
        return None
    return f"unknown value {value!r} for --scaledmm-device: use {DEVICE_CHOICES_HELP}"
