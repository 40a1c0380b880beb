"""Outcome classes of one case and the normalised signature of a failure."""

from __future__ import annotations

import builtins
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

PASS = "PASS"
MISMATCH = "MISMATCH"
COMPILE_ONLY_ERROR = "COMPILE_ONLY_ERROR"
ERROR_PARITY = "ERROR_PARITY"
UNSUPPORTED = "UNSUPPORTED"
FALLBACK = "FALLBACK"
OPCHECK_FAILED = "OPCHECK_FAILED"  # torch.library.opcheck rejects a custom-op kernel (schema, fake impl, dynamic shapes)
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

FAILURES = (
    MISMATCH,
    COMPILE_ONLY_ERROR,
    ERROR_PARITY,
    FALLBACK,
    OPCHECK_FAILED,
    CRASH,
    TIMEOUT,
    REFUSED,
    INTERNAL_ERROR,
    HARNESS_ERROR,
)
ALL_OUTCOMES = (PASS, UNSUPPORTED, SKIPPED, XFAIL, FIXED_UPSTREAM) + FAILURES


@dataclass
class ErrorInfo:
    type: str  # qualified name of the raised exception
    message: str  # first lines, raw
    root_type: str  # innermost cause, used to compare eager and compiled refusals
    layer: Optional[str] = None  # where a compiled call broke: dynamo, aot_autograd, inductor, runtime
    root_message: str = ""


@dataclass
class Outcome:
    outcome: str
    signature: Optional[str] = None
    layer: Optional[str] = None
    detail: str = ""
    errors: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    eager_error: Optional[ErrorInfo] = None
    compiled_error: Optional[ErrorInfo] = None
    extra: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Outcome":
        data = dict(data)
        for key in ("eager_error", "compiled_error"):
            if data.get(key):
                data[key] = ErrorInfo(**data[key])
        return cls(**data)


_RULES = [
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


def describe_exception(exc: BaseException, layer: Optional[str] = None) -> ErrorInfo:
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
    )


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
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    detail = f"the harness failed{what}, not the case:\n" + "\n".join(text.splitlines()[-40:])
    return Outcome(HARNESS_ERROR, f"HARNESS_ERROR: {signature_of(describe_exception(exc))}", None, detail)
