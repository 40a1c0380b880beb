"""The report's JSON Schema, derived from its types (records.py), and the check of a file read
against it: one line naming the key for the first field that is wrong.

Each TypedDict becomes an object whose named keys are checked and whose other keys are free (a
newer plugin's); `X | None` admits null; what `Annotated` adds (a pattern, a minimum, the rest
of an object's keys) joins the field's schema. A record's params are checked by the axes that
make them (matrix/schema.py).
"""

from __future__ import annotations

import types
import typing
from typing import Any, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

from ..matrix.schema import CATEGORICAL_AXES, KERNEL_AXES, SHAPE_AXES
from ..records import NON_FINITE_PATTERN, Check, Count, Report, Rest, Slot

_PLAIN = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def schema_of(annotation: Any, slots: dict[str, dict]) -> dict[str, Any]:
    """The JSON Schema of a value of this type; `slots` fills each Slot by its name."""
    origin = get_origin(annotation)
    if origin in (Required, NotRequired):
        return schema_of(get_args(annotation)[0], slots)
    if origin is typing.Annotated:
        base, *metadata = get_args(annotation)
        annotated = schema_of(base, slots)
        for item in metadata:
            annotated = _annotated(annotated, item, slots)
        return annotated
    if origin in (Union, types.UnionType):
        return _union([schema_of(member, slots) for member in get_args(annotation)])
    if annotation is Any:
        return {}
    if annotation in _PLAIN:
        return {"type": _PLAIN[annotation]}
    if is_typeddict(annotation):
        hints = get_type_hints(annotation, include_extras=True)
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {key: schema_of(hint, slots) for key, hint in hints.items()},
        }
        required = [key for key, hint in hints.items() if _required(annotation, key, hint)]
        if required:
            schema["required"] = required
        return schema
    if origin is list:
        (item,) = get_args(annotation)
        return {"type": "array", **({"items": schema_of(item, slots)} if item is not Any else {})}
    if origin is dict:
        key, value = get_args(annotation)
        if key is not str:
            raise TypeError(f"a JSON object's keys are strings, not {key!r}")
        return {"type": "object", **({"additionalProperties": schema_of(value, slots)} if value is not Any else {})}
    raise TypeError(f"no JSON Schema for {annotation!r}")


def _required(typed_dict: Any, key: str, hint: Any) -> bool:
    # Under postponed annotations the class cannot see Required[...]: the hint tells, through
    # any Annotated around it.
    while get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    origin = get_origin(hint)
    return origin is Required or (key in typed_dict.__required_keys__ and origin is not NotRequired)


# The JSON types each keyword constrains: one that constrains none of a value's types would check
# nothing, and one that constrains another member of a union would check it too.
_KEYWORD_TYPES = {
    "pattern": {"string"},
    "minLength": {"string"},
    "minimum": {"integer", "number"},
    "properties": {"object"},
    "required": {"object"},
    "additionalProperties": {"object"},
    "items": {"array"},
}


def _constrained_types(keywords: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for keyword in keywords:
        found |= _KEYWORD_TYPES[keyword]
    return found


def _numeric(kinds) -> set[str]:
    """JSON types with "number" and "integer" each standing for both (one admits the other)."""
    kinds = set(kinds)
    return kinds | {"integer", "number"} if kinds & {"integer", "number"} else kinds


def _annotated(schema: dict[str, Any], item: Any, slots: dict[str, dict]) -> dict[str, Any]:
    if isinstance(item, Slot):
        return {**slots[item.name], "type": _merge_types(schema.get("type"), slots[item.name].get("type"))}
    if isinstance(item, Rest):
        return {**schema, "additionalProperties": schema_of(item.holds, slots)}
    if is_typeddict(item):  # the keys of a free object that are checked
        declared = schema_of(item, slots)
        return {**schema, **{key: declared[key] for key in ("properties", "required") if key in declared}}
    if isinstance(item, Check):
        keywords = {"pattern": item.pattern, "minimum": item.minimum, "minLength": item.min_length}
        keywords = {key: value for key, value in keywords.items() if value is not None}
        if not _constrained_types(keywords) & _numeric(_types(schema)):
            raise TypeError(f"{item!r} constrains none of the types {_types(schema)}")
        return {**schema, **keywords}
    raise TypeError(f"no JSON Schema for the annotation {item!r}")


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


def _merge_types(*kinds) -> str | list[str]:
    """One JSON type or a list, in the order given, "integer" left out beside "number" (which
    admits it)."""
    merged: list[str] = []
    for kind in kinds:
        for name in [kind] if isinstance(kind, str) else kind or ():
            if name not in merged:
                merged.append(name)
    if "number" in merged and "integer" in merged:
        merged.remove("integer")
    return merged[0] if len(merged) == 1 else merged


def _union(members: list[dict[str, Any]]) -> dict[str, Any]:
    """A union as one schema: its members' types listed, the keywords of the one member that has
    any kept (a null, a plain type beside a constrained one)."""
    keywords = [{k: v for k, v in member.items() if k != "type"} for member in members]
    constrained = [k for k in keywords if k]
    if len(constrained) > 1 or any(not member.get("type") for member in members):
        raise TypeError(f"a union JSON Schema cannot state as one type: {members}")
    if constrained:
        others = {kind for member, kw in zip(members, keywords, strict=True) if not kw for kind in _types(member)}
        if _constrained_types(constrained[0]) & _numeric(others):
            raise TypeError(f"a union whose constraint would hold its other members too: {members}")
    return {**(constrained[0] if constrained else {}), "type": _merge_types(*(_types(m) for m in members))}


def _axis_types(values) -> list[str]:
    """The JSON types of an axis's values, as a record's params hold them."""
    return sorted({_PLAIN[type(value)] for value in values})


# A record's params: each axis holds the type of its values (readers group, match and show cases
# by them); the kernel, scale forms, mode and sizes that coverage and shape classes read are
# always there; an axis a newer plugin adds holds a plain value, as every axis does.
_PARAMS = {
    "type": "object",
    "required": ["kernel", "scale_a", "scale_b", "mode", *SHAPE_AXES],
    "properties": {
        **{name: {"type": _axis_types(values)} for name, values in CATEGORICAL_AXES.items()},
        **{name: {"type": _axis_types(values)} for name, (values, _, _) in KERNEL_AXES.items()},
        "kernel": {"type": "string", "minLength": 1},
        **{dim: schema_of(Count, {}) for dim in SHAPE_AXES},
        "purpose": {"type": "string"},
        "expected_refusal": {"type": ["string", "null"]},
        "activation": {"type": "string"},
        "accumulation": {"type": "string"},
        "activation_divisor": {"type": "number"},
    },
    "additionalProperties": {"type": ["string", "integer", "number", "boolean", "null"]},
}

REPORT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **schema_of(Report, {"params": _PARAMS}),
}


_VALIDATOR = None


def _validator():
    global _VALIDATOR
    if _VALIDATOR is None:
        from jsonschema import Draft202012Validator, validators  # noqa: PLC0415 (jsonschema at first read)

        checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
            {
                "integer": lambda _, value: type(value) is int,
                "number": lambda _, value: type(value) in (int, float),
            }
        )
        _VALIDATOR = validators.extend(Draft202012Validator, type_checker=checker)(REPORT_SCHEMA)
    return _VALIDATOR


def first_problem(data: Any) -> str | None:
    """What is wrong with a report's data, on one line naming the key; None where nothing is."""
    from jsonschema.exceptions import best_match  # noqa: PLC0415 (jsonschema at first read)

    error = best_match(_validator().iter_errors(data))
    return None if error is None else _schema_message(error)


def _json_path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


_SCHEMA_TYPES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "boolean": "a boolean",
    "integer": "a whole number",
    "number": "a number",
    "null": "null",
}
_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def _schema_message(error) -> str:
    where = _json_path(error.absolute_path)
    value = error.instance
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        wanted = " or ".join(_SCHEMA_TYPES.get(t, str(t)) for t in types)
        return f"key '{where}' must be {wanted}, not {_JSON_TYPES.get(type(value), type(value).__name__)}"
    if error.validator == "required":
        missing = next((k for k in error.validator_value if isinstance(value, dict) and k not in value), "?")
        return f"key '{_json_path([*error.absolute_path, missing])}' is missing"
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if error.validator == "pattern" and error.validator_value == NON_FINITE_PATTERN:
        return f"key '{where}' is {shown}, not a number (nor inf, -inf or nan)"
    if error.validator == "pattern":
        return f"key '{where}' is {shown}, not an outcome class name"
    if error.validator == "minLength":
        return f"key '{where}' is empty"
    if error.validator == "minimum":
        return f"key '{where}' is {shown}, below {error.validator_value}"
    return f"key '{where}' is {shown}: {error.validator} {error.validator_value!r}"
