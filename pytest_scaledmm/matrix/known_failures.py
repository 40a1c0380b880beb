"""The known-failure catalogue: `known_failures:` entries of matrix.yaml applied to case records.

An entry names the cases it covers (`match` on case parameters, plus `arch`), an optional torch
version range (a PEP 440 specifier set, e.g. ">=2.9,<2.12"), the signature the failure is expected
to have and a link to the upstream issue::

    known_failures:
      - match: {scale_a: tensor_0d, scale_b: tensor_1d, mode: [inductor, max-autotune]}
        torch: ">=2.9,<2.12"
        signature: "LoweringException: AssertionError"
        link: https://github.com/pytorch/pytorch/issues/NNNNN

Applied to a record:
- a failure whose signature matches an entry becomes XFAIL (expected);
- a pass that an entry covers becomes FIXED_UPSTREAM (retire the entry);
- a failure with another signature stays a failure; the record notes which entry it missed.

A signature must name a root cause. It is judged by what it would match: one that normalises to
fewer than MIN_SIGNATURE_CHARS characters (" ", "M"), that is a part of a text the harness writes
into every signature of a kind (verdict/signature_text.py: "off the refer", "MISMATCH: eager
val", "InductorError: "), or that is made only of words the harness writes ("values off the
reference", "eager+compiled": HARNESS_WORDS) would match every failure of its kind, and is a
MatrixError naming the file and the key.

No torch import here: the gate applies the catalogue to reports on machines without torch.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ..records import CaseRecord, KnownFailureRecord, Report
from ..verdict import outcome as oc
from ..verdict.outcome import normalise_message
from ..verdict.signature_text import templates
from .case_params import matches
from .errors import MatrixError

# Non-space characters a normalised signature needs: "MISMATCH" is the shortest that names
# something; shorter ones match nearly every failure.
MIN_SIGNATURE_CHARS = 8


def _normalised(signature: str) -> str:
    # Signatures are normalised already; an entry written by hand ("dim()=2") is brought to the
    # same form ("dim()=N") so that it can be pasted from an error message.
    return normalise_message(signature, max_lines=1)


# Words every signature of a kind carries because the harness, or the wrapper every compiled
# error comes in, writes them: a signature of only these names no cause.
HARNESS_WORDS = frozenset(
    w.lower()
    for w in (
        *oc.FAILURES,
        *(c.name for c in oc.CLASSES),
        # classify.py's templates
        "values",
        "off",
        "the",
        "reference",
        "in",
        "a",
        "an",
        "band",
        "of",
        "rows",
        "columns",
        "by",
        "one",
        "constant",
        "factor",
        "eager",
        "compiled",
        "compile",
        "and",
        "raise",
        "raises",
        "raised",
        "different",
        "differently",
        "error",
        "errors",
        "accepts",
        "what",
        "refuses",
        "refused",
        "invalid",
        "input",
        "returns",
        "returned",
        "result",
        "results",
        "wrong",
        "passes",
        "function",
        "ran",
        "no",
        "graph",
        "torch",
        "max",
        "err",
        "tol",
        "abs",
        "rel",
        "nan",
        "inf",
        "positions",
        "differ",
        "from",
        "infinities",
        "non",
        "finite",
        "where",
        "sign",
        "output",
        "x",
        "n",
        "s",
        "got",
        "expected",
        "kernel",
        "case",
        "side",
        "sides",
        "both",
        "call",
        "with",
        "without",
        "on",
        "to",
        "is",
        "not",
        "it",
        "its",
        "for",
        # wrappers of every compiled-side error
        "InductorError",
        "BackendCompilerFailed",
        "TorchRuntimeError",
        "TorchDynamoException",
        "Observed",
        "InternalTorchDynamoError",
        "Unsupported",
    )
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")

_CLASS_PREFIX = re.compile(r"^(?:" + "|".join(sorted(oc.FAILURES, key=len, reverse=True)) + r")\s*:?")


def check_entries(path, entries: Iterable[Mapping]) -> None:
    """MatrixError (naming `path` and the key) for an entry whose signature would match nearly
    any failure: too short, nothing beyond its outcome class ("MISMATCH"), a part of a harness
    template, or only harness words (see the module docstring)."""
    for i, entry in enumerate(entries):
        signature = entry.get("signature") if isinstance(entry, Mapping) else None
        if not isinstance(signature, str):
            raise MatrixError(path, f"known_failures[{i}].signature", "must be text")
        # The outcome class alone ("MISMATCH", "ERROR_PARITY:") is in every signature of its kind.
        meaningful = "".join(_CLASS_PREFIX.sub("", _normalised(signature).strip()).split())
        if len(meaningful) < MIN_SIGNATURE_CHARS:
            raise MatrixError(
                path,
                f"known_failures[{i}].signature",
                f"{signature!r} is {len(meaningful)} character(s) once normalised ({meaningful!r}): it would match"
                f" nearly every failure; give at least {MIN_SIGNATURE_CHARS} characters of the expected signature",
            )
        template = _template_holding(signature)
        if template is not None:
            raise MatrixError(
                path,
                f"known_failures[{i}].signature",
                f"{signature!r} is a part of {template!r}, or overlaps it and goes fewer than"
                f" {MIN_SIGNATURE_CHARS} characters beyond: the harness writes that text into every signature"
                " of its kind, so the entry would match every"
                " such failure, whatever its cause; give the error's own type and message (e.g."
                " 'LoweringException: AssertionError')",
            )
        if not [w for w in _WORD.findall(_normalised(signature)) if w.lower() not in HARNESS_WORDS]:
            raise MatrixError(
                path,
                f"known_failures[{i}].signature",
                f"{signature!r} is made only of words the harness writes into every signature of its kind:"
                " it names no root cause; give the error's own type and message (e.g. 'LoweringException:"
                " AssertionError'), not the outcome or the side",
            )


# The harness's own signature text, whole (signature_text.templates), normalised as entries are.
_TEMPLATES = tuple(dict.fromkeys(_normalised(t) for t in templates(oc.FAILURES)))


# Shorter overlaps with a template's end are ordinary words' letters, not the template.
_MIN_OVERLAP = 3
_WORD_CHAR = re.compile(r"\w")


def _template_holding(signature: str) -> str | None:
    """The harness template that `signature` is a part of (so that it matches what every
    signature carrying that template holds), or None. Judged as entries match, as a substring of
    the normalised text: a word cut short ("off the refer") is caught, and so is an entry that
    overlaps a template by more than a word and goes fewer than MIN_SIGNATURE_CHARS beyond it
    ("InductorError: L", "ductorError: Lo")."""
    wanted = _normalised(signature).strip()
    if not wanted:
        return None
    inside = next((t for t in _TEMPLATES if wanted in t), None)
    if inside is not None:
        return inside
    for template in _TEMPLATES:
        left = _overlap(template, wanted)
        right = _overlap(template[::-1], wanted[::-1])
        rest = wanted[left : len(wanted) - right] if left + right < len(wanted) else ""
        if (left or right) and len("".join(rest.split())) < MIN_SIGNATURE_CHARS:
            return template
    return None


def _overlap(first: str, second: str) -> int:
    """The length of the longest end of `first` that `second` starts with, where that start of
    `second` spans more than one word and ends between words (0 when none does): "Tensor.item()"
    does not overlap "not a Tensor", nor "torch.cuda" "factor"."""
    for size in range(min(len(first), len(second)), _MIN_OVERLAP - 1, -1):
        part = second[:size]
        between_words = size == len(second) or not (_WORD_CHAR.match(part[-1]) and _WORD_CHAR.match(second[size]))
        if first.endswith(part) and between_words and re.search(r"\W", part.strip()):
            return size
    return 0


def torch_release(version: str) -> Version | None:
    try:
        return Version(version)
    except (InvalidVersion, TypeError):
        return None


@dataclass(frozen=True)
class KnownFailure:
    index: int
    match: Mapping
    signature: str
    torch: SpecifierSet | None = None
    link: str | None = None
    reason: str | None = None

    @classmethod
    def from_entry(cls, index: int, entry: Mapping) -> KnownFailure:
        torch = SpecifierSet(entry["torch"]) if entry.get("torch") else None
        return cls(index, dict(entry["match"]), entry["signature"], torch, entry.get("link"), entry.get("reason"))

    def covers(self, params: Mapping, torch_version: str | None, arch: str | None) -> bool:
        """Whether this entry is about this case on this torch and arch (signature aside)."""
        if not matches(self.match, {**params, "arch": arch}):
            return False
        if self.torch is None:
            return True
        release = torch_release(torch_version) if torch_version else None
        if release is None:
            return False
        # A nightly (2.14.0a0+git...) counts as the release it leads to: ">=2.14" covers it.
        return self.torch.contains(Version(release.base_version))

    def expects(self, signature: str | None) -> bool:
        """Exact or substring match on the normalised signature."""
        if not signature:
            return False
        return _normalised(self.signature) in _normalised(signature)

    def describe(self) -> KnownFailureRecord:
        return KnownFailureRecord(
            entry=self.index,
            signature=self.signature,
            torch=str(self.torch) if self.torch is not None else None,
            link=self.link,
            reason=self.reason,
        )


class Catalogue:
    def __init__(self, entries: Iterable[KnownFailure] = ()):
        self.entries = list(entries)

    @classmethod
    def from_entries(cls, entries: Iterable[Mapping], path="known_failures") -> Catalogue:
        """Raises MatrixError (naming `path`) for a catch-all signature; see check_entries."""
        entries = list(entries)
        check_entries(path, entries)
        return cls(KnownFailure.from_entry(i, e) for i, e in enumerate(entries))

    @classmethod
    def from_spec(cls, spec) -> Catalogue:
        return cls.from_entries(spec.known_failures, spec.path)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def covering(self, params: Mapping, torch_version: str | None, arch: str | None) -> list[KnownFailure]:
        return [e for e in self.entries if e.covers(params, torch_version, arch)]

    def apply(self, record: CaseRecord, torch_version: str | None, arch: str | None) -> CaseRecord:
        """Rewrite `record` in place by the rules in the module docstring; returns it."""
        outcome = record["outcome"]
        if outcome not in oc.FAILURES and outcome != oc.PASS:
            return record
        entries = self.covering(record.get("params", {}), torch_version, arch)
        if not entries:
            return record
        if outcome == oc.PASS:
            entry = entries[0]
            record["outcome"] = oc.FIXED_UPSTREAM
            record["known_failure"] = {**entry.describe(), "original_outcome": oc.PASS}
            record["detail"] = f"known failure #{entry.index} passes now: retire the entry" + _link(entry)
            return record
        for entry in entries:
            if entry.expects(record.get("signature")):
                record["outcome"] = oc.XFAIL
                record["known_failure"] = {**entry.describe(), "original_outcome": outcome}
                detail = f"known failure #{entry.index}" + _link(entry)
                record["detail"] = f"{detail}; {record['detail']}" if record.get("detail") else detail
                return record
        expected = "; ".join(f"#{e.index}: {e.signature!r}" for e in entries)
        record["known_failure_missed"] = [e.describe() for e in entries]
        note = f"a known-failure entry covers this case but expects another signature ({expected})"
        record["detail"] = f"{record['detail']}; {note}" if record.get("detail") else note
        return record

    def apply_report(self, report: Report) -> Report:
        """A copy of `report` with the catalogue applied to every case, for reports written before
        an entry was added (the gate re-reads the catalogue)."""
        report = copy.deepcopy(report)
        env = report.get("environment") or {}
        for record in report["cases"]:
            if record["outcome"] in (oc.XFAIL, oc.FIXED_UPSTREAM):
                continue
            self.apply(record, env.get("torch"), env.get("arch"))
        return report


# What an XFAIL record may have been before the catalogue: a failure (a class this version does
# not know counts as one).
_NOT_FAILURES = tuple(c.name for c in oc.CLASSES if not c.fails)


def restore_original_outcomes(report: Report) -> tuple[Report, list[str]]:
    """A copy of `report` with every XFAIL / FIXED_UPSTREAM record back to the outcome it had
    before a catalogue was applied, and the ids of the records that do not say what it was (an
    XFAIL without the failure, a FIXED_UPSTREAM without its known failure): those stay as they
    are and the gate fails on them by name. Whether a failure is expected is recomputed from a
    catalogue, never read from a record."""
    report = copy.deepcopy(report)
    unexplained = []
    for record in report["cases"]:
        outcome = record["outcome"]
        if outcome not in (oc.XFAIL, oc.FIXED_UPSTREAM):
            continue
        known = record.get("known_failure")
        original = known.get("original_outcome") if isinstance(known, dict) else None
        failure = isinstance(original, str) and original not in _NOT_FAILURES
        # A FIXED_UPSTREAM was a pass; one that names a failure is taken at its word.
        valid = failure or (outcome == oc.FIXED_UPSTREAM and original == oc.PASS)
        if not valid:
            unexplained.append(record["id"])
            continue
        assert isinstance(original, str)  # valid: a failure's name, or PASS
        record["outcome"] = original
        record.pop("known_failure", None)
        record.pop("known_failure_missed", None)
    return report, unexplained


def _link(entry: KnownFailure) -> str:
    return f" ({entry.link})" if entry.link else ""
