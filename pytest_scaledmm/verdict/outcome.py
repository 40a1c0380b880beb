"""Outcome classes of one case, one row each in CLASSES, and the normalised signature of a
failure.

A new class is a name and a row here (plus the code that produces it): pytest's verdict on the
case item, the failure set, the comparison of reports, the terminal summary, the rendered
tables and the heatmap all read the table.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
import sysconfig
import traceback
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

PASS = "PASS"
MISMATCH = "MISMATCH"
COMPILE_ONLY_ERROR = "COMPILE_ONLY_ERROR"
ERROR_PARITY = "ERROR_PARITY"
# Eager and compiled raise differently on a case whose input is invalid (a boundary case, or
# one outside the kernel's declared support): counted, fails only under --scaledmm-strict-errors.
BOUNDARY_PARITY = "BOUNDARY_PARITY"
# Compiled returns a result for a case eager refuses: the reference's result is LENIENT (shown,
# not a failure) on invalid input; a wrong one is LENIENT_MISMATCH, whatever the input.
LENIENT = "LENIENT"
LENIENT_MISMATCH = "LENIENT_MISMATCH"
UNSUPPORTED = "UNSUPPORTED"
FALLBACK = "FALLBACK"
OPCHECK_FAILED = (
    "OPCHECK_FAILED"  # torch.library.opcheck rejects a custom-op kernel (schema, fake impl, dynamic shapes)
)
CRASH = "CRASH"
TIMEOUT = "TIMEOUT"
SKIPPED = "SKIPPED"  # not applicable on this machine (arch, torch feature): decided at run time
XFAIL = "XFAIL"  # failed as a known-failure entry predicts
FIXED_UPSTREAM = "FIXED_UPSTREAM"  # a known failure that now passes: retire the entry
# Both sides raise alike, but the refusal is not earned (refusals.py): the case lies inside the
# kernel's declared support, or a built-in op raised something its documentation does not list.
REFUSED = "REFUSED"
# Both sides raise alike an internal assert or a device error other than a documented
# not-supported status: a bug even when both hit it, never a capability (refusals.py).
INTERNAL_ERROR = "INTERNAL_ERROR"
# The harness could not run or check the case; the record exists so that nothing goes missing.
HARNESS_ERROR = "HARNESS_ERROR"
# Failed only after another case ran in the same process; alone it gives something else: the
# kernel keeps state between calls (execution/alone.py).
ORDER_DEPENDENT = "ORDER_DEPENDENT"

# How a case item ends in pytest, and what that makes of the case when reports are compared.
PYTEST_STATUSES = {"passed": "ok", "xfailed": "known", "skipped": "absent", "failed": "failing"}


@dataclass(frozen=True)
class Tier:
    """A severity tier of failures: what a reader fixes first. Lower numbers first."""

    number: int
    title: str


TIERS: tuple[Tier, ...] = (
    Tier(1, "wrong result"),
    Tier(2, "error on valid input"),
    Tier(3, "compiled accepts invalid input with a wrong result"),
    Tier(4, "error parity on invalid input"),
)
_TIER_BY_NUMBER = {t.number: t for t in TIERS}


@dataclass(frozen=True)
class ShownApart:
    """How a passing case of a class other than PASS shows in pytest's output: a word of its own
    in the last line, a progress letter, and the word `-v` prints (pytest_report_teststatus)."""

    word: str
    letter: str
    verbose: str
    colour: str  # a terminal markup name: "yellow", "cyan", ...

    def teststatus(self) -> tuple[str, str, tuple[str, dict[str, bool]]]:
        return self.word, self.letter, (self.verbose, {self.colour: True})


@dataclass(frozen=True)
class OutcomeClass:
    """One outcome class: how pytest reports it and how reports and renderings show it."""

    name: str
    pytest_status: str  # a key of PYTEST_STATUSES; "failed" fails the run and the gate
    severity: int  # 0 is the worst; a heatmap cell takes its worst class's colour; follows the tiers
    colour: str  # of its heatmap segments, chips and legend (text turns dark on light colours)
    abbrev: str  # its column heading in the terminal table, 6 characters at most
    tier: int | None = None  # a number of TIERS for a failure; None for a class that never fails
    # A failure that fails only under --scaledmm-strict-errors (the report's session.strict_errors);
    # otherwise the case passes, shown as "tolerated", and compares as ok.
    strict_only: bool = False
    eager_raises: bool = False  # eager raised: back to UNSUPPORTED (both refuse alike) is no capability lost
    # The class a failure of this one compares as between reports: the same failure met on an
    # input now known to be invalid is not a new one.
    same_failure_as: str | None = None
    # A case that passes with this class is shown apart from plain passes; a strict-only failure
    # that passes (no --scaledmm-strict-errors) is shown so too.
    shown_apart: ShownApart | None = None
    # Not a failure, yet worth a look: the summary lists its root causes apart, and a repro
    # script is written for it.
    informational: bool = False

    @property
    def fails(self) -> bool:
        """Whether it fails the run under the strictest settings."""
        return self.pytest_status == "failed"

    def fails_when(self, strict_errors: bool) -> bool:
        return self.fails and (strict_errors or not self.strict_only)

    @property
    def category(self) -> str:
        """ok, known (an expected failure), absent (not run here) or failing: what a change
        between two reports is judged on (reports/compare.py), under strict errors."""
        return PYTEST_STATUSES[self.pytest_status]

    def category_when(self, strict_errors: bool) -> str:
        """The category under `strict_errors`: a strict-only failure is ok without it."""
        return "ok" if self.fails and not self.fails_when(strict_errors) else self.category

    @property
    def tier_title(self) -> str:
        return _TIER_BY_NUMBER[self.tier].title if self.tier is not None else "not a failure"


# In display order: the outcomes that do not fail, then the failures. Severity follows the
# tiers: every class of a tier is worse than every class of the next one.
CLASSES: tuple[OutcomeClass, ...] = (
    OutcomeClass(PASS, "passed", 16, "#2f9e44", "PASS"),
    # compiled accepts invalid input with the reference's result
    OutcomeClass(
        LENIENT,
        "passed",
        15,
        "#0ca678",
        "LENIEN",
        eager_raises=True,
        shown_apart=ShownApart("lenient", "l", "LENIENT", "cyan"),
        informational=True,
    ),
    # a known failure that passes: its known_failures entry can be retired
    OutcomeClass(
        FIXED_UPSTREAM,
        "passed",
        14,
        "#1c7ed6",
        "FIXED",
        shown_apart=ShownApart("fixed upstream", "U", "FIXED_UPSTREAM", "yellow"),
    ),
    OutcomeClass(XFAIL, "xfailed", 13, "#e8b923", "XFAIL"),
    OutcomeClass(UNSUPPORTED, "skipped", 17, "#adb5bd", "UNSUP", eager_raises=True),
    OutcomeClass(SKIPPED, "skipped", 18, "#dee2e6", "SKIP"),
    OutcomeClass(MISMATCH, "failed", 1, "#e03131", "MISM", tier=1),
    OutcomeClass(COMPILE_ONLY_ERROR, "failed", 4, "#f76707", "COMPL", tier=2),
    OutcomeClass(ERROR_PARITY, "failed", 5, "#9c36b5", "PARITY", tier=2, eager_raises=True),
    OutcomeClass(FALLBACK, "failed", 2, "#d6336c", "FALLBK", tier=1),
    OutcomeClass(ORDER_DEPENDENT, "failed", 3, "#862e9c", "ORDER", tier=1),
    OutcomeClass(OPCHECK_FAILED, "failed", 6, "#a61e4d", "OPCHK", tier=2),
    OutcomeClass(CRASH, "failed", 0, "#5c0a0a", "CRASH", tier=1),
    OutcomeClass(TIMEOUT, "failed", 7, "#845ef7", "TMOUT", tier=2),
    OutcomeClass(REFUSED, "failed", 8, "#e67700", "REFUSE", tier=2, eager_raises=True),
    OutcomeClass(INTERNAL_ERROR, "failed", 9, "#364fc7", "INTERN", tier=2, eager_raises=True),
    OutcomeClass(HARNESS_ERROR, "failed", 10, "#0b7285", "HARNES", tier=2),
    OutcomeClass(LENIENT_MISMATCH, "failed", 11, "#c2255c", "LMISM", tier=3, eager_raises=True),
    OutcomeClass(
        BOUNDARY_PARITY,
        "failed",
        12,
        "#be4bdb",
        "BPARIT",
        tier=4,
        strict_only=True,
        eager_raises=True,
        same_failure_as=ERROR_PARITY,
        # counted, not failed, without --scaledmm-strict-errors
        shown_apart=ShownApart("tolerated", "t", "TOLERATED", "yellow"),
    ),
)
_CLASS_BY_NAME = {c.name: c for c in CLASSES}
# Every class that can fail a run (strict-only ones included: whoever does not know the
# session's strictness treats them as failures).
FAILURES = tuple(c.name for c in CLASSES if c.fails)


def strict_errors_of(session: Any) -> bool:
    """Whether a report's run failed on strict-only classes (session.strict_errors); anything but
    an explicit false is strict."""
    return not (isinstance(session, dict) and session.get("strict_errors") is False)


def outcome_class(name: str | None) -> OutcomeClass | None:
    """The row of a class name; None for a class this version does not know (a newer
    plugin's report), which readers treat as a failure."""
    return _CLASS_BY_NAME.get(name) if name is not None else None


@dataclass
class ErrorInfo:
    type: str  # qualified name of the raised exception
    message: str  # first lines, raw
    root_type: str  # innermost cause, used to compare eager and compiled refusals
    layer: str | None = None  # where a compiled call broke: dynamo, aot_autograd, inductor, runtime
    root_message: str = ""
    # The innermost frame outside torch, the harness and the standard library ("path:line in
    # fn"): the user's kernel line that raised, or that Dynamo was tracing when it failed.
    source: str | None = None


class FieldsOnly:
    """A dataclass base whose instances take no attribute but their fields: a misspelt one fails
    here instead of vanishing from the report (no slots=True before Python 3.10)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in getattr(type(self), "__dataclass_fields__", {}):
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        object.__setattr__(self, name, value)


@dataclass
class Observations(FieldsOnly):
    """What a case's run saw beside its verdict: the record's `extra` object. A field left None
    is absent there; the others are written in this order, the order the run sets them in."""

    changed_inputs: dict | None = None  # side -> {argument: what changed}: the kernel wrote its inputs
    compiled_graphs: int | None = None  # frames Dynamo compiled
    compiled_graph_calls: int | None = None  # calls that ran a compiled graph
    kernel_choice: dict | None = None  # Inductor's GEMM kernel (kernel_choice.py)
    dynamic_m: dict | None = None  # a dynamic-M mode: how M was marked, frames, the other M's results
    kernel_slack: dict | None = None  # the kernel's declared tolerance slack and why
    opcheck: dict | None = None  # torch.library.opcheck's result for a custom op
    run_outcome: dict | None = None  # what the case itself did when opcheck's failure outranks it
    isolation: str | None = None  # why the case did not run in (or ended) the isolated child
    aoti_control: dict | None = None  # the AOTInductor control a failed aoti case was judged against
    triage: dict | None = None  # the triage ladder's finding; the record keeps it beside `extra`
    device: str | None = None  # the device the case ran on (which GPU, under xdist)
    compile_cache: dict | None = None  # Inductor's FX graph cache: {"hit", "miss", "bypass"} counts
    other_m: int | None = None  # the M of the eager side's call after the first (execution.run.eager_other_m)
    not_checked: list | None = None  # the calls after the first that could not be made, and why
    call_contract: dict | None = None  # side -> {check: what broke it} (call_contract.py)
    died_after: str | None = None  # a CRASH or TIMEOUT: the evidence made before the process ended
    replayed_alone: dict | None = None  # a failure after other cases, run again alone (execution/alone.py)
    sequence: dict | None = None  # the eager side's calls after the other M, and the one that failed (sequence.py)

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_json(cls, data: dict) -> Observations:
        return cls(**data)


@dataclass
class SideEvidence:
    """One side's evidence as soon as the side is done: its check against the reference (None
    where it raised) and its error; what a later crash or hang of the process leaves of it."""

    check: dict | None
    error: ErrorInfo | None

    def to_json(self) -> dict:
        return {"check": self.check, "error": None if self.error is None else asdict(self.error)}

    @classmethod
    def from_json(cls, data: dict) -> SideEvidence:
        error = data.get("error")
        return cls(data.get("check"), ErrorInfo(**error) if error else None)


# How far a case got before its process died, by the sides whose evidence reached the parent.
EAGER_CHECKED = "the eager side, checked; it died in the compiled side"
BOTH_CHECKED = "both sides, checked; it died after them (opcheck or the verdict)"


@dataclass
class Outcome(FieldsOnly):
    outcome: str
    signature: str | None = None
    layer: str | None = None
    detail: str = ""
    # The cause on the side that is wrong, normalised, when it is not the signature (which names
    # both sides of a parity failure): what one summary line groups; None: the signature.
    root_cause: str | None = None
    met: str | None = None  # what the other side did, e.g. the eager refusal a compiled error met
    errors: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    eager_error: ErrorInfo | None = None
    compiled_error: ErrorInfo | None = None
    observations: Observations = field(default_factory=Observations)

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["observations"]  # written as `extra`, last, as reports have it
        data["extra"] = self.observations.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict) -> Outcome:
        data = dict(data)
        for key in ("eager_error", "compiled_error"):
            if data.get(key):
                data[key] = ErrorInfo(**data[key])
        data["observations"] = Observations.from_json(data.pop("extra", None) or {})
        return cls(**data)


_RULES = [
    # One data-dependent guard failure, whichever expression the shapes made it guard on.
    (re.compile(r"Consider annotating your code using torch\._check\*\(\)\.\s*"), ""),
    (re.compile(r"(Could not guard on data-dependent expression)[^|]*"), r"\1 <expr> "),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.\-+]+){2,}(?:\.py|\.so|\.cpp|\.h|\.cu)?"), "<path>"),
    (re.compile(r"\bline \d+"), "line N"),
    (re.compile(r"\b[su]\d+\b"), "s?"),  # symbolic sizes s0, s1, u0
    (re.compile(r"\b\d+x\d+\b"), "NxN"),
    (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])"), "N"),
    (re.compile(r"\s+"), " "),
]

_NOISE = re.compile(
    r"^(Set TORCH|You can suppress|To execute this test|Traceback|  File |from user code|"
    r"Explanation:|Hint:|Developer debug context:|For more information)",
)


def normalise_message(message: str, max_lines: int = 3) -> str:
    """Strip sizes, symbolic sizes, addresses, paths and line numbers so that one bug hit by many
    shapes has one signature."""
    kept = []
    for line in message.splitlines():
        stripped = line.strip()
        if not stripped or _NOISE.match(line):
            continue
        kept.append(stripped)
        if len(kept) >= max_lines:
            break
    text = " | ".join(kept)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text.strip()[:300]


def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def signature_of(error: ErrorInfo) -> str:
    """`Type: message` with sizes, addresses and paths stripped; a wrapped error names its root
    cause, whose message is usually the informative one."""
    head = _short(error.type)
    text = normalise_message(error.message, max_lines=1)
    if error.root_type != error.type:
        head = f"{head} <- {_short(error.root_type)}"
        text = normalise_message(error.root_message, max_lines=1) or text
    if text.endswith(":"):
        # A bare "AssertionError:" says little; Inductor's next line names the op being lowered.
        source = error.root_message if error.root_type != error.type else error.message
        text = normalise_message(source, max_lines=2) or text
    return f"{head}: {text}"[:240]


# Dynamo reports a fake-tensor failure as "... got RuntimeError('message')" without __cause__.
_WRAPPED = re.compile(r"got (\w+(?:Error|Exception))\((['\"])(.*?)\2\)", re.S)


def _clip(text: str) -> str:
    return "\n".join(text.splitlines()[:12])[:2000]


def describe_exception(exc: BaseException, layer: str | None = None) -> ErrorInfo:
    root = root_cause(exc)
    message = str(exc) or repr(exc)
    root_type = f"{type(root).__module__}.{type(root).__qualname__}"
    root_message = "" if root is exc else _clip(str(root))
    wrapped = _WRAPPED.search(message) if root is exc else None
    if wrapped:
        builtin = wrapped.group(1)
        root_type = f"builtins.{builtin}" if hasattr(builtins, builtin) else builtin
        root_message = wrapped.group(3)
    return ErrorInfo(
        type=f"{type(exc).__module__}.{type(exc).__qualname__}",
        message=_clip(message),
        root_type=root_type,
        layer=layer,
        root_message=root_message,
        source=source_frame(exc),
    )


def _not_user_dirs() -> tuple:
    """Path prefixes of frames that are not user code: torch, the harness, the standard library."""

    here = os.path.abspath(__file__)
    package = os.path.dirname(os.path.dirname(here))
    # Embedded in a repro script, this file is the script: only its own frames are the harness's.
    dirs = [package + os.sep] if os.path.basename(package) == "pytest_scaledmm" else [here]
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None) if torch is not None else None
    if torch_file:
        dirs.append(os.path.dirname(os.path.abspath(torch_file)) + os.sep)
    paths = sysconfig.get_paths()
    dirs += [os.path.abspath(paths[key]) + os.sep for key in ("stdlib",) if paths.get(key)]
    return tuple(dirs)


def source_frame(exc: BaseException) -> str | None:
    """ "path:line in fn" of the innermost frame of user code: from the stack Dynamo was tracing
    (its `real_stack`, the frames a traceback of a compiled call lacks), else from the traceback,
    through the exception's causes; None when every frame is torch's, the harness's or Python's."""

    skip = _not_user_dirs()

    def user(frames: Iterable[Any] | None) -> str | None:
        for frame in reversed(list(frames or ())):
            name = frame.filename
            if name.startswith("<") or os.path.abspath(name).startswith(skip):
                continue
            return f"{name}:{frame.lineno} in {frame.name}"
        return None

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            found = user(getattr(current, "real_stack", None)) or user(traceback.extract_tb(current.__traceback__))
        except Exception:  # a frame summary of another shape: no source rather than no record
            found = None
        if found:
            return found
        current = getattr(current, "inner_exception", None) or current.__cause__ or current.__context__
    return None


def root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        if inner is None:
            break
        exc = inner
    return exc


def harness_error(exc: BaseException, what: str = "") -> Outcome:
    """The outcome of a case the harness itself failed on (`what`: while doing what), with the
    traceback: the case keeps its record."""

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    detail = f"the harness failed{what}, not the case:\n" + "\n".join(text.splitlines()[-40:])
    return Outcome(HARNESS_ERROR, f"HARNESS_ERROR: {signature_of(describe_exception(exc))}", None, detail)
