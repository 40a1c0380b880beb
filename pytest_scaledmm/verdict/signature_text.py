"""The fixed text the harness writes into signatures: check problems, off patterns, the MISMATCH
and other class templates, and the wrappers every compiled-side error comes in.

The verdict writes its signatures from these names, and the known-failure catalogue refuses an
entry whose signature is a part of one of them (known_failures.check_entries): such an entry
would match every failure of a class, whatever bug it was written for. Only the standard library.
"""

from __future__ import annotations

# What a check's off elements share (off_pattern.py).
NONFINITE_PATTERN = "non-finite where the reference is finite"
CONSTANT_FACTOR = "by one constant factor"
COLUMN_BAND = "in a band of columns"
ROW_BAND = "in a band of rows"
OFF_PATTERNS = (NONFINITE_PATTERN, CONSTANT_FACTOR, COLUMN_BAND, ROW_BAND)

# A failed check's own problem, when it has one (reference.py).
NONFINITE_POSITIONS = "non-finite positions differ from the reference"
WRONG_SIGN_INFINITIES = "infinities of the wrong sign"
NAN_POSITIONS_FROM_EAGER = "NaN positions differ from eager"
INFINITIES_FROM_EAGER = "infinities differ from eager"
FINITE_FROM_EAGER = "finite values differ from eager"
UNCHECKABLE = "the output could not be checked"

# The serving loop's calls after the first (pipeline.py).
SECOND_CALL = "second call"  # the label of the serving-loop call with other inputs
LATER_CALLS = f"{SECOND_CALL} with other inputs"
LATER_CALLS_RAISED = f"{LATER_CALLS} raised"
SHARES_PREVIOUS_OUTPUT = "output shares storage with the previous call's output"
SHARES_INPUT = "output shares storage with input"
FIRST_OUTPUT_CHANGED = "first output changed by the second call"
FIRST_OUTPUT_UNREADABLE = "first output unreadable after the second call"
# The last serving-loop call: the second inputs' values written into the first call's tensors.
IN_PLACE_CALL = "call with new values in the first call's tensors"
IN_PLACE_CALL_RAISED = f"{IN_PLACE_CALL} raised"
# The eager side's last call: inputs of another M (a server's next batch size), its own reference.
OTHER_M_CALL = "call at another M after the first"
OTHER_M_CALL_RAISED = f"{OTHER_M_CALL} raised"
# The eager side's calls after that one (verdict/sequence.py): another K, N or dtype, then the first
# shape again, each against its own reference; the problem names the calls in words, as far as
# the one that failed.
SEQUENCE_CALL = "later call of a sequence"
SEQUENCE_CALL_RAISED = f"{SEQUENCE_CALL} raised"

# The call contract (call_contract.py): what a caller of torch._scaled_mm relies on, on every call.
OUTPUT_LAYOUTS = ("row-major", "column-major")
NOT_IN_LAYOUT = tuple(f"output not {layout} contiguous" for layout in OUTPUT_LAYOUTS)
NONDETERMINISTIC = "the same call twice gave different bits"

CHECK_PROBLEMS = (
    NONFINITE_POSITIONS,
    WRONG_SIGN_INFINITIES,
    NAN_POSITIONS_FROM_EAGER,
    INFINITIES_FROM_EAGER,
    FINITE_FROM_EAGER,
    UNCHECKABLE,
    LATER_CALLS_RAISED,
    f"{LATER_CALLS}: ",
    SHARES_PREVIOUS_OUTPUT,
    SHARES_INPUT,
    FIRST_OUTPUT_CHANGED,
    FIRST_OUTPUT_UNREADABLE,
    IN_PLACE_CALL_RAISED,
    f"{IN_PLACE_CALL}: ",
    OTHER_M_CALL_RAISED,
    f"{OTHER_M_CALL} (",
    SEQUENCE_CALL_RAISED,
    f"{SEQUENCE_CALL} (",
    *NOT_IN_LAYOUT,
    NONDETERMINISTIC,
)

# A dynamic-M case (pipeline.dynamic_m_outcome) and a kernel writing into its inputs
# (pipeline.changed_inputs_outcome).
AT_ANOTHER_M = "at another M"
RECOMPILED = "recompiled"
UNDER_MARK = "under mark_"
CHANGED_IN_PLACE = "in place"
TIMEOUT_SIGNATURE = "TIMEOUT: no result within"
# How Dynamo words every user exception raised under compile: "raised exception RuntimeError(...)".
DYNAMO_RAISED = "raised exception"

OFF_THE_REFERENCE = "values off the reference"
MISMATCH_SIDES = ("eager", "compiled", "eager+compiled")
ACCEPTS = "compiled accepts what eager refuses"
FALLBACK_SIGNATURE = "FALLBACK: the compiled function ran no compiled graph"

# The exceptions every compiled-side error is wrapped in, as signatures name them.
ERROR_WRAPPERS = (
    "InductorError",
    "BackendCompilerFailed",
    "TorchRuntimeError",
    "TorchDynamoException",
    "InternalTorchDynamoError",
    "Unsupported",
    "Observed",
)


def templates(failure_classes: tuple[str, ...]) -> tuple[str, ...]:
    """Every fixed text a signature can be made of, whole: what no known-failure entry may be a
    part of. `failure_classes`: the outcome classes that fail (outcome.FAILURES)."""
    problems = [OFF_THE_REFERENCE + (f" {p}" if p else "") for p in ("", *OFF_PATTERNS)] + list(CHECK_PROBLEMS)
    mismatches = [f"MISMATCH: {sides} {problem}" for sides in MISMATCH_SIDES for problem in problems]
    wrappers = [f"{w}{tail}" for w in ERROR_WRAPPERS for tail in (": ", " <- ")]
    classes = [f"{name}: " for name in failure_classes]
    sides = [f"eager {w}" for w in wrappers] + [f" <> compiled {w}" for w in wrappers] + [" <> compiled "]
    changed = [f"MISMATCH: {sides} changed " for sides in MISMATCH_SIDES]
    return (
        *mismatches,
        *changed,
        *OFF_PATTERNS,
        *CHECK_PROBLEMS,
        f"MISMATCH: compiled {AT_ANOTHER_M} ",
        *(f"{RECOMPILED} 2 times {UNDER_MARK}{how}" for how in ("dynamic", "unbacked")),
        *(f"{RECOMPILED} {UNDER_MARK}{how}" for how in ("dynamic", "unbacked")),
        f" {CHANGED_IN_PLACE}",
        f"{TIMEOUT_SIGNATURE} ",
        f"{DYNAMO_RAISED} ",
        *wrappers,
        *classes,
        *sides,
        f"{ACCEPTS}: ",
        f"{ACCEPTS}, with ",
        FALLBACK_SIGNATURE,
    )
