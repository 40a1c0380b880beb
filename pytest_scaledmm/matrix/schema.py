"""JSON schema of matrix.yaml and the vocabulary of its axes.

Kept free of torch so that reading and validating a matrix costs milliseconds. Scale forms and
compile modes come from their tables (verdict/scale_forms.py, compile_modes.py).
"""

from collections.abc import Mapping
from typing import Any

from ..verdict.case_axes import NEUTRAL
from ..verdict.layouts import OPERAND_LAYOUTS
from ..verdict.regimes import REGIMES
from ..verdict.scale_forms import FORMS
from ..verdict.support_fields import (
    ARCHS,
    OPERAND_DTYPES,
    OUT_DTYPES,
    RULE,
    SCALE_FORMS,
    SCALE_LAYOUTS,
    SHAPE_LIMIT,
    SUPPORT_FIELDS,
)
from ..verdict.support_fields import enum_list as _enum_list
from .compile_modes import MODE_NAMES

COMPILE_MODES = MODE_NAMES  # the same list: a registered mode is a valid value
SPECIAL_SCALES = ["none", "zero", "negative", "inf", "nan"]
# Rank of each scale form's tensor: mixed ranks are what Inductor's scaled-mm lowering trips on.
SCALE_RANK = {form.id: form.rank for form in FORMS}

# Categorical axes, in the order they are covered and printed.
CATEGORICAL_AXES: dict[str, list[Any]] = {
    "scale_a": SCALE_FORMS,
    "scale_b": SCALE_FORMS,
    "dtype_a": OPERAND_DTYPES,
    "dtype_b": OPERAND_DTYPES,
    "out_dtype": OUT_DTYPES,
    "bias": [False, True],
    "use_fast_accum": [False, True],
    "mode": COMPILE_MODES,
    "scale_layout": SCALE_LAYOUTS,
    "activation_rank": [2, 3],
    "special_scale": SPECIAL_SCALES,
}
# Axes only some built-in kernels take, each with its values, its neutral value (what a case
# without the axis means) and those kernels. A kernel's cases carry such an axis only where the
# profile gives it more than the neutral value (grouped kernels: always), so that the cases and
# ids of every other kernel and profile stay as they were.
GROUPED_KERNELS = ("scaled_grouped_mm",)
ALL_KERNELS = "*"  # an axis every kernel takes, user kernels included, but the grouped ones
USER_KERNELS = "user"  # among an axis's takers: every user kernel (impl or hook) takes it


def takes_axis(kernel_name: str, takers, builtin: bool) -> bool:
    """Whether a kernel takes a KERNEL_AXES axis."""
    if takers == ALL_KERNELS:
        return kernel_name not in GROUPED_KERNELS
    return kernel_name in takers if builtin else USER_KERNELS in takers


# name -> (values, neutral value, the kernels that take it or ALL_KERNELS).
KERNEL_AXES: dict[str, tuple[list[Any], Any, tuple[str, ...] | str]] = {
    # torch._scaled_grouped_mm: a [total_M, K] x b [G, K, N] with offsets over M; a [G, M, K] x
    # b [G, K, N]; a [M, total_K] x b [total_K, N] with offsets over K (verdict/grouped.py).
    "group_layout": (["2d3d", "3d3d", "2d2d"], NEUTRAL["group_layout"], GROUPED_KERNELS),
    "group_sizes": (["even", "jagged", "empty"], NEUTRAL["group_sizes"], GROUPED_KERNELS),
    "groups": ([1, 2, 3, 4, 8], NEUTRAL["groups"], GROUPED_KERNELS),
    # torch._scaled_mm's output scale, used with an fp8 output only.
    "scale_result": (["none", "one", "two", "quarter"], NEUTRAL["scale_result"], ("aten_scaled_mm",)),
    # The bias's dtype; `out`: the output dtype's (bf16 for an fp8 output).
    "bias_dtype": (
        ["out", "bf16", "fp16", "fp32"],
        NEUTRAL["bias_dtype"],
        ("aten_scaled_mm", "fp8_linear", "fp8_linear_no_lift", "fp8_linear_rowwise", USER_KERNELS),
    ),
    # The dtype user kernels get their fp32-form scales in: libraries pass them in the
    # activation's dtype (the built-in ops take fp32 scales only).
    "scale_dtype": (["fp32", "bf16", "fp16"], NEUTRAL["scale_dtype"], (USER_KERNELS,)),
    # A rowwise scale of a 3-D activation as amax(dim=-1, keepdim=True) gives it: [B, T, 1].
    "scale_keepdim": ([False, True], NEUTRAL["scale_keepdim"], ("fp8_linear_rowwise",)),
    # Production data (verdict/regimes.py, verdict/layouts.py), for every kernel but the grouped
    # ones: the values a case holds, the memory its operands sit in, and which scale a special
    # value goes into (special cases only).
    "value_regime": (list(REGIMES), NEUTRAL["value_regime"], ALL_KERNELS),
    "operand_layout": (list(OPERAND_LAYOUTS), NEUTRAL["operand_layout"], ALL_KERNELS),
    "special_side": (["a", "b"], NEUTRAL["special_side"], ALL_KERNELS),
}
SHAPE_AXES = ["m", "k", "n"]
# What a kernel may declare about the shapes it supports (M counts tokens: B*T for 3-D a).
SHAPE_LIMITS = [row.name for row in SUPPORT_FIELDS if row.group == SHAPE_LIMIT]
# What it may declare about the rest: accepted (a, b) pairs, output dtypes, bias rules.
SUPPORT_RULES = [row.name for row in SUPPORT_FIELDS if row.group == RULE]
ALL_AXES = list(CATEGORICAL_AXES) + list(KERNEL_AXES) + SHAPE_AXES + ["kernel"]

# The neutral value of each axis: what a case without it means (an included case's missing
# params, the order generation tries values in). Not what a matrix that leaves an axis out gets.
AXIS_DEFAULTS: dict[str, list] = {
    **{axis: [NEUTRAL[axis]] for axis in CATEGORICAL_AXES},
    "m": [16],
    "k": [32],
    "n": [32],
}


# What a matrix that leaves an axis out gets: the whole range a kernel can be given (the
# production data of the shipped default profile), narrowed per kernel by what it declares and
# what its support model refuses. A matrix narrows this space by listing an axis, never widens
# it. Modes: the three layers (autotuning and CUDA-graph modes only when listed: their compiles
# cost seconds); 3-D activations and block scales only when listed (the kernel contract's
# operands are 2-D, its scales per-tensor or rowwise).
PRODUCTION_DEFAULTS: dict[str, list] = {
    "scale_a": ["tensor_0d", "tensor_1d", "tensor_1x1", "rowwise"],
    "scale_b": ["tensor_0d", "tensor_1d", "tensor_1x1", "rowwise"],
    "dtype_a": ["e5m2", "e4m3fn"],
    "dtype_b": ["e5m2", "e4m3fn"],
    "out_dtype": ["fp32", "bf16", "fp16"],
    "bias": [True, False],
    "use_fast_accum": [True, False],
    "mode": ["eager", "aot_eager", "inductor"],
    "scale_layout": ["noncontiguous", "contiguous", "offset", "expanded"],
    "activation_rank": [2],
    "special_scale": ["none", "zero", "negative", "inf", "nan"],
    "value_regime": list(REGIMES),
    "operand_layout": list(OPERAND_LAYOUTS),
    "special_side": ["a", "b"],
    # User kernels only (schema.KERNEL_AXES takers): an fp32 bias beside bf16 and fp16 outputs,
    # scales in bf16 and fp16.
    "bias_dtype": ["out", "fp32"],
    "scale_dtype": ["fp32", "bf16", "fp16"],
    # M 1, below a tile, odd tails, block edges; K one block, several, tails of a 32- and a
    # 128-block (48, 80, 96, 192: K above one block and not a multiple of it); N aligned or not,
    # several 128-blocks, tails above one 64- or 128-wide tile (96, 192); each dim empty once.
    "m": [0, 1, 16, 17, 33, 64, 127, 256],
    "k": [128, 32, 64, 256, 24, 160, 20, 320, 48, 80, 96, 192, 0],
    "n": [32, 16, 64, 128, 40, 256, 384, 96, 192, 0],
}
# Token counts a server meets besides the sizes a matrix lists (listed K and N are the weights'
# shapes; M is every batch from 1 to the largest prefill): decode, odd tails, block edges, a
# prefill. Added where the kernel's model takes them, in a slice of their own.
# In the order a small budget keeps them.
SERVER_M: dict[int, str] = {
    1: "decode",
    17: "odd tail",
    129: "block edge + 1",
    2048: "prefill",
    128: "block edge",
    127: "block edge - 1",
}


def defaults_digest() -> str:
    """A short digest of what a matrix's left-out axes and listed M take (PRODUCTION_DEFAULTS,
    SERVER_M): reports carry it, so that the gate can tell a change of these defaults from a
    change of the matrix or of the kernels when two runs' cases differ."""
    import hashlib  # noqa: PLC0415  only when a report is written
    import json  # noqa: PLC0415

    text = json.dumps({"axes": PRODUCTION_DEFAULTS, "server_m": sorted(SERVER_M)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# Axes whose non-neutral values are production data: a profile that gives them only the neutral
# value draws none, and says so.
PRODUCTION_AXES = ("value_regime", "operand_layout", "special_scale")


_DIM = {
    "oneOf": [
        {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0, "maximum": 65536}},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["min", "max"],
            "properties": {
                "min": {"type": "integer", "minimum": 0, "maximum": 65536},
                "max": {"type": "integer", "minimum": 1, "maximum": 65536},
            },
        },
    ]
}

# Tensor elements a case may allocate, checked at load over every profile's largest shapes (a
# {min, max} range counts its max) and every included case. Operands: a (M x K), b (K x N) and
# the output (M x N); a case: their sum. 2**26 elements of fp8 are 64 MiB, of the float64 the
# reference computes in, 512 MiB. `limits:` in matrix.yaml raises or lowers them.
DEFAULT_LIMITS = {"max_operand_elements": 2**26, "max_case_elements": 2**27}
_LIMITS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {name: {"type": "integer", "minimum": 1} for name in DEFAULT_LIMITS},
}


def case_elements(m: int, k: int, n: int) -> dict[str, int]:
    """Tensor elements of a case's operands a (M x K), b (K x N) and output (M x N)."""
    return {"a (M x K)": m * k, "b (K x N)": k * n, "output (M x N)": m * n}


def size_problem(m: int, k: int, n: int, limits: Mapping[str, int]) -> tuple[str, str] | None:
    """(the limit exceeded, a message) when a case of these dims would allocate more elements
    than `limits` allow, else None."""
    sizes = case_elements(m, k, n)
    shape = f"m={m}, k={k}, n={n}"
    for operand, count in sizes.items():
        if count > limits["max_operand_elements"]:
            return "max_operand_elements", (
                f"{shape} makes operand {operand} {count} elements, more than"
                f" limits.max_operand_elements = {limits['max_operand_elements']}"
            )
    total = sum(sizes.values())
    if total > limits["max_case_elements"]:
        return "max_case_elements", (
            f"{shape} makes {total} elements in a, b and the output, more than"
            f" limits.max_case_elements = {limits['max_case_elements']}"
        )
    return None


_AXES = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        **{name: _enum_list(values) for name, values in CATEGORICAL_AXES.items()},
        **{name: _enum_list(values) for name, (values, _, _) in KERNEL_AXES.items()},
        **{name: _DIM for name in SHAPE_AXES},
    },
}

_MATCH_VALUE = {
    "anyOf": [
        {"type": ["string", "integer", "boolean"]},
        {"type": "array", "minItems": 1, "items": {"type": ["string", "integer", "boolean"]}},
    ]
}

_MATCH = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {name: _MATCH_VALUE for name in ALL_AXES + ["arch"]},
}

_REFERENCE = {"type": "string", "pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"}
_FIRST_AFTER_CONTRACTS = [row.name for row in SUPPORT_FIELDS].index("activation")
_SUPPORT_BEFORE_CONTRACTS = {row.name: row.schema for row in SUPPORT_FIELDS[:_FIRST_AFTER_CONTRACTS]}
_SUPPORT_AFTER_CONTRACTS = {row.name: row.schema for row in SUPPORT_FIELDS[_FIRST_AFTER_CONTRACTS:]}

_KERNEL: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_]+$"},
                "impl": {"type": "string", "pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"},
                # The declared support (verdict/support_fields.py), with the weights-once
                # contracts (verdict/contracts.py) before `activation` as they always were: of two
                # equal errors, jsonschema's best_match names the first.
                **_SUPPORT_BEFORE_CONTRACTS,
                # `impl` applies what `prepare` built; `module` builds an nn.Module that is
                # compiled as a module.
                "prepare": _REFERENCE,
                "module": _REFERENCE,
                **_SUPPORT_AFTER_CONTRACTS,
                # What pip installs for the kernel's modules (`scaledmm init` adds them to the
                # envs it writes); a run does not read it.
                "requires": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
            # impl with module, prepare with module or without impl: spec.py says which.
            "dependentRequired": {
                "slack": ["slack_reason"],
                "slack_reason": ["slack"],
                "activation_divisor": ["activation"],
            },
        },
    ]
}

# What a pytest_scaledmm_kernels hook may declare besides the callable itself.
# Its callables (fn, prepare, module) are checked by spec.kernel_from_declaration.
KERNEL_DECLARATION_SCHEMA = {
    **{k: v for k, v in _KERNEL["oneOf"][1].items() if k != "properties"},
    "properties": {
        k: v for k, v in _KERNEL["oneOf"][1]["properties"].items() if k not in ("impl", "prepare", "module", "requires")
    },
}

# A profile has `cases` (with axes, kernels, strength), or is `profiles:`, the union of other
# profiles; spec.py checks which, so that each mistake gets its own message.
PROFILE_BODY_KEYS = ("cases", "strength", "axes", "kernels")
_PROFILE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "cases": {"type": "integer", "minimum": 1, "maximum": 100000},
        "strength": {"enum": [2, 3]},
        "axes": _AXES,
        "kernels": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "profiles": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
    },
}

_KNOWN_FAILURE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["match", "signature"],
    "properties": {
        "match": _MATCH,
        "torch": {"type": "string"},
        "signature": {"type": "string", "minLength": 1},
        "link": {"type": "string"},
        "reason": {"type": "string"},
    },
}

MATRIX_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "kernels", "profiles"],
    "properties": {
        "version": {"const": 1},
        "seed": {"type": "integer", "minimum": 0},
        "kernels": {"type": "array", "minItems": 1, "items": _KERNEL},
        "axes": _AXES,
        "archs": _enum_list(ARCHS),
        "exclude": {"type": "array", "items": _MATCH},
        "profiles": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": _PROFILE,
        },
        "known_failures": {"type": "array", "items": _KNOWN_FAILURE},
        "include": {"type": "array", "items": {"type": "string"}},
        "limits": _LIMITS,
        "tolerance": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"slack": {"type": "number", "exclusiveMinimum": 0}},
        },
    },
}
