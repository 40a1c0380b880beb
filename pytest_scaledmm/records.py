"""The report JSON as types: what a report file holds, field by field (reports/report.py's
REPORT_SCHEMA checks the fields the readers use; plugin/session.py `record()` writes a case).

These are TypedDicts: at run time a record is the plain dict `json.load` returned, so a report
read back is the report written. `load_report` casts at the boundary; inside, a mistyped key is a
type error. Only the standard library: every layer may import this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # typing has it from Python 3.10 on
    from typing import TypeGuard

# A number as a report writes it: a JSON number, or "inf", "-inf", "nan" (report.NON_FINITE).
Number = int | float | str


class ErrorRecord(TypedDict, total=False):
    """An exception one side raised (verdict/outcome.py ErrorInfo)."""

    type: str | None
    message: str | None
    root_type: str | None
    layer: str | None  # where a compiled call broke: dynamo, aot_autograd, inductor, runtime
    root_message: str
    source: str | None  # the innermost user-code frame, "path:line in fn"


class BoundRecord(TypedDict, total=False):
    """The bound a check held a result to."""

    slack: Number
    model: str


class CheckRecord(TypedDict, total=False):
    """One side's result against the reference (verdict/reference.py: compare)."""

    ok: bool
    ratio: Number  # error / bound
    max_abs: Number
    max_rel: Number
    problem: str
    where: str  # e.g. "rows 3-5 of 64"
    pattern: str
    elements: int  # the output's elements; the counts below are of these
    off_elements: int  # past the bound
    off_rows: int  # rows (leading dimensions folded in) holding an off element
    off_columns: int
    nonfinite: int  # non-finite where the reference is finite
    off: int
    bound: BoundRecord | None


class ChecksRecord(TypedDict, total=False):
    eager: CheckRecord | None
    compiled: CheckRecord | None


class KnownFailureRecord(TypedDict, total=False):
    """The known-failure entry a record matched (matrix/known_failures.py Entry.describe)."""

    entry: int | None
    signature: str | None
    torch: str | None
    link: str | None
    reason: str | None
    original_outcome: str | None  # the outcome before the catalogue made it XFAIL / FIXED_UPSTREAM


class ModelRecord(TypedDict, total=False):
    """What the support model expected of a case (reports/coverage.py model_block)."""

    purpose: str | None
    expected_refusal: str | None
    mismatch: bool
    refusal: str | None
    explained: str
    detail: str


class RunRecord(TypedDict, total=False):
    """One run of a case that ran more than once (a rerun plugin, a hook that runs an item twice)."""

    outcome: str
    signature: str | None


class _CaseRequired(TypedDict):
    id: str
    outcome: str  # an outcome class name; one this version does not know counts as a failure


class CaseRecord(_CaseRequired, total=False):
    """One case of a run, as plugin/session.py `record()` writes it."""

    params: dict[str, Any]
    signature: str | None
    root_cause: str | None
    met: str | None
    layer: str | None
    detail: str | None
    eager_error: ErrorRecord | None
    compiled_error: ErrorRecord | None
    errors: ChecksRecord | None
    timing: dict[str, Any]
    extra: dict[str, Any]  # free: kernel_slack, notes of the run
    known_failure: KnownFailureRecord | None
    known_failure_missed: list[KnownFailureRecord]
    triage: dict[str, Any]  # execution/triage.py
    model: ModelRecord
    explore: dict[str, Any]  # a case explore mode found: its kernel and when (plugin/explore.py)
    # Every run's outcome, in the order they came, when the case ran more than once: the record
    # is the worst run's (plugin/session.py repeated_record).
    runs: list[RunRecord]


def is_case_record(value: object) -> TypeGuard[CaseRecord]:
    """Whether a value that crossed a process boundary (xdist's user_properties) is a case's
    record: a mapping with a string id and outcome."""
    return isinstance(value, dict) and isinstance(value.get("id"), str) and isinstance(value.get("outcome"), str)


class ToleranceBlock(TypedDict, total=False):
    slack: Number
    kernels: dict[str, Any]  # kernel -> {"slack", "reason"}


class ForcedBlock(TypedDict, total=False):
    seed: int | None
    device: str | None


class KernelCode(TypedDict, total=False):
    """The code of one kernel (matrix/code_digest.py kernel_code)."""

    sha256: str | None  # None: no source file defines it (`unknown` says so)
    files: dict[str, str | None]  # key (a path relative to the project) -> sha256
    builtin: bool  # a built-in kernel: its digest is the plugin's
    unknown: str


class CodeBlock(TypedDict, total=False):
    """The code a run ran (matrix/code_digest.py code_block)."""

    plugin: str | None  # the plugin package's sources
    kernels: dict[str, KernelCode]


class MatrixBlock(TypedDict, total=False):
    path: str | None
    hash: str | None
    profile: str | None
    cases: int | None
    forced: ForcedBlock | None
    tolerance: ToleranceBlock | None
    code: CodeBlock | None  # schema version 4 on


class SessionBlock(TypedDict, total=False):
    complete: bool
    strict_errors: bool  # missing: strict
    incomplete_reasons: list[str]
    generated: int
    recorded: int
    started: str | float | None  # ISO 8601; epoch seconds in schema version 1
    wall_s: float
    compile_cache: dict[str, int]  # FX graph cache hits, misses, bypasses; cases that compiled


class ShardBlock(TypedDict, total=False):
    index: int | None  # None: a merged report
    count: int
    cases: int  # of this shard (of all shards, merged)
    total_cases: int
    total_ids_sha256: str
    ids_sha256: str
    possible: dict[str, Any]  # what the whole run can cover (reports/coverage.py)
    merged: list[Any]


class SignatureGroup(TypedDict, total=False):
    """One root cause of a run (reports/report.py signature_groups)."""

    outcome: str
    tier: int
    signature: str | None
    root_cause: str | None
    layer: str | None
    count: int
    outcomes: dict[str, int]
    met: dict[str, int]
    shared: dict[str, Any]
    shape_classes: list[str]
    example: str | None
    example_message: str | None
    source: str | None


class _ReportRequired(TypedDict):
    schema: str
    schema_version: int
    environment: dict[str, Any]  # torch, arch, tox_env, hypothesis, device, ...
    cases: list[CaseRecord]


class Report(_ReportRequired, total=False):
    """A whole report file."""

    matrix: MatrixBlock
    session: SessionBlock
    shard: ShardBlock
    summary: dict[str, int]
    signatures: list[SignatureGroup]
    coverage: dict[str, Any]  # reports/coverage.py coverage_block
    upgraded_from: int  # in memory only: the schema version the file had
