"""matrix.yaml -> a validated, frozen Spec. No torch import here."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..verdict.scale_forms import FORMS
from ..verdict.support_fields import (
    NAMES,
    PAIR_RULES,
    PAIRS,
    SHAPE_LIMIT,
    SUPPORT_FIELD_NAMES,
    SUPPORT_FIELDS,
    Declared,
    SupportField,
)
from . import bounded_yaml
from .corpus import check_kernel_axes, check_kernels, check_sizes, included_cases
from .errors import MatrixError
from .packs import PACK_KERNELS
from .schema import (
    AXIS_DEFAULTS,  # noqa: F401  re-exported: the neutral values, for callers of spec
    CATEGORICAL_AXES,
    DEFAULT_LIMITS,
    KERNEL_AXES,
    KERNEL_DECLARATION_SCHEMA,
    MATRIX_SCHEMA,
    PRODUCTION_DEFAULTS,
    PROFILE_BODY_KEYS,
    size_problem,
)

DEFAULT_SEED = 20240501

# Built-in kernels and their static declarations; implementations live in kernels.py.
_PER_TENSOR = [form.id for form in FORMS if form.per_tensor]
# int8_w8a8 scales the int32 product in an epilogue: only scales constant along K.
_EPILOGUE = [form.id for form in FORMS if form.constant_along_k]
BUILTIN_KERNELS: dict[str, dict] = {
    "aten_scaled_mm": {"family": "fp8"},
    # torch.nn.functional.scaled_mm landed after the 2.9 branch cut (pytorch#164142); run.py
    # also checks that it exists (kernels.unavailable_reason).
    "scaled_mm_v2": {"family": "fp8", "min_torch": "2.10"},
    # The same op called as users write it: torch.nn.functional.scaled_mm with ScalingType enums.
    "scaled_mm_v2_functional": {"family": "fp8", "min_torch": "2.10"},
    "fp8_linear": {"family": "fp8", "scale_forms": _PER_TENSOR},
    "fp8_linear_no_lift": {"family": "fp8", "scale_forms": _PER_TENSOR},
    "int8_w8a8": {"family": "int8", "scale_forms": _EPILOGUE},
    # torch.bmm on int32-widened int8 operands (3-D activations, the weight broadcast).
    "int8_bmm": {"family": "int8", "scale_forms": _EPILOGUE},
    # Per-token activation scales, per-channel weight scales; a [B, T, 1] (keepdim) scale flattened.
    "fp8_linear_rowwise": {"family": "fp8", "scale_forms": ["rowwise"]},
    # torch._scaled_grouped_mm: rowwise e4m3 operands, bf16 output, sizes and group sizes in
    # multiples of 16 (verdict/grouped.py builds its operands).
    "scaled_grouped_mm": {
        "family": "fp8",
        "scale_forms": ["rowwise"],
        "dtypes": ["e4m3fn"],
        "out_dtypes": ["bf16"],
        "m_multiple": 16,
        "k_multiple": 16,
        "n_multiple": 16,
    },
}


@dataclass(frozen=True)
class KernelSpec(Declared):
    """A kernel as the matrix runs it: its declarations (`Declared`) as kept, lists as tuples,
    and how it is given: a built-in (neither), `impl` (a `module:function`), or from a hook, the
    callable `fn`. `prepare` builds the weight object `impl`/`fn` applies; `module` builds a
    module (verdict/contracts.py): a `module:qualname`, or from a hook, the callable."""

    name: str
    # Keywords, as every declaration: KernelSpec("k", "fp8") is refused, never read as impl.
    impl: str | None = field(default=None, kw_only=True)
    fn: Callable | None = field(default=None, compare=False, repr=False, kw_only=True)
    prepare: Any = field(default=None, compare=False, kw_only=True)
    module: Any = field(default=None, compare=False, kw_only=True)

    @property
    def contract(self) -> str:
        """How the harness calls it: `call` (one function), `prepare` or `module`."""
        return "module" if self.module is not None else "prepare" if self.prepare is not None else "call"

    @property
    def user_code(self) -> bool:
        """Declared by the user or a pack (code the harness imports), not a built-in."""
        return self.fn is not None or self.impl is not None or self.module is not None


@dataclass(frozen=True)
class Profile:
    name: str
    cases: int
    strength: int
    axes: Mapping[str, Any]
    kernels: tuple[str, ...] | None
    # A composite profile (`profiles:` in matrix.yaml): the union of these profiles' cases, each
    # part generated with its own axes, kernels and budget. Its `cases` is the parts' sum.
    parts: tuple[Profile, ...] = ()

    @property
    def leaves(self) -> tuple[Profile, ...]:
        """The profiles whose axes make cases: a composite's parts, else the profile itself."""
        return self.parts or (self,)


@dataclass(frozen=True)
class Spec:
    path: Path
    digest: str
    seed: int
    kernels: tuple[KernelSpec, ...]
    axes: Mapping[str, Any]
    archs: tuple[str, ...]
    exclude: tuple[Mapping[str, Any], ...]
    profiles: Mapping[str, Profile]
    known_failures: tuple[Mapping[str, Any], ...] = ()
    slack: float = 1.0
    included_cases: tuple[Mapping[str, Any], ...] = field(default=())
    # Tensor elements per operand and per case (schema.DEFAULT_LIMITS, `limits:` in the matrix).
    limits: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles))
            raise MatrixError(self.path, f"profiles.{name}", f"no such profile (defined: {known})") from None

    def axes_for(self, profile: Profile) -> dict[str, Any]:
        if profile.parts:  # no axes of its own: merging the matrix's would describe no case
            raise ValueError(f"profile {profile.name!r} is a union of profiles: take the axes of each of its parts")
        merged = dict(PRODUCTION_DEFAULTS)
        merged.update(self.axes)
        merged.update(profile.axes)
        return merged

    def kernels_for(self, profile: Profile) -> tuple[KernelSpec, ...]:
        if profile.parts:
            names = {k.name for part in profile.parts for k in self.kernels_for(part)}
            return tuple(k for k in self.kernels if k.name in names)
        if not profile.kernels:
            return self.kernels
        return tuple(k for k in self.kernels if k.name in profile.kernels)


def _key_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _validate(path: Path, data: Any) -> None:
    import jsonschema  # noqa: PLC0415  0.3 s start-up

    validator = jsonschema.Draft202012Validator(MATRIX_SCHEMA)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return
    key = _key_path(error.absolute_path)
    message = error.message
    if error.validator == "additionalProperties":
        message = f"unknown key ({message})"
    raise MatrixError(path, key or "(top level)", message)


# Every field a declaration may carry about its support (verdict/support_fields.py).
_DECLARED_FIELDS = SUPPORT_FIELD_NAMES
# Left out of a declaration's digest when not declared, so that older declarations keep theirs.
_OPTIONAL_FIELDS = (*(row.name for row in SUPPORT_FIELDS if not row.always_digested), "prepare", "module")


def _stored(row: SupportField, value: Any) -> Any:
    """A declared value as a KernelSpec keeps it: lists as tuples, pairs as tuples of tuples."""
    if value is None:
        return None
    if row.stored == NAMES:
        return tuple(value)
    if row.stored == PAIRS:
        return tuple(tuple(pair) for pair in value)
    if row.stored == PAIR_RULES:
        return tuple(
            (tuple(rule["scale_pair"]), tuple(rule["out_dtypes"]) if rule.get("out_dtypes") else None, rule.get("bias"))
            if isinstance(rule, Mapping)
            else tuple(rule)
            for rule in value
        )
    return value


def _build_kernel(path, key: str, entry: Mapping[str, Any], impl=None, fn=None) -> KernelSpec:
    if "min_torch" in entry:
        try:
            Version(entry["min_torch"])
        except InvalidVersion:
            raise MatrixError(path, f"{key}.min_torch", f"not a version: {entry['min_torch']!r}") from None
    for row in SUPPORT_FIELDS:
        # The schema's "integer" admits 16.0; a size limit must be an int all the way to torch.
        if row.group == SHAPE_LIMIT and entry.get(row.name) is not None and type(entry[row.name]) is not int:
            raise MatrixError(path, f"{key}.{row.name}", f"{entry[row.name]!r} is not an integer")
    if entry.get("min_m") and entry.get("max_m") and entry["min_m"] > entry["max_m"]:
        raise MatrixError(path, f"{key}.min_m", f"min_m {entry['min_m']} is greater than max_m {entry['max_m']}")
    low, high, step = entry.get("min_m") or 1, entry.get("max_m"), entry.get("m_multiple")
    if high and step and -(-low // step) * step > high:
        raise MatrixError(
            path,
            f"{key}.m_multiple",
            f"no M from {low} to max_m {high} is a multiple of m_multiple {step}: no case fits",
        )
    family = entry.get("family") or "fp8"
    if entry.get("activation") == "dynamic" and family == "int8" and entry.get("activation_divisor") is None:
        entry = {**entry, "activation_divisor": 127.0}
    declared = {row.name: _stored(row, entry.get(row.name)) for row in SUPPORT_FIELDS}
    declared["family"] = family
    return KernelSpec(
        entry["name"], impl=impl, fn=fn, prepare=entry.get("prepare"), module=entry.get("module"), **declared
    )


def _kernel_spec(path: Path, index: int, entry: Any, declared: Mapping[str, KernelSpec]) -> KernelSpec:
    key = f"kernels[{index}]"
    if isinstance(entry, str):
        entry = {"name": entry}
    name = entry["name"]
    impl = entry.get("impl")
    if entry.get("module") is not None and (impl is not None or entry.get("prepare") is not None):
        other = "impl" if impl is not None else "prepare"
        raise MatrixError(
            path, f"{key}.module", f"a module kernel has no {other}: its factory builds the module that runs"
        )
    if entry.get("prepare") is not None and impl is None and name not in declared:
        raise MatrixError(path, f"{key}.prepare", "a prepare step needs impl: the apply step that takes its weight")
    if name in declared:
        if impl is not None:
            raise MatrixError(
                path, f"{key}.name", f"kernel {name!r} is also declared by a pytest_scaledmm_kernels hook"
            )
        # The matrix names a hook kernel; its own keys narrow the declaration.
        base = declared[name]
        declared_fields = {
            k: getattr(base, k) for k in (*_DECLARED_FIELDS, "prepare", "module") if getattr(base, k) is not None
        }
        if base.pair_rules is not None:
            declared_fields["pair_rules"] = base.pair_rules
        entry = {**declared_fields, **entry}
        return _build_kernel(path, key, entry, fn=base.fn)
    if (impl is not None or entry.get("module") is not None) and name in PACK_KERNELS:
        raise MatrixError(
            path, f"{key}.name", f"{name!r} is a packed kernel's name; give your kernel a name of its own"
        )
    if impl is None and entry.get("module") is None and name not in BUILTIN_KERNELS:
        if name not in PACK_KERNELS:
            known = ", ".join(sorted(BUILTIN_KERNELS) + sorted(PACK_KERNELS))
            raise MatrixError(path, key, f"unknown kernel {name!r}: give 'impl: module:function' or use one of {known}")
        if entry.get("prepare") is not None:
            raise MatrixError(path, f"{key}.prepare", f"{name!r} is a packed kernel: its own code is not replaced")
        entry = {**PACK_KERNELS[name], **entry}
        impl = entry.get("impl")
    entry = {**BUILTIN_KERNELS.get(name, {}), **entry} if impl is None and entry.get("module") is None else entry
    return _build_kernel(path, key, entry, impl=impl)


def pack_kernel_spec(name: str) -> KernelSpec:
    """A packed kernel's KernelSpec, as `kernels: [name]` in a matrix gives it."""
    return _kernel_spec(Path("(packed kernels)"), 0, name, {})


def kernel_from_declaration(
    where: str,
    index: int,
    entry: Mapping[str, Any],
    fn: Callable | None,
    prepare: Callable | None = None,
    module: Callable | None = None,
) -> KernelSpec:
    """A kernel declared by a plugin hook, validated like a matrix entry; `where` names the hook
    and the plugin that returned it."""
    import jsonschema  # noqa: PLC0415  0.3 s start-up

    validator = jsonschema.Draft202012Validator(KERNEL_DECLARATION_SCHEMA)
    # Pairs may come as tuples; the schema's arrays are lists.
    entry = {
        k: (
            [list(p) if isinstance(p, tuple) else p for p in v]
            if k in ("scale_pairs", "dtype_pairs") and isinstance(v, (list, tuple))
            else v
        )
        for k, v in dict(entry).items()
    }
    if isinstance(entry.get("pair_rules"), (list, tuple)):
        entry["pair_rules"] = [
            {k: (list(v) if isinstance(v, tuple) else v) for k, v in rule.items()}
            if isinstance(rule, Mapping)
            else rule
            for rule in entry["pair_rules"]
        ]
    error = jsonschema.exceptions.best_match(validator.iter_errors(entry))
    key = f"[{index}]"
    if error is not None:
        path = _key_path(error.absolute_path)
        raise MatrixError(where, f"{key}.{path}" if path else key, error.message)
    if entry["name"] in BUILTIN_KERNELS or entry["name"] in PACK_KERNELS:
        raise MatrixError(where, f"{key}.name", f"{entry['name']!r} is a built-in kernel; choose another name")
    for name, value in (("prepare", prepare), ("module", module)):
        if value is not None and not callable(value):
            raise MatrixError(where, f"{key}.{name}", f"{value!r} is not callable")
    if module is not None and fn is not None:
        raise MatrixError(where, f"{key}.module", "a module kernel has no fn: its module's forward is what runs")
    if module is None and not callable(fn):
        raise MatrixError(where, f"{key}.fn", f"{fn!r} is not callable")
    return _build_kernel(where, key, {**entry, "prepare": prepare, "module": module}, fn=fn)


def _declaration_digest(kernel: KernelSpec) -> dict:
    # Shape limits and rules only when declared: a declaration without them keeps its digest.
    fields = {
        k: getattr(kernel, k)
        for k in ("name", *_DECLARED_FIELDS)
        if k not in _OPTIONAL_FIELDS or getattr(kernel, k) is not None
    }
    for name in ("fn", "prepare", "module"):
        fn = getattr(kernel, name)
        if name == "fn" or fn is not None:
            fields[name] = (
                fn
                if isinstance(fn, str)
                else f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
            )
    return fields


def _check_dims(path: Path, where: str, axes: Mapping[str, Any]) -> None:
    for dim in ("m", "k", "n"):
        value = axes.get(dim)
        # The schema's "integer" admits 16.0; a shape must be an int all the way to torch.
        entries = value.items() if isinstance(value, dict) else enumerate(value or ())
        for index, entry in entries:
            if type(entry) is not int:
                key = f"{where}.{dim}.{index}" if isinstance(value, dict) else f"{where}.{dim}[{index}]"
                raise MatrixError(path, key, f"{entry!r} is not an integer")
        if isinstance(value, dict) and value["min"] > value["max"]:
            raise MatrixError(path, f"{where}.{dim}", "min is greater than max")


def _check_sizes(path: Path, data: Mapping[str, Any], limits: Mapping[str, int]) -> None:
    """Every profile's largest case (each dim at its largest value) within `limits`."""
    for name, body in data["profiles"].items():
        if "profiles" in body:
            continue  # a composite: its parts are checked
        largest: dict[str, int] = {}
        source: dict[str, str | None] = {}  # the key that sets each dim, None: the default
        for dim in ("m", "k", "n"):
            for key, axes in (
                (f"profiles.{name}.axes.{dim}", body.get("axes", {})),
                (f"axes.{dim}", data.get("axes") or {}),
            ):
                if dim in axes:
                    value = axes[dim]
                    largest[dim] = value["max"] if isinstance(value, dict) else max(value)
                    source[dim] = key
                    break
            else:
                largest[dim], source[dim] = max(PRODUCTION_DEFAULTS[dim]), None
        problem = size_problem(largest["m"], largest["k"], largest["n"], limits)
        if problem is not None:
            # Named after the largest dim the matrix sets: the one to lower.
            set_here = [d for d in ("m", "k", "n") if source[d]] or ["m"]
            dim = max(set_here, key=lambda d: largest[d])
            raise MatrixError(
                path, source[dim] or "axes", f"profile {name!r}: {problem[1]}; lower the shape or raise the limit"
            )


def _profiles(path: Path, bodies: Mapping[str, Any], kernel_names: Sequence[str]) -> dict[str, Profile]:
    """The profiles in file order: those with `cases` first built, then the composites of them."""
    leaves = {}
    for name, body in bodies.items():
        if "profiles" in body:
            continue
        if "cases" not in body:
            raise MatrixError(
                path,
                f"profiles.{name}",
                "'cases' is a required property (or 'profiles': a list of other profiles to run together)",
            )
        _check_dims(path, f"profiles.{name}.axes", body.get("axes", {}))
        for i, kname in enumerate(body.get("kernels", [])):
            if kname not in kernel_names:
                raise MatrixError(path, f"profiles.{name}.kernels[{i}]", f"kernel {kname!r} is not in 'kernels'")
        leaves[name] = Profile(
            name,
            body["cases"],
            body.get("strength", 2),
            dict(body.get("axes", {})),
            tuple(body.get("kernels", ())) or None,
        )
    profiles = {}
    for name, body in bodies.items():
        if name in leaves:
            profiles[name] = leaves[name]
            continue
        for key in PROFILE_BODY_KEYS:
            if key in body:
                raise MatrixError(
                    path,
                    f"profiles.{name}.{key}",
                    f"{key!r} does not go with 'profiles': a composite profile"
                    " runs its parts, each with its own cases, axes, kernels and strength",
                )
        listed = body["profiles"]
        for i, part in enumerate(listed):
            key = f"profiles.{name}.profiles[{i}]"
            if part == name:
                raise MatrixError(path, key, f"{part!r} is this profile itself")
            if part not in bodies:
                raise MatrixError(path, key, f"no such profile {part!r} (defined: {', '.join(sorted(bodies))})")
            if part not in leaves:
                # One level only: a union of unions would hide which budget made which case.
                raise MatrixError(
                    path,
                    key,
                    f"{part!r} is itself a composite profile; list its parts instead"
                    f" ({', '.join(map(str, bodies[part]['profiles']))})",
                )
            if listed.index(part) != i:
                raise MatrixError(path, key, f"{part!r} is listed twice (also at [{listed.index(part)}])")
        parts = tuple(leaves[part] for part in listed)
        # A part that names no kernels runs them all, and so does the composite.
        named = [p.kernels for p in parts if p.kernels is not None]
        kernels = tuple(dict.fromkeys(k for ks in named for k in ks)) if len(named) == len(parts) else None
        profiles[name] = Profile(name, sum(p.cases for p in parts), max(p.strength for p in parts), {}, kernels, parts)
    return profiles


def _limits(data: Mapping[str, Any]) -> dict[str, int]:
    return {**DEFAULT_LIMITS, **{k: int(v) for k, v in (data.get("limits") or {}).items()}}


MAX_SLACK = 16.0


def _check_tolerance(path: Path, data: Mapping[str, Any]) -> None:
    slack = (data.get("tolerance") or {}).get("slack", 1.0)
    # The schema lets .inf (above any minimum) and .nan (compares false) through; either one
    # passes every output, as a zero slack fails every one.
    if not math.isfinite(slack) or slack <= 0:
        raise MatrixError(path, "tolerance.slack", f"must be a finite number greater than 0, not {slack!r}")
    # Past this a wrong answer passes: 16x the calibrated bound lets a kernel that is off by a
    # whole bf16 step, or an fp8 one by several percent, through.
    if slack > MAX_SLACK:
        raise MatrixError(
            path,
            "tolerance.slack",
            f"must be at most {MAX_SLACK}, not {slack!r}: a larger slack lets wrong results pass",
        )


# What a dynamic quantiser may divide the amax by: near the dtype's largest value (torchao's int8
# divides by 127.5). Far from it every element counts as rounded and the bound grows to the amax.
DIVISOR_RANGE = (0.5, 1.01)
_DTYPE_MAX = {"e4m3fn": 448.0, "e4m3fnuz": 240.0, "e5m2": 57344.0, "e5m2fnuz": 57344.0, "int8": 127.0}


def _check_contract(where, key: str, kernel: KernelSpec, matrix_slack: float) -> None:
    """A kernel's own slack and its quantiser's divisor: finite, and never so loose that a wrong
    answer passes (the product of the two slacks is capped as the matrix's is)."""
    if kernel.slack is not None:
        slack = kernel.slack
        if type(slack) not in (int, float) or not math.isfinite(slack) or slack < 1:
            raise MatrixError(where, f"{key}.slack", f"must be a finite number of at least 1, not {slack!r}")
        if slack * matrix_slack > MAX_SLACK:
            raise MatrixError(
                where,
                f"{key}.slack",
                f"{slack!r} times the matrix's slack {matrix_slack!r} is above "
                f"{MAX_SLACK}: a larger slack lets wrong results pass",
            )
        if not (isinstance(kernel.slack_reason, str) and len(kernel.slack_reason.strip()) >= 3):
            raise MatrixError(where, f"{key}.slack_reason", "a kernel's own slack needs its reason")
    if kernel.activation_divisor is not None:
        divisor = kernel.activation_divisor
        if kernel.activation != "dynamic":
            raise MatrixError(where, f"{key}.activation_divisor", "is for a kernel with `activation: dynamic`")
        dtypes = kernel.dtypes or (("int8",) if kernel.family == "int8" else None)
        if dtypes is None:
            raise MatrixError(where, f"{key}.dtypes", "a kernel with an activation_divisor declares its dtypes")
        for dtype in dtypes:
            top = _DTYPE_MAX.get(dtype)
            low, high = (top * DIVISOR_RANGE[0], top * DIVISOR_RANGE[1]) if top else (0, 0)
            if type(divisor) not in (int, float) or not math.isfinite(divisor) or not low <= divisor <= high:
                raise MatrixError(
                    where,
                    f"{key}.activation_divisor",
                    f"{divisor!r} is not near {dtype}'s largest value {top}: between {low:g} and {high:g}",
                )


def _check_known_failures(path: Path, entries) -> None:
    for i, entry in enumerate(entries):
        if "torch" in entry:
            try:
                SpecifierSet(entry["torch"])
            except InvalidSpecifier:
                raise MatrixError(
                    path, f"known_failures[{i}].torch", f"not a version specifier: {entry['torch']!r}"
                ) from None


# A matrix without `profiles:` runs one, `default`, of this many cases per kernel (the coverage
# guarantee adds what they miss).
DEFAULT_CASES_PER_KERNEL = 40


def with_default_profile(data: Any) -> Any:
    """A matrix's data with the `default` profile a matrix that names none gets."""
    if not isinstance(data, dict) or "profiles" in data:
        return data
    kernels = data.get("kernels")
    count = len(kernels) if isinstance(kernels, list) and kernels else 1
    return {**data, "profiles": {"default": {"cases": DEFAULT_CASES_PER_KERNEL * count}}}


def parse_spec(path: Path, text: str, included_cases=(), declared_kernels: Sequence[KernelSpec] = ()) -> Spec:
    """`declared_kernels` come from the pytest_scaledmm_kernels hook: the matrix may name them
    (and narrow them); those it does not name are appended after its own kernels."""
    data = with_default_profile(bounded_yaml.load(path, text))  # size, depth and alias expansion bounded
    _validate(path, data)

    declared = {k.name: k for k in declared_kernels}
    kernels = tuple(_kernel_spec(path, i, k, declared) for i, k in enumerate(data["kernels"]))
    kernels += tuple(k for k in declared_kernels if k.name not in {m.name for m in kernels})
    names = [k.name for k in kernels]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise MatrixError(path, f"kernels[{i}].name", f"duplicate kernel {name!r}")
    _check_dims(path, "axes", data.get("axes") or {})
    profiles = _profiles(path, data["profiles"], names)
    limits = _limits(data)
    _check_sizes(path, data, limits)
    _check_tolerance(path, data)
    for i, kernel in enumerate(kernels):
        where, key = (path, f"kernels[{i}]") if i < len(data["kernels"]) else ("pytest_scaledmm_kernels", kernel.name)
        _check_contract(where, key, kernel, float((data.get("tolerance") or {}).get("slack", 1.0)))
    _check_known_failures(path, data.get("known_failures", []))
    for i, rule in enumerate(data.get("exclude", [])):
        for axis, value in rule.items():
            allowed = CATEGORICAL_AXES.get(axis) or KERNEL_AXES.get(axis, (None,))[0]
            values = value if isinstance(value, list) else [value]
            if allowed is not None and any(v not in allowed for v in values):
                raise MatrixError(path, f"exclude[{i}].{axis}", f"{value!r} is not one of {allowed}")

    identity: dict[str, Any] = {"matrix": data, "included": list(included_cases)}
    if declared_kernels:
        identity["declared_kernels"] = [_declaration_digest(k) for k in declared_kernels]
    canonical = json.dumps(identity, sort_keys=True, default=str)
    return Spec(
        path=path,
        digest=hashlib.sha256(canonical.encode()).hexdigest()[:16],
        seed=data.get("seed", DEFAULT_SEED),
        kernels=kernels,
        axes=dict(data.get("axes") or {}),
        archs=tuple(data.get("archs", ())),
        exclude=tuple(data.get("exclude", ())),
        profiles=profiles,
        known_failures=tuple(data.get("known_failures", ())),
        slack=float(data.get("tolerance", {}).get("slack", 1.0)),
        included_cases=tuple(included_cases),
        limits=limits,
    )


def read_matrix_text(path: Path, what: str = "file") -> str:
    """A matrix or included file's text; a missing, unreadable or oversized (over 1 MiB) one is
    a MatrixError."""
    return bounded_yaml.read_text(path, what)


def read_matrix(path: Path | str) -> dict:
    """A matrix file's data, read within bounds and checked against the schema, its kernels not
    resolved: for a reader without the run's hook kernels (scaledmm init)."""
    path = Path(path)
    data = with_default_profile(bounded_yaml.load(path, read_matrix_text(path)))
    _validate(path, data)
    return data


def load_spec(path: Path | str, declared_kernels: Sequence[KernelSpec] = ()) -> Spec:
    path = Path(path)
    text = read_matrix_text(path)
    included = included_cases(path, text)  # the `include:` files, relative to the matrix file
    spec = parse_spec(path, text, included_cases=[c.params for c in included], declared_kernels=declared_kernels)
    check_kernels(included, [k.name for k in spec.kernels])
    check_kernel_axes(included, {k.name: k.impl is None and k.fn is None for k in spec.kernels})
    check_sizes(included, spec.limits)
    return spec


def is_user_kernel(name) -> bool:
    """Whether a kernel name is one the user declared (impl: or the pytest_scaledmm_kernels hook):
    user code may not take a built-in's name (kernels.resolve_kernels), so the name tells."""
    return isinstance(name, str) and bool(name) and name not in BUILTIN_KERNELS
