"""The report JSON as types, declared once: what a report file holds, field by field. The JSON
Schema that `load_report` checks a file against is derived from these types
(reports/report_schema.py); plugin/session.py `record()` writes a case.

These are TypedDicts: at run time a record is the plain dict `json.load` returned, so a report
read back is the report written. `load_report` casts at the boundary; inside, a mistyped key is a
type error. What a type cannot say (a pattern, a minimum) rides along in `Annotated`; an object
may hold keys it does not name (a newer plugin's). Only the standard
library: every layer may import this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Required, TypedDict

if TYPE_CHECKING:
    from typing import TypeGuard


@dataclass(frozen=True)
class Check:
    """What a value's type does not say: JSON Schema's pattern, minimum and minLength."""

    pattern: str | None = None
    minimum: int | None = None
    min_length: int | None = None


@dataclass(frozen=True)
class Rest:
    """What every key of an object that its type does not name holds (JSON Schema's
    additionalProperties)."""

    holds: Any


@dataclass(frozen=True)
class Slot:
    """A schema the report module derives from elsewhere (a record's params, from the axes)."""

    name: str


# Each ends in a lookahead for no character: `$` would also match before a final line break.
CLASS_NAME_PATTERN = r"^[A-Z][A-Z0-9_]*(?![\s\S])"
# How a report writes a number that is not finite (reports/numbers.py NON_FINITE).
NON_FINITE_PATTERN = r"^(-?inf|nan)(?![\s\S])"

Text = str | None
# A number as a report writes it: a JSON number, or "inf", "-inf", "nan".
Number = Annotated[int | float | str, Check(pattern=NON_FINITE_PATTERN)]
Count = Annotated[int, Check(minimum=0)]
# An outcome class name; one this version does not know (a newer plugin's) counts as a failure.
ClassName = Annotated[str, Check(pattern=CLASS_NAME_PATTERN)]
NonEmpty = Annotated[str, Check(min_length=1)]
# A value of a dimension of the case space, as coverage lists it.
PlainValue = str | int | bool


class ErrorRecord(TypedDict, total=False):
    """An exception one side raised (verdict/outcome.py ErrorInfo)."""

    type: Text
    message: Text
    root_type: Text
    layer: Text  # where a compiled call broke: dynamo, aot_autograd, inductor, runtime
    root_message: Text
    source: Text  # the innermost user-code frame, "path:line in fn" (outcome.source_frame)


class BoundRecord(TypedDict, total=False):
    """The bound a check held a result to."""

    slack: Number
    model: Text


class CheckRecord(TypedDict, total=False):
    """One side's result against the reference (verdict/reference.py: compare); a check may carry
    measures a newer plugin adds."""

    ok: bool
    ratio: Number  # error / bound
    max_abs: Number
    max_rel: Number
    problem: Text
    where: Text  # e.g. "rows 3-5 of 64"
    pattern: Text
    elements: Number | None  # the output's elements; the counts below are of these
    off_elements: Count  # past the bound
    off_rows: Number | None  # rows (leading dimensions folded in) holding an off element
    off_columns: Number | None
    nonfinite: Number | None  # non-finite where the reference is finite
    off: Count
    bound: BoundRecord | None


class ChecksRecord(TypedDict, total=False):
    eager: CheckRecord | None
    compiled: CheckRecord | None


class KnownFailureRecord(TypedDict, total=False):
    """The known-failure entry a record matched or missed (matrix/known_failures.py Entry.describe)."""

    entry: int | None
    signature: Text
    torch: Text
    link: Text
    reason: Text
    original_outcome: ClassName | None  # the outcome before the catalogue made it XFAIL / FIXED_UPSTREAM


class ModelRecord(TypedDict, total=False):
    """What the support model expected of a case (reports/coverage.py model_block)."""

    purpose: Text
    expected_refusal: Text
    mismatch: bool
    refusal: Text
    explained: Text
    detail: Text


class RunRecord(TypedDict, total=False):
    """One run of a case that ran more than once (a rerun plugin, a hook that runs an item twice)."""

    outcome: Required[ClassName]
    signature: Text


class KernelChoice(TypedDict, total=False):
    """The Inductor GEMM kernel chosen (verdict/kernel_choice.py)."""

    label: Text
    kernels: list[str]


class KernelSlack(TypedDict, total=False):
    """A kernel's own tolerance slack and why (the gate refuses a looser one)."""

    slack: Number
    reason: Text


class ExtraBlock(TypedDict, total=False):
    """What the run saw beside the verdict (verdict/outcome.py Observations); the keys named here
    are those the gate and the pages judge by."""

    kernel_choice: KernelChoice | None
    kernel_slack: KernelSlack | None


class _CaseRequired(TypedDict):
    id: NonEmpty
    outcome: ClassName
    # The case as generation made it (matrix/case_params.py): each axis holds the type of its
    # values; the kernel, scale forms, mode and sizes are always there.
    params: Annotated[dict[str, Any], Slot("params")]


class CaseRecord(_CaseRequired, total=False):
    """One case of a run, as plugin/session.py `record()` writes it."""

    signature: Text
    root_cause: Text
    met: Text
    layer: Text
    detail: Text
    eager_error: ErrorRecord | None
    compiled_error: ErrorRecord | None
    errors: ChecksRecord | None
    timing: dict[str, Number | None] | None
    extra: Annotated[dict[str, Any] | None, ExtraBlock]  # free beyond ExtraBlock's keys
    known_failure: KnownFailureRecord | None
    known_failure_missed: list[KnownFailureRecord]
    triage: dict[str, Any] | None  # execution/triage.py
    model: ModelRecord | None
    explore: dict[str, Any]  # a case explore mode found: its kernel and when (plugin/explore.py)
    # Every run's outcome, in the order they came, when the case ran more than once: the record
    # is the worst run's (plugin/session.py repeated_record).
    runs: list[RunRecord]


def is_case_record(value: object) -> TypeGuard[CaseRecord]:
    """Whether a value that crossed a process boundary (xdist's user_properties) is a case's
    record: a mapping with a string id and outcome."""
    return isinstance(value, dict) and isinstance(value.get("id"), str) and isinstance(value.get("outcome"), str)


class EnvironmentBlock(TypedDict, total=False):
    """Where a run ran: compare's columns, merge's sameness checks, replay commands and repro
    scripts show the text fields."""

    torch: Text
    cuda: Text
    hip: Text
    triton: Text
    python: Text
    platform: Text
    device: Text
    device_name: Text
    arch: Text
    capability: Text
    tox_env: Text
    hypothesis: Text
    plugin: Text
    sm_count: int | None


class KernelTolerance(TypedDict, total=False):
    slack: Number
    reason: Text


class ToleranceBlock(TypedDict, total=False):
    slack: Number
    kernels: dict[str, KernelTolerance]


class ForcedBlock(TypedDict, total=False):
    """The seed and device the run was given, which its replay commands name."""

    seed: int | None
    device: Text


class KernelCode(TypedDict, total=False):
    """The code of one kernel (matrix/code_digest.py kernel_code)."""

    sha256: Text  # None: no source file defines it (`unknown` says so)
    files: dict[str, Text]  # key (a path relative to the project) -> sha256
    builtin: bool  # a built-in kernel: its digest is the plugin's
    unknown: Text


class CodeBlock(TypedDict, total=False):
    """The code a run ran (matrix/code_digest.py code_block): merge, compare and gate read it."""

    plugin: Text  # the plugin package's sources
    kernels: dict[str, KernelCode]


class MatrixBlock(TypedDict, total=False):
    path: Text
    hash: Text
    profile: Text
    arch: Text
    seed: int | None
    cases: int | None
    forced: ForcedBlock | None
    tolerance: ToleranceBlock | None
    code: CodeBlock | None  # schema version 4 on


class SessionBlock(TypedDict, total=False):
    complete: bool
    strict_errors: bool  # whether strict-only failures (error parity on invalid input) failed the run; missing: strict
    incomplete_reasons: list[str]
    generated: Count
    recorded: Count
    started: str | float | None  # ISO 8601 since version 2; epoch seconds in version 1 (upgrade_report)
    wall_s: float | None
    compile_cache: dict[str, Count]  # FX graph cache hits, misses, bypasses; cases that compiled
    phases: dict[str, Any]  # the session's own seconds, per process (plugin/timeline.py)


class KernelPossible(TypedDict, total=False):
    """What the whole run can cover of one kernel (reports/coverage.py): the values of each
    dimension of its space, the token counts the server slice added; any other key, the rows of
    a covering table."""

    axis_values: dict[str, list[PlainValue]]
    m_added: list[int]
    epilogue: list[str]  # epilogue targets (matrix/epilogue.py)
    shapes_added: list[str]  # shape labels
    not_proven: list[str]


class ShardBlock(TypedDict, total=False):
    """A shard run (--scaledmm-shard I/N) and a merged report (scaledmm merge)."""

    index: Required[Annotated[int, Check(minimum=1)] | None]  # None: a merged report
    count: Required[Annotated[int, Check(minimum=1)]]
    cases: Count  # of this shard (of all shards, merged)
    total_cases: Required[Count]
    total_ids_sha256: Required[str]
    ids_sha256: str
    possible: dict[str, Annotated[KernelPossible, Rest(list[list[PlainValue]])]]
    merged: list[Any]


class SignatureGroup(TypedDict, total=False):
    """One root cause of a run (reports/report.py signature_groups); older reports lack the
    example and shape fields."""

    outcome: str
    tier: int
    signature: Text
    root_cause: Text
    layer: Text
    count: Count
    outcomes: dict[str, Count]
    met: dict[str, Count]
    shared: dict[str, Any]
    shape_classes: list[str]
    example: Text
    example_message: Text
    source: Text


class _ReportRequired(TypedDict):
    schema: str
    schema_version: int
    environment: EnvironmentBlock
    cases: list[CaseRecord]


class Report(_ReportRequired, total=False):
    """A whole report file."""

    matrix: MatrixBlock
    session: SessionBlock
    shard: ShardBlock
    summary: dict[str, Count]
    signatures: list[SignatureGroup]
    coverage: dict[str, Any]  # reports/coverage.py coverage_block
    upgraded_from: int  # in memory only: the schema version the file had
