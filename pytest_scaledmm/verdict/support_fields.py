"""The fields a kernel declaration may carry about what it supports and how it is held, one row
each: its name, how a declaration's value is stored, its JSON-schema fragment, its default and
what it means.

The other places that name these fields derive from the rows or are checked against them
(tests/test_support_fields.py): the matrix's JSON schema (matrix/schema.py), parsing a declaration
(matrix/spec.py), the Kernel and KernelSpec dataclasses (matrix/kernels.py, matrix/spec.py) and
the Support that judge reads (refusals.py, which is why the rows live in verdict/). Standard
library only: repro scripts embed verdict/.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .layouts import OPERAND_LAYOUTS
from .scale_forms import FORMS
from .signature_text import OUTPUT_LAYOUTS

SCALE_FORMS = [form.id for form in FORMS]
FP8_DTYPES = ["e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"]
# Operand dtypes a scale form names besides fp8 (fp4e2m1: NVFP4's packed e2m1 pairs).
OPERAND_DTYPES = FP8_DTYPES + sorted({d for form in FORMS for d in (form.operand_dtypes or ()) if d not in FP8_DTYPES})
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
    name: str
    stored: str  # AS_GIVEN, NAMES, PAIRS or PAIR_RULES
    schema: dict  # its fragment of a kernel entry's JSON schema
    doc: str
    default: Any = None  # what an undeclared field means (None: no limit)
    judged: bool = False  # read by judge: a Support field (refusals.py)
    # In a hook declaration's digest even when undeclared: the fields of the first declarations
    # (the others only when declared, so that older declarations keep their digest).
    always_digested: bool = False
    group: str = ""  # SHAPE_LIMIT or RULE: the groups matrix/schema.py names


_LIMIT = {"type": "integer", "minimum": 1}

SUPPORT_FIELDS = (
    SupportField("family", AS_GIVEN, {"enum": FAMILIES}, "fp8 or int8 operands", "fp8", always_digested=True),
    SupportField(
        "scale_forms", NAMES, enum_list(SCALE_FORMS), "the scale forms it takes", judged=True, always_digested=True
    ),
    SupportField(
        "dtypes",
        NAMES,
        enum_list(OPERAND_DTYPES + ["int8"]),
        "the operand dtypes it takes",
        judged=True,
        always_digested=True,
    ),
    SupportField("archs", NAMES, enum_list(ARCHS), "where it runs (skipped elsewhere)", always_digested=True),
    SupportField("min_torch", AS_GIVEN, {"type": "string"}, "the oldest torch it runs on", always_digested=True),
    # What it accepts, as OpInfo declares an operator's valid inputs: a case outside it that the
    # kernel refuses is UNSUPPORTED (refusals.py); generation gives such cases only a boundary
    # slice (matrix/support.py).
    SupportField(
        "scale_pairs", PAIRS, pair_list(SCALE_FORMS), "the (a, b) scale form pairs it takes", judged=True, group=RULE
    ),
    SupportField(
        "dtype_pairs",
        PAIRS,
        pair_list(OPERAND_DTYPES + ["int8"]),
        "the (a, b) dtype pairs it takes",
        judged=True,
        group=RULE,
    ),
    SupportField("out_dtypes", NAMES, enum_list(OUT_DTYPES), "the output dtypes it computes", judged=True, group=RULE),
    SupportField(
        "bias_out_dtypes",
        NAMES,
        {**enum_list(OUT_DTYPES), "minItems": 0},
        "the output dtypes it takes a bias with ([]: none)",
        judged=True,
        group=RULE,
    ),
    # How its fp8 products are summed on a GPU (verdict/reference.py ACCUMULATORS): it is held to
    # fp32 sums, tensor-core sums, or fast (unpromoted) ones.
    SupportField(
        "accumulation", AS_GIVEN, {"enum": list(ACCUMULATION)}, "fp32, tensor-core or fast: its bound on a GPU"
    ),
    # Shape limits; M counts tokens (B*T for a 3-D activation).
    SupportField("min_m", AS_GIVEN, _LIMIT, "the fewest tokens M it takes", judged=True, group=SHAPE_LIMIT),
    SupportField("max_m", AS_GIVEN, _LIMIT, "the most tokens M it takes", judged=True, group=SHAPE_LIMIT),
    SupportField("m_multiple", AS_GIVEN, _LIMIT, "M a multiple of this", judged=True, group=SHAPE_LIMIT),
    SupportField("k_multiple", AS_GIVEN, _LIMIT, "K a multiple of this", judged=True, group=SHAPE_LIMIT),
    SupportField("n_multiple", AS_GIVEN, _LIMIT, "N a multiple of this", judged=True, group=SHAPE_LIMIT),
    SupportField("activation", AS_GIVEN, {"enum": list(ACTIVATIONS)}, "dynamic: it quantises the activation itself"),
    SupportField("scale_layouts", NAMES, enum_list(SCALE_LAYOUTS), "the scale layouts it takes", judged=True),
    SupportField(
        "operand_layouts", NAMES, enum_list(list(OPERAND_LAYOUTS)), "the operand layouts it takes", judged=True
    ),
    # torch._scaled_mm takes fp32 scales only; a wrapper that passes them on as given says so.
    SupportField("scale_dtypes", NAMES, enum_list(SCALE_VALUE_DTYPES), "the scale dtypes it takes", judged=True),
    # The dtype's largest value unless told: torchao's symmetric int8 uses 127.5.
    SupportField(
        "activation_divisor",
        AS_GIVEN,
        {"type": "number", "exclusiveMinimum": 0},
        "what its dynamic quantiser divides the amax by",
    ),
    # Never below 1, with the reason it needs one.
    SupportField("slack", AS_GIVEN, {"type": "number", "minimum": 1, "maximum": 1e6}, "its own tolerance slack (>= 1)"),
    SupportField("slack_reason", AS_GIVEN, {"type": "string", "minLength": 3}, "why it needs its own slack"),
    SupportField(
        "pair_rules",
        PAIR_RULES,
        {
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
        },
        "constraints of single scale pairs: output dtypes, whether a bias is taken",
        judged=True,
    ),
    # Its call contract (call_contract.py), where it differs from torch._scaled_mm's.
    SupportField(
        "output_layout",
        AS_GIVEN,
        {"enum": [*OUTPUT_LAYOUTS, "any"]},
        "the layout of its output: row-major (as _scaled_mm), column-major or any",
    ),
    SupportField("deterministic", AS_GIVEN, {"type": "boolean"}, "false: the same call twice may differ in its bits"),
)
SUPPORT_FIELD_NAMES = tuple(row.name for row in SUPPORT_FIELDS)
JUDGED_FIELDS = tuple(row.name for row in SUPPORT_FIELDS if row.judged)
