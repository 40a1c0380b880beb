"""The case as a typed record: every parameter a case can hold is a field, and each axis's neutral
value (what a case that leaves the axis out means) is its field's default, declared here once.

The record remembers exactly the keys the case was given, in their order: `to_json` gives them
back unchanged, so every case id (a hash of those keys) and every recorded report stays as it is.
It is not a mapping: readers use the fields, `from_json` / `to_json` are the boundaries (reports,
the corpus, the child's protocol, ids). Only the standard library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


class CaseKeyError(ValueError):
    """A case's parameters name a key the record has no field for, or lack a required one."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class CaseParams:
    """One case's parameters."""

    kernel: str
    m: int
    k: int
    n: int
    # Axes a case may leave out; the default is the axis's neutral value (matrix/schema.py's
    # AXIS_DEFAULTS and KERNEL_AXES are built from these).
    scale_a: str = "tensor_0d"
    scale_b: str = "tensor_0d"
    dtype_a: str = "e4m3fn"
    dtype_b: str = "e4m3fn"
    out_dtype: str = "bf16"
    mode: str = "inductor"
    bias: bool = False
    use_fast_accum: bool = False
    scale_layout: str = "contiguous"
    activation_rank: int = 2
    special_scale: str = "none"
    special_operand: str = "none"
    special_side: str = "a"
    value_regime: str = "standard"
    operand_layout: str = "dense"
    scale_result: str = "none"
    scale_dtype: str = "fp32"
    bias_dtype: str = "out"
    scale_keepdim: bool = False
    group_layout: str = "2d3d"
    group_sizes: str = "even"
    groups: int = 4
    # What a kernel's declaration adds (matrix/cases.py kernel_case_params).
    accumulation: str | None = None
    activation: str | None = None
    activation_divisor: float | None = None
    # Why the case was made: a valid case, or one the kernel is expected to refuse (and how).
    purpose: str | None = None
    expected_refusal: str | None = None
    # The keys the case was given, in their order: the mapping view and to_json.
    given: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not self.given:  # made by keyword, not from_json: what it holds beyond the defaults
            held = tuple(
                f.name
                for f in dataclasses.fields(self)
                if f.name != "given" and (f.default is dataclasses.MISSING or getattr(self, f.name) != f.default)
            )
            object.__setattr__(self, "given", held)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseParams:
        """The record of a case's parameters; CaseKeyError for a key it has no field for or a
        required one missing."""
        if isinstance(data, CaseParams):
            return data
        for key in data:
            if key not in PARAM_FIELDS:
                raise CaseKeyError(str(key), "not a case parameter")
        for key in REQUIRED:
            if key not in data:
                raise CaseKeyError(key, "required")
        return cls(**data, given=tuple(data))

    def to_json(self) -> dict[str, Any]:
        """Exactly the keys given, with their values, in their order."""
        return {key: getattr(self, key) for key in self.given}

    def with_values(self, **changes: Any) -> CaseParams:
        """The same case with `changes` (given from now on)."""
        for key in changes:
            if key not in PARAM_FIELDS:
                raise CaseKeyError(key, "not a case parameter")
        added = tuple(key for key in changes if key not in self.given)
        return dataclasses.replace(self, **changes, given=self.given + added)

    def without(self, *keys: str) -> CaseParams:
        """The same case as if never given `keys` (each back to its neutral value)."""
        for key in keys:
            if key not in PARAM_FIELDS or key in REQUIRED:
                raise CaseKeyError(key, "not a case parameter that can be left out")
        defaults = {key: _FIELD_DEFAULTS[key] for key in keys}
        return dataclasses.replace(self, **defaults, given=tuple(k for k in self.given if k not in keys))

    def given_value(self, axis: str) -> Any:
        """The value the case was given for `axis`, None where it was not given: generation tells
        a neutral value given from one left out (the case's id differs)."""
        return self.value_of(axis) if axis in self.given else None

    def value_of(self, axis: str) -> Any:
        """The value of the field `axis` names (its neutral value where the case leaves it out):
        for readers that take the axis as data (coverage, hints, a rule's key)."""
        if axis not in PARAM_FIELDS:
            raise CaseKeyError(axis, "not a case parameter")
        return getattr(self, axis)

    def has(self, key: str) -> bool:
        """Whether the case was given `key` (an axis only some kernels take, say)."""
        return key in self.given

    @property
    def grouped(self) -> bool:
        """A case of a grouped kernel: it always carries its group layout."""
        return "group_layout" in self.given

    @property
    def dynamic_activation(self) -> bool:
        return self.activation == "dynamic"

    @property
    def special(self) -> bool:
        """A special value (zero, inf, nan ...) in a scale or an operand."""
        return self.special_scale != "none" or self.special_operand != "none"


PARAM_FIELDS = frozenset(f.name for f in dataclasses.fields(CaseParams) if f.name != "given")
REQUIRED = tuple(f.name for f in dataclasses.fields(CaseParams) if f.default is dataclasses.MISSING)
_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(CaseParams) if f.default is not dataclasses.MISSING}
_NOT_AXES = ("accumulation", "activation", "activation_divisor", "purpose", "expected_refusal", "given")

# Each axis a case may leave out, with its neutral value: the record's defaults.
NEUTRAL: Mapping[str, Any] = MappingProxyType(
    {
        f.name: f.default
        for f in dataclasses.fields(CaseParams)
        if f.default is not dataclasses.MISSING and f.name not in _NOT_AXES
    }
)


def case_record(params: Mapping[str, Any]) -> CaseParams:
    """A case's parameters as the record (a record is returned as it is)."""
    return CaseParams.from_json(params)


def axis_value(params: Mapping[str, Any], axis: str) -> Any:
    """The case's value of `axis`, its neutral value where the case leaves it out (for a case that
    is still a plain mapping: a row being generated)."""
    return params.get(axis, NEUTRAL[axis])
