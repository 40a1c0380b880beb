"""The fields a kernel declaration may carry about what it supports and how it is held, declared
once: `Declared`, one dataclass field each, whose metadata is its row (how a declaration's value
is stored, its JSON-schema fragment, what it means, whether judge reads it).

Everything else that names these fields is built from it: the Kernel and KernelSpec dataclasses
(matrix/kernels.py, matrix/spec.py) and the Support that judge reads (refusals.py) extend it; the
matrix's JSON schema (matrix/schema.py) and parsing a declaration (matrix/spec.py) read its rows.
Standard library only: repro scripts embed verdict/, which is why it lives here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from .layouts import OPERAND_LAYOUTS
from .scale_forms import FORMS
from .signature_text import OUTPUT_LAYOUTS

SCALE_FORMS = [form.id for form in FORMS]
FP8_OPERAND_DTYPES = ["e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"]
# Operand dtypes a scale form names besides fp8 (fp4e2m1: NVFP4's packed e2m1 pairs).
OPERAND_DTYPES = FP8_OPERAND_DTYPES + sorted(
    {d for form in FORMS for d in (form.operand_dtypes or ()) if d not in FP8_OPERAND_DTYPES}
)
OUT_DTYPES = ["bf16", "fp16", "fp32", "e4m3fn"]  # e4m3fn: fp8 output (scale_result)
SCALE_LAYOUTS = ["contiguous", "noncontiguous", "offset", "expanded"]
SCALE_VALUE_DTYPES = ["fp32", "bf16", "fp16"]  # the dtypes a user kernel's fp32-form scales come in
FAMILIES = ["fp8", "int8"]
ACCUMULATION = ("fp32", "tensor-core", "fast")  # a kernel's declared fp8 accumulation
# What a kernel takes for `a`: quantised data and its scale, or the high-precision activation it
# quantises itself (verdict/contracts.py).
ACTIVATIONS = ("quantized", "dynamic")
ARCHS = ["cpu", "sm80", "sm86", "sm89", "sm90", "sm100", "sm120", "gfx90a", "gfx942", "gfx950"]


def enum_list(values: Sequence[Any]) -> dict:
    return {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": values}}


def pair_list(values: Sequence[Any]) -> dict:
    pair = {"type": "array", "minItems": 2, "maxItems": 2, "items": {"enum": values}}
    return {"type": "array", "minItems": 1, "uniqueItems": True, "items": pair}


# How a declaration's value is stored on a KernelSpec (spec.py): as given, a tuple of names, a
# tuple of (a, b) tuples, or pair rules ((form_a, form_b), out_dtypes or None, bias or None).
AS_GIVEN, NAMES, PAIRS, PAIR_RULES = "as given", "names", "pairs", "pair rules"
SHAPE_LIMIT, RULE = "shape limit", "rule"


@dataclass(frozen=True)
class SupportField:
    """One declaration field's row: what its `Declared` field's metadata holds, and its name."""

    name: str
    stored: str  # AS_GIVEN, NAMES, PAIRS or PAIR_RULES
    schema: dict  # its fragment of a kernel entry's JSON schema
    doc: str
    default: Any = None  # what an undeclared field means (None: no limit)
    judged: bool = False  # read by judge (refusals.py DECLARED_RULES)
    # In a hook declaration's digest even when undeclared: the fields of the first declarations
    # (the others only when declared, so that older declarations keep their digest).
    always_digested: bool = False
    group: str = ""  # SHAPE_LIMIT or RULE: the groups matrix/schema.py names


_ROW = "pytest_scaledmm.support_field"


def _declare(
    schema: dict,
    doc: str,
    stored: str = AS_GIVEN,
    *,
    default: Any = None,
    judged: bool = False,
    always_digested: bool = False,
    group: str = "",
) -> Any:
    """A `Declared` field: its default, with its row as metadata (named once the class exists)."""
    row = {"stored": stored, "schema": schema, "doc": doc, "default": default, "judged": judged}
    return field(default=default, metadata={_ROW: {**row, "always_digested": always_digested, "group": group}})


_LIMIT = {"type": "integer", "minimum": 1}
_PAIR_RULES_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["scale_pair"],
        "properties": {
            "scale_pair": {**pair_list(SCALE_FORMS)["items"]},
            "out_dtypes": enum_list(OUT_DTYPES),
            "bias": {"type": "boolean"},
        },
        "anyOf": [{"required": ["out_dtypes"]}, {"required": ["bias"]}],
    },
}

Names = Sequence[str] | None  # a list as given (Kernel), a tuple as kept (KernelSpec, Support)
Pairs = Sequence[Sequence[str]] | None


@dataclass(frozen=True, kw_only=True)
class Declared:
    """What a kernel may declare about what it supports and how it is held; None: no limit. The
    field order is the declarations' digest order (matrix/spec.py): append, never reorder."""

    family: str = _declare({"enum": FAMILIES}, "fp8 or int8 operands", default="fp8", always_digested=True)
    scale_forms: Names = _declare(
        enum_list(SCALE_FORMS), "the scale forms it takes", NAMES, judged=True, always_digested=True
    )
    dtypes: Names = _declare(
        enum_list(OPERAND_DTYPES + ["int8"]), "the operand dtypes it takes", NAMES, judged=True, always_digested=True
    )
    archs: Names = _declare(enum_list(ARCHS), "where it runs (skipped elsewhere)", NAMES, always_digested=True)
    min_torch: str | None = _declare({"type": "string"}, "the oldest torch it runs on", always_digested=True)
    # What it accepts, as OpInfo declares an operator's valid inputs: a case outside it that the
    # kernel refuses is UNSUPPORTED (refusals.py); generation gives such cases only a boundary
    # slice (matrix/support.py).
    scale_pairs: Pairs = _declare(
        pair_list(SCALE_FORMS), "the (a, b) scale form pairs it takes", PAIRS, judged=True, group=RULE
    )
    dtype_pairs: Pairs = _declare(
        pair_list(OPERAND_DTYPES + ["int8"]), "the (a, b) dtype pairs it takes", PAIRS, judged=True, group=RULE
    )
    out_dtypes: Names = _declare(enum_list(OUT_DTYPES), "the output dtypes it computes", NAMES, judged=True, group=RULE)
    bias_out_dtypes: Names = _declare(
        {**enum_list(OUT_DTYPES), "minItems": 0},
        "the output dtypes it takes a bias with ([]: none)",
        NAMES,
        judged=True,
        group=RULE,
    )
    # How its fp8 products are summed on a GPU (verdict/reference.py ACCUMULATORS): it is held to
    # fp32 sums, tensor-core sums, or fast (unpromoted) ones; None: by the case (use_fast_accum).
    accumulation: str | None = _declare({"enum": list(ACCUMULATION)}, "fp32, tensor-core or fast: its bound on a GPU")
    # Shape limits (refusals.SIZE_LIMITS judges them); M counts tokens (B*T for a 3-D activation).
    min_m: int | None = _declare(_LIMIT, "the fewest tokens M it takes", judged=True, group=SHAPE_LIMIT)
    max_m: int | None = _declare(_LIMIT, "the most tokens M it takes", judged=True, group=SHAPE_LIMIT)
    m_multiple: int | None = _declare(_LIMIT, "M a multiple of this", judged=True, group=SHAPE_LIMIT)
    k_multiple: int | None = _declare(_LIMIT, "K a multiple of this", judged=True, group=SHAPE_LIMIT)
    n_multiple: int | None = _declare(_LIMIT, "N a multiple of this", judged=True, group=SHAPE_LIMIT)
    # "dynamic": it takes the high-precision activation and quantises it itself (contracts.py).
    activation: str | None = _declare({"enum": list(ACTIVATIONS)}, "dynamic: it quantises the activation itself")
    scale_layouts: Names = _declare(enum_list(SCALE_LAYOUTS), "the scale layouts it takes", NAMES, judged=True)
    operand_layouts: Names = _declare(
        enum_list(list(OPERAND_LAYOUTS)), "the operand layouts it takes", NAMES, judged=True
    )
    # torch._scaled_mm takes fp32 scales only; a wrapper that passes them on as given says so.
    scale_dtypes: Names = _declare(enum_list(SCALE_VALUE_DTYPES), "the scale dtypes it takes", NAMES, judged=True)
    # The dtype's largest value unless told: torchao's symmetric int8 uses 127.5.
    activation_divisor: float | None = _declare(
        {"type": "number", "exclusiveMinimum": 0}, "what its dynamic quantiser divides the amax by"
    )
    # Never below 1, with the reason it needs one; times the matrix's slack.
    slack: float | None = _declare({"type": "number", "minimum": 1, "maximum": 1e6}, "its own tolerance slack (>= 1)")
    slack_reason: str | None = _declare({"type": "string", "minLength": 3}, "why it needs its own slack")
    # ((form_a, form_b), out_dtypes or None, bias or None) per constrained scale pair; a
    # declaration gives [{"scale_pair": ..., "out_dtypes": [...], "bias": bool}].
    pair_rules: Sequence[Any] | None = _declare(
        _PAIR_RULES_SCHEMA,
        "constraints of single scale pairs: output dtypes, whether a bias is taken",
        PAIR_RULES,
        judged=True,
    )
    # Its call contract (call_contract.py), where it differs from torch._scaled_mm's.
    output_layout: str | None = _declare(
        {"enum": [*OUTPUT_LAYOUTS, "any"]}, "the layout of its output: row-major (as _scaled_mm), column-major or any"
    )
    deterministic: bool | None = _declare({"type": "boolean"}, "false: the same call twice may differ in its bits")


SUPPORT_FIELDS = tuple(SupportField(f.name, **f.metadata[_ROW]) for f in fields(Declared))
SUPPORT_FIELD_NAMES = tuple(row.name for row in SUPPORT_FIELDS)
JUDGED_FIELDS = tuple(row.name for row in SUPPORT_FIELDS if row.judged)


def declared_values(source: object) -> dict[str, Any]:
    """Each `Declared` field of `source` (any object with those attributes), by name."""
    return {name: getattr(source, name, None) for name in SUPPORT_FIELD_NAMES}
