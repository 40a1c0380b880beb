"""Cases: frozen parameters, stable ids, generation from a Spec and a target arch.

Generation is a pure function of the matrix file, the profile, the seed and the target arch (cpu,
sm90 ...): no torch version, time, set ordering or hash() enters it, so every process and xdist
worker collects the same cases, and every torch version on one machine the same ids. Each
kernel's support model (support.py) says which configurations are valid: a covering array
(allpairspy) over the categorical axes and the shape classes (shapes.py) of valid rows makes every
pair of values meet at least once (every valid scale pairing with every compile mode, every scale
form with every shape class ...); hypothesis draws the sizes inside each class. A boundary slice
holds each refusal reason of the model under each compile-mode family, a special slice each
special scale value x scale form x family; further valid cases drawn over all axes fill the
profile's budget. `params["purpose"]` says which: valid, boundary (with `expected_refusal`, the
refusal key the model expects) or special.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import warnings
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from allpairspy import AllPairs

from ..verdict.case_axes import CaseParams, axis_value
from ..verdict.layouts import TOKEN_STRIDE0
from ..verdict.scale_forms import FORMS, own_pairings
from . import epilogue
from .case_params import Case, case_id, make_case, matches
from .compile_modes import compile_mode
from .guarantee import changed_case, interaction_case, missing_interactions, missing_specials, missing_values
from .kernels import kernel_accepts_fast_accum
from .schema import (
    ALL_KERNELS,
    CATEGORICAL_AXES,
    GROUPED_KERNELS,
    KERNEL_AXES,
    PRODUCTION_AXES,
    SERVER_M,
    defaults_digest,
    takes_axis,
)
from .shape_extremes import BY_LABEL, kernel_extremes, small_sizes, wanted
from .shapes import DIMS, class_of, dim_pools, empty_dims
from .spec import KernelSpec, Profile, Spec
from .support import SIZE_KEYS, SupportModel, families_of, neutral_order, support_model

FORM_BY_ID = {form.id: form for form in FORMS}


def _row_breaks(model: SupportModel, case: CaseParams | Mapping[str, Any]) -> list:
    """A case's refusal keys, or a covering row's (rows over axes and shape classes stay
    mappings until `KernelSpace.sizes` makes them cases)."""
    return model.breaks(case if isinstance(case, CaseParams) else CaseParams.from_json(case))


def given_axes(spec: Spec, profile: Profile) -> set:
    """The axes the matrix or the profile lists; the others take schema.PRODUCTION_DEFAULTS."""
    return set(spec.axes) | set(profile.axes)


def declared_values(kernel: KernelSpec) -> dict[str, list]:
    """Axis values a user kernel's declaration names: its scale forms (or the forms of its scale
    pairs), dtypes (or dtype pairs) and output dtypes."""
    if kernel.impl is None and kernel.fn is None:
        return {}  # a built-in: its declaration bounds what it takes, the matrix says what to test
    found: dict[str, list] = {}
    for index, side in enumerate(("a", "b")):
        forms = kernel.scale_forms or list(dict.fromkeys(pair[index] for pair in kernel.scale_pairs or ()))
        if forms:
            found[f"scale_{side}"] = list(forms)
        if kernel.family != "int8":
            dtypes = kernel.dtypes or list(dict.fromkeys(pair[index] for pair in kernel.dtype_pairs or ()))
            if dtypes:
                found[f"dtype_{side}"] = list(dtypes)
    if kernel.out_dtypes:
        found["out_dtype"] = list(kernel.out_dtypes)
    return found


def kernel_axes(kernel: KernelSpec, axes: Mapping[str, Any], given: set | None = None) -> dict[str, list]:
    """Categorical values a kernel can be given; static kernel facts only (its declaration and
    its signature), never hardware. An axis the matrix leaves out (not in `given`) takes the
    values a user kernel declares for it, so that every declared scale form is exercised."""
    values = {name: list(axes[name]) for name in CATEGORICAL_AXES}
    if given is not None:
        for axis, declared in declared_values(kernel).items():
            if axis not in given:
                values[axis] = declared
    if kernel.family == "int8":
        values["dtype_a"] = values["dtype_b"] = ["int8"]
        values["use_fast_accum"] = [False]
    elif not kernel_accepts_fast_accum(kernel):
        # No use_fast_accum parameter: the harness never passes it, so no case asks for it.
        values["use_fast_accum"] = [False]
    if kernel.family != "int8" and kernel.dtypes:
        for side in ("dtype_a", "dtype_b"):
            values[side] = [d for d in values[side] if d in kernel.dtypes] or list(kernel.dtypes[:1])
    if kernel.scale_forms:
        for side in ("scale_a", "scale_b"):
            values[side] = [s for s in values[side] if s in kernel.scale_forms] or list(kernel.scale_forms[:1])
    builtin = kernel.impl is None and kernel.fn is None
    for name, (_, neutral, takers) in KERNEL_AXES.items():
        asked = list(axes.get(name, [neutral]))
        if builtin and takers != ALL_KERNELS and given is not None and name not in given:
            asked = [neutral]  # a built-in's own axes (bias dtype ...): where the matrix lists them
        # Only where the profile asks for more than the neutral value: other ids stay as they were.
        if takes_axis(kernel.name, takers, builtin) and (kernel.name in GROUPED_KERNELS or asked != [neutral]):
            values[name] = asked
    values.pop("special_side", None)  # which scale a special value goes into: the special slice's
    if builtin and kernel.name in GROUPED_KERNELS:
        # Its operands are built by verdict/grouped.py: no bias, scale layouts, 3-D activations
        # or special scales; no fast accumulation asked for.
        values.update(
            bias=[False],
            use_fast_accum=[False],
            scale_layout=["contiguous"],
            activation_rank=[2],
            special_scale=["none"],
        )
    return values


_STABLE_BACKEND = "scaledmm-stable"


def _stable_backend() -> dict:
    """settings(backend=...) for draws that depend on the seed alone. Hypothesis mixes in integer
    constants found in the user's loaded modules (a conftest, an editable install), which would
    make case ids differ between processes; this provider never draws constants. Empty where
    this hypothesis has no provider API (nor such constants)."""
    try:
        from hypothesis.internal.conjecture import providers  # noqa: PLC0415  hypothesis: start-up time
    except ImportError:
        return {}
    if not hasattr(providers, "AVAILABLE_PROVIDERS") or not hasattr(
        providers.HypothesisProvider, "_maybe_draw_constant"
    ):
        return {}
    providers.AVAILABLE_PROVIDERS.setdefault(_STABLE_BACKEND, f"{__name__}._SeedOnlyProvider")
    return {"backend": _STABLE_BACKEND}


def _seed_only_provider():
    from hypothesis.internal.conjecture.providers import HypothesisProvider  # noqa: PLC0415  hypothesis: start-up time

    class SeedOnlyProvider(HypothesisProvider):
        def _maybe_draw_constant(self, *args, **kwargs):
            return None

    return SeedOnlyProvider


def __getattr__(name):
    # Hypothesis loads providers by dotted name; build the class only when it asks.
    if name == "_SeedOnlyProvider":
        return _seed_only_provider()
    raise AttributeError(name)


def draw_examples(strategy, count: int, seed: int) -> list:
    """`count` examples of a hypothesis strategy, identical for the same seed in any process."""
    from hypothesis import HealthCheck, Phase, given, settings  # noqa: PLC0415  hypothesis: start-up time
    from hypothesis import seed as hypothesis_seed  # noqa: PLC0415  hypothesis: start-up time

    found: list = []
    if count <= 0:
        return found

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        **_stable_backend(),
    )
    @given(strategy)
    def collect(value):
        found.append(value)

    with warnings.catch_warnings():
        # Cases are generated while pytest configures (--scaledmm-case checks its ids then);
        # hypothesis warns about any strategy evaluated then, meant for a plugin's import time.
        side_effect = getattr(importlib.import_module("hypothesis.errors"), "HypothesisSideeffectWarning", None)
        if side_effect is not None:
            warnings.filterwarnings("ignore", category=side_effect)
        collect()
    return found


def _stream_seed(spec: Spec, *parts: str) -> int:
    return zlib.crc32("::".join([str(spec.seed), *parts]).encode())


def _draw_integers(seed: int, count: int, width: int) -> list[tuple]:
    """`count` tuples of `width` integers drawn by hypothesis (its first example is all zeros,
    the smallest values of every axis), several tuples per example to keep it fast."""
    from hypothesis import strategies as st  # noqa: PLC0415  hypothesis: start-up time

    per = 4
    examples = draw_examples(st.tuples(*[st.integers(0, 2**20)] * (width * per)), -(-count // per), seed)
    found = [tuple(ex[i * width : (i + 1) * width]) for ex in examples for i in range(per)]
    return found[:count]


# The axes of the class-level table that decides whether a row can be valid (with the shape
# classes), then those only size-independent rules read; the covering array takes them in this
# order, so that a row is refused as early as its values say.
TABLE_AXES = ("scale_a", "scale_b", "scale_layout", "use_fast_accum")
CLASS_AXES = ("m_class", "k_class", "n_class")
FREE_AXES = ("dtype_a", "dtype_b", "out_dtype", "bias", "activation_rank")
# Refusal keys whose rules read the scales' forms or layout, fast accumulation, or the sizes.
TABLE_KEYS = SIZE_KEYS | {"scale_forms", "scale_pairs"}
MAX_REPS = 12  # sizes per class tried when asking whether a class can be valid
MAX_SIZE_TRIES = 64  # sizes tried from a row's draw before the ones that showed it can be valid


class KernelSpace:
    """One kernel's cases on one target arch: its axis values, shape classes and support model;
    which rows can be valid, and sizes that make a row valid."""

    def __init__(self, spec: Spec, kernel: KernelSpec, values: dict, size_pools: dict, model: SupportModel, excluded):
        self.spec, self.kernel, self.values, self.pools, self.model = spec, kernel, values, size_pools, model
        self._excluded = excluded
        self.reps = {
            dim: {name: self._representatives(dim, sizes) for name, sizes in classes.items()}
            for dim, classes in size_pools.items()
        }
        self._table: dict = {}
        self._known: dict = {}
        self._free: dict = {}
        self._host: dict = {}
        # The size-independent axes, with those only this kernel takes (schema.KERNEL_AXES).
        self.free_axes = FREE_AXES + tuple(axis for axis in values if axis in KERNEL_AXES)
        self.classes = {f"{dim}_class": list(size_pools[dim]) for dim in DIMS}

    def _representatives(self, dim: str, sizes: list) -> list:
        seen, found = set(), []
        for size in sizes:
            feature = self.model.size_features(dim, size)
            if feature not in seen:
                seen.add(feature)
                found.append(size)
        return found[:MAX_REPS]

    def _neutral(self) -> dict:
        return {axis: neutral_order(axis, self.values[axis])[0] for axis in self.values}

    def table_sizes(self, key: tuple) -> tuple | None:
        """Sizes (m, k, n) in the classes of `key` (TABLE_AXES + CLASS_AXES values) under which
        no rule of TABLE_KEYS breaks, or None."""
        if key not in self._table:
            row = {**self._neutral(), **dict(zip(TABLE_AXES, key[:4])), "kernel": self.kernel.name}
            found = None
            for m, k, n in itertools.product(*(self.reps[dim][name] for dim, name in zip(DIMS, key[4:]))):
                if not any(b in TABLE_KEYS for b in _row_breaks(self.model, {**row, "m": m, "k": k, "n": n})):
                    found = (m, k, n)
                    break
            self._table[key] = found
        return self._table[key]

    def _axis_values(self, axis: str) -> list:
        return self.classes[axis] if axis in self.classes else self.values[axis]

    def table_possible(self, row: Mapping) -> bool:
        """Whether some completion of the row's table axes and classes can be valid."""
        order = TABLE_AXES + CLASS_AXES
        known = tuple(row.get(axis) for axis in order)
        if known not in self._known:
            choices = [[value] if value is not None else self._axis_values(axis) for axis, value in zip(order, known)]
            self._known[known] = any(self.table_sizes(combo) is not None for combo in itertools.product(*choices))
        return self._known[known]

    def free_possible(self, row: Mapping) -> bool:
        """Whether some completion of the row's size-independent axes breaks no other rule."""
        known = tuple(row.get(axis) for axis in self.free_axes)
        if known not in self._free:
            base = {**self._neutral(), "kernel": self.kernel.name, "m": 1, "k": 1, "n": 1}
            choices = [
                [value] if value is not None else neutral_order(axis, self.values[axis])
                for axis, value in zip(self.free_axes, known)
            ]
            self._free[known] = any(
                not any(
                    b not in TABLE_KEYS for b in _row_breaks(self.model, {**base, **dict(zip(self.free_axes, combo))})
                )
                for combo in itertools.product(*choices)
            )
        return self._free[known]

    def host_scale_possible(self, row: Mapping) -> bool:
        """Whether the model takes a host scale_a of the row's form (a rule that reads a table
        axis and a free one, so neither check alone sees it)."""
        if row.get("operand_layout") != "scale_on_host" or "scale_a" not in row:
            return True
        key = row["scale_a"]
        if key not in self._host:
            probe = {
                **self._neutral(),
                "kernel": self.kernel.name,
                "scale_a": key,
                "operand_layout": "scale_on_host",
                "m": 16,
                "k": 128,
                "n": 128,
            }
            self._host[key] = "scale_device" not in _row_breaks(self.model, probe)
        return self._host[key]

    def allowed(self, row: Mapping) -> bool:
        return (
            production_data_fits(row)
            and self.host_scale_possible(row)
            and self.table_possible(row)
            and self.free_possible(row)
            and not self._excluded({**row, "kernel": self.kernel.name})
        )

    def sizes(self, row: Mapping, draw: tuple) -> CaseParams | None:
        """The row's case: sizes in its classes from the drawn integers (scanning on from them to
        sizes the model accepts), or None when its classes hold none."""
        pools = [self.pools[dim][row[f"{dim}_class"]] for dim in DIMS]
        params = {"kernel": self.kernel.name, **{k: v for k, v in row.items() if k not in CLASS_AXES}}
        starts = [u % len(pool) for u, pool in zip(draw, pools)]
        offsets = itertools.product(*(range(len(pool)) for pool in pools))
        for offset in itertools.islice(offsets, MAX_SIZE_TRIES):
            sizes = [pool[(start + d) % len(pool)] for pool, start, d in zip(pools, starts, offset)]
            candidate = CaseParams.from_json({**params, **dict(zip(DIMS, sizes))})
            if not _row_breaks(self.model, candidate) and not self._excluded(candidate):
                return candidate
        # Past that, the sizes that showed the classes can be valid.
        known = self.table_sizes(tuple(row.get(a) for a in TABLE_AXES + CLASS_AXES))
        if known is not None:
            candidate = CaseParams.from_json({**params, **dict(zip(DIMS, known))})
            if not _row_breaks(self.model, candidate) and not self._excluded(candidate):
                return candidate
        return None

    # -- what valid cases can cover -----------------------------------------------------------
    def possible_pairs(self) -> list:
        """Scale pairs some valid case has."""
        return [
            (a, b)
            for a in self.values["scale_a"]
            for b in self.values["scale_b"]
            if self.allowed({"scale_a": a, "scale_b": b})
        ]

    def possible_form_classes(self) -> list:
        """(side, form, shape class) that some valid case has."""
        found = []
        for side in ("a", "b"):
            for form in self.values[f"scale_{side}"]:
                for dim in DIMS:
                    for name in self.pools[dim]:
                        if self.allowed({f"scale_{side}": form, f"{dim}_class": name}):
                            found.append((side, form, name))
        return found


def production_data_fits(row: Mapping) -> bool:
    """Whether a (partial) row's value regime and operand layout apply to its scales and dtypes:
    regimes and layouts are for fp32 scales and unpacked operands; a scale on the host is a
    one-element scale_a."""
    regime = axis_value(row, "value_regime")
    layout = axis_value(row, "operand_layout")
    if axis_value(row, "scale_dtype") != "fp32" and regime not in ("standard", "cancelling"):
        return False  # half-precision scales round the values the other regimes place at a range's edge
    if layout == TOKEN_STRIDE0 and row.get("m_class", "m1") != "m1":
        return False  # a size-1 token dimension: M = 1 only
    if regime == "standard" and layout == "dense":
        return True
    forms = [FORM_BY_ID[row[side]] for side in ("scale_a", "scale_b") if side in row]
    if any(form.scale_dtype != "fp32" for form in forms):
        return False
    if any(row.get(side, "").startswith("fp4") for side in ("dtype_a", "dtype_b")):
        return False
    if layout == "scale_on_host" and "scale_a" in row and not FORM_BY_ID[row["scale_a"]].per_tensor:
        return False
    return True


def _covering_rows(space: KernelSpace, values: dict, strength: int) -> list[dict]:
    """Covering array over the categorical axes and the shape classes of the rows that can be
    valid. The two scale forms are joined into one axis first, so that every valid scale pairing
    meets every compile mode, dtype, layout and shape class (the rank-mismatch bugs live in such
    triples)."""
    values = dict(values)
    values.pop("scale_a"), values.pop("scale_b")
    pairs = space.possible_pairs()
    if not pairs:
        return []
    ordered = {"scale_pair": pairs, **{axis: space.classes[axis] for axis in CLASS_AXES}}
    for axis in TABLE_AXES[2:] + FREE_AXES:
        ordered[axis] = values.pop(axis)
    ordered.update(values)
    varying = [name for name in ordered if len(ordered[name]) > 1]
    fixed = {name: ordered[name][0] for name in ordered if len(ordered[name]) == 1}
    if any(not v for v in ordered.values()):
        return []

    def allowed(partial):
        return space.allowed(_split_pair({**fixed, **dict(zip(varying, partial))}))

    if len(varying) <= strength:
        combos = [dict(zip(varying, combo)) for combo in itertools.product(*(ordered[n] for n in varying))]
        rows = [_split_pair({**fixed, **c}) for c in combos]
    elif len(varying) < 2:
        rows = [_split_pair(dict(fixed))]
    else:
        rows = [
            _split_pair({**fixed, **dict(zip(varying, row))})
            for row in AllPairs([ordered[n] for n in varying], filter_func=allowed, n=strength)
        ]
    return [row for row in rows if space.allowed(row)]


def _split_pair(row: dict) -> dict:
    row = dict(row)
    if "scale_pair" in row:
        row["scale_a"], row["scale_b"] = row.pop("scale_pair")
    return row


def _top_up(space: KernelSpace, rows: list[dict], values: dict) -> list[dict]:
    """Rows for what the covering array left out and valid cases can have: every scale pair under
    every compile mode, every scale form in every shape class (a covering array with a filter can
    stop before it has them all)."""
    added = []
    seen_pair_mode = {(r["scale_a"], r["scale_b"], r["mode"]) for r in rows}
    seen_form_class = {
        (side, r[f"scale_{side}"], r[f"{dim}_class"])
        for r in rows
        for side in "ab"
        for dim in DIMS
        if r.get("scale_layout") != "expanded"
    }
    wanted = [
        {"scale_a": a, "scale_b": b, "mode": mode}
        for a, b in space.possible_pairs()
        for mode in values["mode"]
        if (a, b, mode) not in seen_pair_mode
    ]
    wanted += [
        {f"scale_{side}": form, f"{cls[0]}_class": cls}
        for side, form, cls in space.possible_form_classes()
        if (side, form, cls) not in seen_form_class
    ]
    for index, want in enumerate(wanted):
        row = _complete(space, want, values, index)
        if row is not None:
            added.append(row)
    return added


def _targets(row: Mapping, epilogue_axes: Sequence[str]) -> set:
    """What a row covers of what the summary reports: scale pair x mode, scale form x class, the
    epilogue's combinations (epilogue.py)."""
    found: set[tuple | str] = {("pair", row["scale_a"], row["scale_b"], row["mode"])}
    found |= epilogue.targets(row, epilogue_axes)
    # An expanded scale is one value broadcast: its form's blocks are not exercised.
    if row.get("scale_layout") != "expanded":
        found |= {("form", side, row[f"scale_{side}"], row[f"{dim}_class"]) for side in "ab" for dim in DIMS}
    # Production data: each value regime with each operand dtype and output dtype (a regime
    # bites on the range of one), each operand layout.
    if "value_regime" in row:
        found |= {
            ("regime", row["value_regime"], row["dtype_a"]),
            ("regime-out", row["value_regime"], row["out_dtype"]),
        }
    if "operand_layout" in row:
        found.add(("layout", row["operand_layout"]))
    return found


def _prioritised(rows: list[dict], epilogue_axes: Sequence[str]) -> list[dict]:
    """The rows with those that make every scale pair meet every mode, every scale form every
    shape class and every epilogue combination first (greedily), so that a budget cut keeps
    them."""
    covers = [_targets(row, epilogue_axes) for row in rows]
    wanted = set().union(*covers) if rows else set()
    first, rest = [], list(rows)
    taken: dict = {}  # rows taken per scale pair: ties go to the pair with fewest, so a cut spreads
    while wanted and rest:
        best = max(
            range(len(rest)),
            key=lambda i: (len(wanted & covers[i]), -taken.get((rest[i]["scale_a"], rest[i]["scale_b"]), 0), -i),
        )
        if not wanted & covers[best]:
            break
        wanted -= covers[best]
        row = rest.pop(best)
        taken[(row["scale_a"], row["scale_b"])] = taken.get((row["scale_a"], row["scale_b"]), 0) + 1
        first.append(row)
        covers.pop(best)
    return first + rest


def _complete(space: KernelSpace, want: dict, values: dict, index: int) -> dict | None:
    """A row that can be valid with the wanted values, the others chosen in turn by `index`."""
    row = dict(want)
    order = (
        list(TABLE_AXES) + list(CLASS_AXES) + list(FREE_AXES) + [a for a in values if a not in TABLE_AXES + FREE_AXES]
    )
    for axis in order:
        if axis in row:
            continue
        options = space.classes[axis] if axis in CLASS_AXES else neutral_order(axis, values[axis])
        if axis == "mode":
            options = options[index % len(options) :] + options[: index % len(options)]
        for value in options:
            if space.allowed({**row, axis: value}):
                row[axis] = value
                break
        else:
            return None
    return row


def generate_cases(spec: Spec, profile: Profile, arch: str = "cpu") -> tuple[list[Case], dict]:
    """All cases of a profile for a target arch (`cpu`, `sm90` ...), in a stable order (kernel by
    kernel: valid, special, boundary; then included cases), and notes on how they were made
    (GenerationNotes.to_json).

    A composite profile (Profile.parts) is its parts' cases in the order listed, each part made
    with its own axes, kernels and budget, an id an earlier part has dropped; then included cases.
    """
    if profile.parts:
        cases, notes = _composite_cases(spec, profile, arch)
    else:
        cases, notes = _profile_cases(spec, profile, arch, with_included=True)
    return cases, notes.to_json()


# Notes that count cases; a composite's are its parts' summed.
COUNTERS = ("covering_rows", "drawn", "empty", "server", "extreme", "guaranteed", "boundary", "special", "truncated")


@dataclass
class GenerationNotes:
    """How a profile's cases were made, as the report and the summary show it: cases per slice,
    the compile modes this arch leaves out, warnings, what valid cases can cover (`possible`),
    the refusal reasons the boundary slice holds and the compile-mode families."""

    arch: str
    covering_rows: int = 0
    drawn: int = 0
    empty: int = 0
    server: int = 0  # the server slice's cases: token counts the axis of M leaves out, M = N (= K)
    extreme: int = 0  # shapes at their extremes the axes leave out (shape_extremes.py)
    guaranteed: int = 0  # cases past the budget that give each value of the space its case (guarantee.py)
    boundary: int = 0
    special: int = 0
    truncated: int = 0
    included: int = 0
    duplicates: int | None = None  # a composite's: cases an earlier part already had
    left_out_modes: list[str] = field(default_factory=list)
    m_added: dict[str, list[int]] = field(default_factory=dict)  # kernel -> M of the server slice
    shapes_added: dict[str, list[str]] = field(default_factory=dict)  # kernel -> extreme classes added
    not_proven: dict[str, list[str]] = field(default_factory=dict)  # kernel -> what a user's cap kept out
    warnings: list[str] = field(default_factory=list)
    possible: dict[str, dict[str, Any]] = field(default_factory=dict)
    boundary_reasons: dict[str, list[str]] = field(default_factory=dict)
    families: list[str] = field(default_factory=list)
    parts: dict[str, int] | None = None  # a composite's: cases per part, before duplicates

    def merge(self, part: GenerationNotes) -> None:
        """Add a part's notes: counts summed; modes, possible items and families once each, in
        the order first seen; refusal reasons joined and sorted; warnings kept (each names its
        part: budgets and narrowing are per part)."""
        for key in COUNTERS:
            setattr(self, key, getattr(self, key) + getattr(part, key))
        self.left_out_modes += [mode for mode in part.left_out_modes if mode not in self.left_out_modes]
        for kernel, sizes in part.m_added.items():
            known_m = self.m_added.setdefault(kernel, [])
            known_m += [size for size in sizes if size not in known_m]
        for own, theirs in ((self.shapes_added, part.shapes_added), (self.not_proven, part.not_proven)):
            for kernel, labels in theirs.items():
                known_labels = own.setdefault(kernel, [])
                known_labels += [label for label in labels if label not in known_labels]
        self.warnings += part.warnings
        for kernel, sets in part.possible.items():
            merged = self.possible.setdefault(kernel, {})
            for key, items in sets.items():
                if isinstance(items, dict):  # axis_values: per axis, the values of every part
                    axes_known = merged.setdefault(key, {})
                    for axis, values in items.items():
                        seen = axes_known.setdefault(axis, [])
                        seen += [value for value in values if value not in seen]
                    continue
                known = merged.setdefault(key, [])
                known += [item for item in items if item not in known]
        for kernel, keys in part.boundary_reasons.items():
            self.boundary_reasons[kernel] = sorted({*self.boundary_reasons.get(kernel, ()), *keys})
        self.families += [family for family in part.families if family not in self.families]

    def to_json(self) -> dict[str, Any]:
        """The notes as the run records them; a composite's keys only for a composite, the modes
        left out only where some are."""
        found: dict[str, Any] = {"arch": self.arch, **{key: getattr(self, key) for key in COUNTERS}}
        found["defaults"] = defaults_digest()
        found["included"] = self.included
        if self.duplicates is not None:
            found["duplicates"] = self.duplicates
        if self.left_out_modes:
            found["left_out_modes"] = self.left_out_modes
        if self.m_added:
            found["m_added"] = self.m_added
        if self.shapes_added:
            found["shapes_added"] = self.shapes_added
        if self.not_proven:
            found["not_proven"] = self.not_proven
        found.update(
            warnings=self.warnings,
            possible=self.possible,
            boundary_reasons=self.boundary_reasons,
            families=self.families,
        )
        if self.parts is not None:
            found["parts"] = self.parts
        return found


def _composite_cases(spec: Spec, profile: Profile, arch: str) -> tuple[list[Case], GenerationNotes]:
    cases: list[Case] = []
    seen: set[str] = set()
    notes = GenerationNotes(arch)
    parts: dict[str, int] = {}
    duplicates = 0
    for part in profile.parts:
        part_cases, part_notes = _profile_cases(spec, part, arch, with_included=False)
        parts[part.name] = len(part_cases)
        for case in part_cases:
            if case.id in seen:
                duplicates += 1
                continue
            seen.add(case.id)
            cases.append(case)
        notes.merge(part_notes)
    notes.included = _add_included(spec, cases, seen, arch)
    notes.duplicates, notes.parts = duplicates, parts
    return cases, notes


def is_excluded(spec: Spec, params: CaseParams | Mapping[str, Any], arch: str) -> bool:
    """Whether one of the matrix's exclude rules matches the case made for `arch`: a rule naming
    `arch` holds only for cases made for one of its archs."""
    for rule in spec.exclude:
        if "arch" in rule:
            archs = rule["arch"] if isinstance(rule["arch"], list) else [rule["arch"]]
            if arch not in archs:
                continue
            rule = {key: value for key, value in rule.items() if key != "arch"}
        if matches(rule, params):
            return True
    return False


def _add_included(spec: Spec, cases: list[Case], seen: set, arch: str) -> int:
    """The matrix's included (corpus) cases not excluded and not already there, appended."""
    added = 0
    kernels = {kernel.name: kernel for kernel in spec.kernels}
    for entry in spec.included_cases:
        params = CaseParams.from_json(entry)
        kernel = kernels.get(params.kernel)
        if kernel is not None:
            params = params.with_values(**kernel_case_params(kernel))
        if is_excluded(spec, params, arch):
            continue
        cid = case_id(params)
        if cid not in seen:
            seen.add(cid)
            cases.append(make_case(params))
            added += 1
    return added


def kernel_case_params(kernel) -> dict:
    """What a kernel's declaration adds to each of its cases' params (and so to their ids): its
    accumulation, and a dynamic activation with its quantiser's divisor."""
    found = {}
    if kernel.accumulation:
        found["accumulation"] = kernel.accumulation
    if kernel.activation == "dynamic":
        found["activation"] = "dynamic"
        if kernel.activation_divisor:
            found["activation_divisor"] = float(kernel.activation_divisor)
    return found


class KernelRows(NamedTuple):
    """One kernel's material for a profile: its space, the axis values it is given, the special
    scale values its special slice takes, and its valid cases in covering order."""

    kernel: KernelSpec
    space: KernelSpace
    values: dict
    specials: list
    valid: list[CaseParams]
    epilogue: frozenset  # the epilogue combinations its valid cases, uncut, cover (epilogue.py)


def _kernel_rows(
    spec: Spec, profile: Profile, kernel: KernelSpec, axes: Mapping[str, Any], modes: list, arch: str
) -> KernelRows:
    values = {**kernel_axes(kernel, axes, given_axes(spec, profile)), "mode": modes}
    if arch == "cpu" and "operand_layout" in values:
        # One device: a scale on the host is the dense layout there.
        values["operand_layout"] = [v for v in values["operand_layout"] if v != "scale_on_host"] or ["dense"]
    specials = [v for v in values["special_scale"] if v != "none"]
    if "none" in values["special_scale"]:
        values["special_scale"] = ["none"]  # special values are a slice of their own
    else:
        specials = []
    excluded = functools.partial(is_excluded, spec, arch=arch)
    space = KernelSpace(spec, kernel, values, dim_pools(axes), support_model(kernel, arch), excluded)
    epilogue_axes = epilogue.varying_axes(values)
    rows = _covering_rows(space, values, profile.strength)
    rows += _top_up(space, rows, values)
    rows += epilogue.added_rows(values, rows, space.allowed, lambda want, index: _complete(space, want, values, index))
    rows = _prioritised(rows, epilogue_axes)
    draws = _draw_integers(_stream_seed(spec, kernel.name, "shapes"), len(rows), 3)
    sized = [space.sizes(row, draw) for row, draw in zip(rows, draws)]
    valid = [_purposed(p) for p in sized if p is not None]
    covered = frozenset().union(*(epilogue.targets(p, epilogue_axes) for p in valid)) if valid else frozenset()
    return KernelRows(kernel, space, values, specials, valid, covered)


@dataclass
class _Slices:
    """The candidate cases of each slice beside the valid one, and each slice's share of the
    budget (its first cases); the rest of `specials`, `boundary_core` and `boundary_extra` fill
    what the valid cases leave."""

    empties: list[CaseParams]
    server: list[CaseParams]
    listed_m: set
    boundary_core: list[CaseParams]
    boundary_extra: list[CaseParams]
    boundary: list[CaseParams]
    specials: list[CaseParams]
    special: list[CaseParams]


def _slices(rows: list[KernelRows], axes: Mapping[str, Any], families: dict, budget: int) -> _Slices:
    # Empty dims the kernels take: one case per kernel and dim at least, out of the valid share
    # (an empty dim a model refuses names a reason the boundary slice already has).
    empties = [p for p in _empty_slice(rows, empty_dims(axes), families) if p.purpose == "valid"]
    empties = empties[: min(len(empties), max(len(rows) * 3, budget * 3 // 100), budget // 8)]
    core, extra = _boundary(rows, families)
    # Each refusal reason under each family fits up to BOUNDARY_MAX_PERCENT.
    boundary_cap = max(budget * BOUNDARY_SHARE_PERCENT // 100, min(len(core), budget * BOUNDARY_MAX_PERCENT // 100))
    boundary = core[:boundary_cap]
    specials = _special(rows, families, list(axes.get("special_side", ["a"])))
    special_floor = min(len(specials), budget * SPECIAL_SHARE_PERCENT // 100)
    covering = sum(len(r.valid) for r in rows)
    # A profile that pins the production axes to their neutral value is a synthetic slice (a
    # benchmark's, a smoke run's): no server sizes either. Else what the covering rows and the
    # other slices' floors leave, a few per kernel at least, a sixth of the budget at most; a
    # sixth too where the covering rows overflow the budget (the token counts a server meets
    # come before the covering rows' tail).
    server = [] if synthetic_slice(axes) else _server_slice(rows, axes, families)
    spare = budget - len(boundary) - special_floor - covering - len(empties)
    floor = len(rows) * 4 if spare >= 0 else budget // 6
    server = server[: min(len(server), max(floor, spare), budget // 6)]
    # The valid share holds the covering rows and the empty and server slices where they fit.
    valid_need = max(_valid_floor(budget), covering + len(empties) + len(server))
    special = specials[: max(special_floor, budget - len(boundary) - valid_need)]
    return _Slices(empties, server, _listed_sizes(axes["m"]), core, extra, boundary, specials, special)


SLOTS = ("valid", "special", "boundary")


class _Chosen:
    """The cases taken so far, kernel by kernel and slot by slot: each id once, none that the
    matrix excludes, each with what its kernel's declaration adds."""

    def __init__(self, spec: Spec, kernels: Sequence[KernelSpec], arch: str):
        self._spec, self._arch = spec, arch
        self._declared = {kernel.name: kernel_case_params(kernel) for kernel in kernels}
        self.seen: set[str] = set()
        self.by_kernel: dict[str, dict[str, list[CaseParams]]] = {
            kernel.name: {slot: [] for slot in SLOTS} for kernel in kernels
        }

    def take(self, params: CaseParams, slot: str) -> bool:
        params = params.with_values(**self._declared[params.kernel])
        if is_excluded(self._spec, params, self._arch):
            return False
        cid = case_id(params)
        if cid in self.seen:
            return False
        self.seen.add(cid)
        self.by_kernel[params.kernel][slot].append(params)
        return True

    def take_valid(self, params: CaseParams) -> bool:
        return self.take(params, "valid")

    def cases(self) -> list[Case]:
        return [make_case(params) for slots in self.by_kernel.values() for slot in SLOTS for params in slots[slot]]


def _take_valid(
    spec: Spec, rows: list[KernelRows], valid_budget: int, chosen: _Chosen, notes: GenerationNotes
) -> list[KernelRows]:
    """The valid cases: the covering rows (each kernel's share of them when over budget: the
    covering guarantee is then lost, and the notes say so), then drawn ones. Returns the rows
    as cut."""
    total = sum(len(kernel_rows.valid) for kernel_rows in rows)
    if total > valid_budget:
        notes.truncated = total - valid_budget
        shares = [len(kernel_rows.valid) * valid_budget // total for kernel_rows in rows]
        rows = [kernel_rows._replace(valid=kernel_rows.valid[:share]) for kernel_rows, share in zip(rows, shares)]
    for kernel_rows in rows:
        notes.covering_rows += sum(chosen.take(params, "valid") for params in kernel_rows.valid)
    # The rest of the valid share, kernel by kernel; what a kernel's space cannot fill goes to
    # the kernels that filled theirs, in further rounds.
    open_rows, round_ = list(rows), 0
    while open_rows and valid_budget - notes.covering_rows - notes.drawn > 0:
        spare = valid_budget - notes.covering_rows - notes.drawn
        still_open = []
        for index, kernel_rows in enumerate(open_rows):
            missing = spare // len(open_rows) + (1 if index < spare % len(open_rows) else 0)
            seed = _stream_seed(spec, kernel_rows.kernel.name, "drawn" if not round_ else f"drawn{round_}")
            added = _fill(kernel_rows.space, kernel_rows.values, missing, seed, chosen.take_valid)
            notes.drawn += added
            if missing and added == missing:
                still_open.append(kernel_rows)
        open_rows, round_ = still_open, round_ + 1
    return rows


def _take_slices(slices: _Slices, budget: int, chosen: _Chosen, notes: GenerationNotes) -> None:
    """The empty-dim, special and boundary slices; then, where valid cases fall short of their
    share, more special and boundary cases up to the budget."""
    for params in slices.empties:
        notes.empty += chosen.take(params, "valid")
    for params in slices.server:
        if chosen.take(_purposed(params), "valid"):
            notes.server += 1
            if params.m not in slices.listed_m:
                added = notes.m_added.setdefault(params.kernel, [])
                added += [params.m] * (params.m not in added)
    for params in slices.special:
        notes.special += chosen.take(params, "special")
    for params in slices.boundary:
        notes.boundary += chosen.take(params, "boundary")
    left = budget - notes.covering_rows - notes.drawn - notes.empty - notes.server - notes.special - notes.boundary
    spare = [(p, "special") for p in slices.specials[len(slices.special) :]] + [
        (p, "boundary") for p in slices.boundary_core[len(slices.boundary) :] + slices.boundary_extra
    ]
    for params, slot in spare:
        if left <= 0:
            break
        if chosen.take(params, slot):
            setattr(notes, slot, getattr(notes, slot) + 1)
            left -= 1


def _profile_cases(spec: Spec, profile: Profile, arch: str, with_included: bool) -> tuple[list[Case], GenerationNotes]:
    """The cases of a profile that has `cases` (see generate_cases).

    Valid configurations of each kernel's support model take at least VALID_SHARE_PERCENT of the
    budget; a boundary slice of at most BOUNDARY_SHARE_PERCENT holds each refusal reason under
    each compile-mode family; a special slice each special scale value x scale form x family, in
    what is left. Only when the axes hold fewer valid cases than their share do boundary and
    special cases take the rest."""
    axes = spec.axes_for(profile)
    kernels = spec.kernels_for(profile)
    budget = profile.cases
    notes = GenerationNotes(arch)
    modes = runnable_modes(axes["mode"], arch)
    notes.left_out_modes = [m for m in axes["mode"] if m not in modes]
    families = families_of(modes)
    rows = [_kernel_rows(spec, profile, kernel, axes, modes, arch) for kernel in kernels]
    slices = _slices(rows, axes, families, budget)
    chosen = _Chosen(spec, kernels, arch)
    valid_budget = budget - len(slices.boundary) - len(slices.special) - len(slices.empties) - len(slices.server)
    uncut = rows
    rows = _take_valid(spec, rows, valid_budget, chosen, notes)
    _take_slices(slices, budget, chosen, notes)
    _take_extremes(spec, rows, axes, families, chosen, notes)
    # Any valid row is a base for a guaranteed value, those the budget cut too.
    _take_guarantee(uncut, slices, axes, chosen, notes)
    cases = chosen.cases()
    notes.warnings = _narrowing_warnings(profile, axes, rows, chosen.by_kernel, len(cases))
    notes.warnings += _synthetic_warning(profile, cases)
    _note_epilogue_cut(rows, chosen, budget, notes)
    if with_included:
        notes.included += _add_included(spec, cases, chosen.seen, arch)
    notes.possible = {
        kernel.name: {
            "scale_pair_mode": [[a, b, m] for a, b in space.possible_pairs() for m in values["mode"]],
            "form_class": [list(t) for t in space.possible_form_classes()],
            "epilogue": sorted(epilogue_possible),
            "axis_values": _axis_values(space, values, specials, axes),
            **({"m_added": notes.m_added[kernel.name]} if kernel.name in notes.m_added else {}),
            **({"shapes_added": notes.shapes_added[kernel.name]} if kernel.name in notes.shapes_added else {}),
            **({"not_proven": notes.not_proven[kernel.name]} if kernel.name in notes.not_proven else {}),
        }
        for kernel, space, values, specials, _, epilogue_possible in rows
    }
    notes.boundary_reasons = {
        kernel.name: sorted(
            {p.expected_refusal for p in chosen.by_kernel[kernel.name]["boundary"] if p.expected_refusal}
        )
        for kernel in kernels
    }
    notes.families = list(families)
    return cases, notes


def _refuses(space: KernelSpace) -> Any:
    """Whether the kernel's model, the matrix's exclude rules or the production axes refuse a case."""
    return lambda case: (
        not production_data_fits(_as_row(case)) or bool(_row_breaks(space.model, case)) or space._excluded(case)
    )


def _as_row(case: CaseParams) -> dict[str, Any]:
    """A case as a covering row reads it: what it was given, with its shape classes."""
    return {**case.to_json(), **{f"{dim}_class": class_of(dim, case.value_of(dim)) for dim in DIMS}}


def _valid_bases(kernel_rows: KernelRows) -> list[CaseParams]:
    return [p.without("special_side") for p in kernel_rows.valid if p.purpose == "valid"]


def _take_extremes(
    spec: Spec, rows: list[KernelRows], axes: Mapping[str, Any], families: dict, chosen: _Chosen, notes: GenerationNotes
) -> None:
    """Per kernel, the shape classes at their extremes that the axes leave out (shape_extremes.py),
    past the budget; the classes only the matrix's `limits:` keep out are not proven."""
    extremes = wanted(axes)
    if not extremes or synthetic_slice(axes):
        return  # a synthetic slice (a benchmark's) stays as its axes say
    modes = [mode for family_modes in families.values() for mode in family_modes]
    for kernel_rows in rows:
        name = kernel_rows.kernel.name
        bases, refuses = _valid_bases(kernel_rows), _refuses(kernel_rows.space)
        found = kernel_extremes(name, bases, modes, extremes, refuses, spec.limits, small_sizes(axes))
        for case in found.cases:
            label = next(e.label for e in extremes if case.value_of(e.dim) == e.size)
            if chosen.take(_purposed(case), "valid"):
                notes.extreme += 1
                notes.shapes_added.setdefault(name, []).append(label)
        for label, why in found.capped.items():
            notes.not_proven.setdefault(name, []).append(f"{label} ({BY_LABEL[label].doc}): {why}")


def _note_epilogue_cut(rows: list[KernelRows], chosen: _Chosen, budget: int, notes: GenerationNotes) -> None:
    """Per kernel, a warning where the budget's cut of the covering rows left out epilogue
    combinations its valid cases can have (the coverage line counts them after the run)."""
    for kernel_rows in rows:
        axes = epilogue.varying_axes(kernel_rows.values)
        taken = chosen.by_kernel[kernel_rows.kernel.name]["valid"]
        missing = kernel_rows.epilogue - set().union(*(epilogue.targets(p, axes) for p in taken))
        kinds = (("3-way", "3-way combinations"), ("compiled", "whole epilogues under a compiled mode"))
        counts = [
            f"{_count(missing, kind)} of {_count(kernel_rows.epilogue, kind)} {words}"
            for kind, words in kinds
            if _count(missing, kind)
        ]
        if counts:
            notes.warnings.append(
                f"budget: `cases: {budget}` leaves out {' and '.join(counts)} of kernel "
                f"{kernel_rows.kernel.name}'s epilogue (scale forms, mode, bias, output dtype): raise `cases:`"
            )


def _count(targets, kind: str) -> int:
    return sum(1 for target in targets if epilogue.kind_of(target) == kind)


def _take_guarantee(
    rows: list[KernelRows], slices: _Slices, axes: Mapping[str, Any], chosen: _Chosen, notes: GenerationNotes
) -> None:
    """Per kernel, a checked case for each value of its space and each special value on each side
    that the budget's cases left out (guarantee.py), past the budget."""
    sides = list(axes.get("special_side", ["a"]))
    for kernel_rows in rows:
        kernel, space = kernel_rows.kernel, kernel_rows.space
        bases = _valid_bases(kernel_rows)
        refuses = _refuses(space)
        own = chosen.by_kernel[kernel.name]
        taken = own["valid"] + own["special"]
        for axis, value in missing_values(_axis_values(space, kernel_rows.values, kernel_rows.specials, axes), taken):
            case = changed_case(kernel.name, axis, value, bases, space.pools, refuses)
            if case is not None and chosen.take(_purposed(case), "valid"):
                notes.guaranteed += 1
        for value, side in missing_specials(kernel_rows.specials, sides, own["valid"] + own["special"]):
            drawn = [
                p
                for p in slices.specials
                if p.kernel == kernel.name and p.special_scale == value and p.special_side == side
            ]
            made = changed_case(kernel.name, "special_scale", value, bases, space.pools, refuses)
            if made is not None and side != "a":
                made = made.with_values(special_side=side)
            for params in drawn + ([made] if made is not None else []):
                if chosen.take(params.with_values(purpose="special"), "special"):
                    notes.guaranteed += 1
                    break
        if synthetic_slice(axes):
            continue  # a benchmark's or a smoke run's slice stays as its axes say
        taken = own["valid"] + own["special"]
        for change in missing_interactions(taken, specials_asked(axes)):
            case = interaction_case(kernel.name, change, bases, refuses)
            if case is not None and chosen.take(_purposed(case), "valid"):
                notes.guaranteed += 1


def _axis_values(space: KernelSpace, values: Mapping[str, list], specials: list, axes: Mapping[str, Any]) -> dict:
    """The values of each dimension the kernel's cases could take (its space): the axes it is
    given, the special values of its special slice, the shape classes of M, K and N (with the
    empty ones the axes list); the coverage line says which of them cases drew."""
    # A value no valid row can have (an exclude rule, the model) is not in the space.
    found = {axis: [v for v in vals if space.allowed({axis: v})] for axis, vals in values.items()}
    found["special_scale"] = ["none", *specials]
    empty = empty_dims(axes)
    for dim in DIMS:
        found[f"{dim}_class"] = [f"{dim}0"] * (dim in empty) + list(space.classes[f"{dim}_class"])
    # The listed sizes of K and N too (the weights' shapes): a class can be drawn while a size in
    # it (an N tail of 96 beside 40) never is.
    for dim in ("k", "n"):
        if isinstance(axes.get(dim), list):
            found[dim] = sorted(set(axes[dim]))
    return found


def _neutral_of(axis: str):
    return KERNEL_AXES[axis][1] if axis in KERNEL_AXES else "none"


def _synthetic_warning(profile: Profile, cases: Sequence[Case]) -> list[str]:
    """A line when no case holds production data: the profile's axes give value_regime,
    operand_layout and special_scale their neutral value only (synthetic data, which is known
    to hide bugs)."""
    neutral = {axis: _neutral_of(axis) for axis in PRODUCTION_AXES}
    if not cases or any(case.params.value_of(axis) != value for case in cases for axis, value in neutral.items()):
        return []
    listed = ", ".join(f"{axis}: [{value}]" for axis, value in neutral.items())
    return [
        f"profile {profile.name!r} draws no production data (its axes give {listed} only): leave these"
        " axes out, or list more values, to test the values, layouts and special scales real kernels meet"
    ]


def _narrowing_warnings(profile: Profile, axes: Mapping[str, Any], spaces: list, chosen: dict, total: int) -> list[str]:
    """What a kernel's declaration leaves out: declared values no case gives it (the matrix's
    axes do not list them), and, when the profile's budget is not filled, each kernel's count and
    the axes its declaration narrowed."""
    found = []
    for kernel, _, values, *_ in spaces:
        for axis, declared in declared_values(kernel).items():
            unused = [value for value in declared if value not in values[axis]]
            if unused:
                found.append(
                    f"kernel {kernel.name!r} declares {axis} {', '.join(map(str, unused))}, which profile"
                    f" {profile.name!r} does not list under axes.{axis}: no case gives it"
                )
    if total < profile.cases:
        for kernel, _, values, *_ in spaces:
            count = sum(len(chosen[kernel.name][slot]) for slot in ("valid", "special", "boundary"))
            narrowed = [
                f"{axis} {values[axis]} of {list(axes[axis])}"
                for axis in CATEGORICAL_AXES
                if axis in values and set(values[axis]) < set(axes[axis])
            ]
            why = f"its declaration narrows {'; '.join(narrowed)}" if narrowed else "the profile's axes hold no more"
            found.append(
                f"kernel {kernel.name!r}: {count} case(s) for profile {profile.name!r}, whose budget is"
                f" {profile.cases} ({total} in all): {why}"
            )
    return found


def runnable_modes(modes: list, arch: str) -> list:
    """The modes that can run on the target arch: a GPU-only mode is left out on the CPU (its
    cases would all skip), unless nothing else is left."""
    if arch != "cpu":
        return list(modes)
    kept = [mode for mode in modes if not compile_mode(mode).gpu_only]
    return kept or list(modes)


def _purposed(params: CaseParams) -> CaseParams:
    return params.with_values(purpose="special" if params.special else "valid")


def _valid_floor(budget: int) -> int:
    return -(-budget * VALID_SHARE_PERCENT // 100)


VALID_SHARE_PERCENT = 80  # at least this much of a budget goes to valid configurations
BOUNDARY_SHARE_PERCENT = 15  # at most this much to boundary cases
BOUNDARY_MAX_PERCENT = 20  # or up to this much, to hold each refusal reason under each family once
SPECIAL_SHARE_PERCENT = 15  # at least this much to special cases, where the profile asks for them


def _mutations(space: KernelSpace, values: dict) -> list[tuple[str, Any]]:
    found = [(axis, value) for axis in TABLE_AXES + space.free_axes for value in values[axis]]
    for dim in DIMS:
        sizes = sorted({size for pool in space.pools[dim].values() for size in space._representatives(dim, pool)})
        found += [(dim, size) for size in sizes]
    return found


def _consider(space: KernelSpace, candidates: dict[str, list[CaseParams]], changed: CaseParams) -> None:
    """Keep a changed case under its refusal key when exactly one rule of the model breaks."""
    if not production_data_fits(changed.to_json()):
        return
    broken = _row_breaks(space.model, changed)
    if len(broken) == 1 and not space._excluded(changed):
        candidates.setdefault(broken[0], []).append(changed)


def _boundary(spaces: list, families: dict) -> tuple[list[CaseParams], list[CaseParams]]:
    """Each refusal reason each kernel's model can give within the axes, once per compile-mode
    family: one valid case with one value changed so that exactly that rule breaks; ordered family
    by family, so that a budget cut keeps every reason. Then the other such cases found, for a
    budget the valid cases cannot fill."""
    per_key: list[list[CaseParams]] = []
    extra: list[CaseParams] = []
    for kernel, space, covered, _, valid, _ in spaces:
        candidates: dict[str, list[CaseParams]] = {}
        step = max(1, len(valid) // 40)
        pairings = own_pairings(covered["scale_a"], covered["dtype_a"], covered["dtype_b"])
        for base in valid[::step]:
            for axis, value in _mutations(space, covered):
                if base.given_value(axis) != value:
                    _consider(space, candidates, base.with_values(**{axis: value}))
            for pairing in pairings:  # microscaling forms: both scales and dtypes at once
                _consider(space, candidates, base.with_values(**pairing))
        if not candidates:
            # No valid case to change (the axes hold none, or the model refuses a value every
            # case has): cases drawn without the model, where one rule breaks.
            for row in _raw_rows(space, covered, 64):
                _consider(space, candidates, CaseParams.from_json(row))
        for key in sorted(candidates):
            found = candidates[key]
            offset = zlib.crc32(f"{kernel.name}::{key}".encode())
            cases = []
            for index, modes in enumerate(families.values()):
                chosen = found[(offset + index * 7) % len(found)]
                mode = modes[(offset + index) % len(modes)]
                cases.append(chosen.with_values(mode=mode, purpose="boundary", expected_refusal=key))
            per_key.append(cases)
            modes = [mode for family_modes in families.values() for mode in family_modes]
            extra += [
                case.with_values(mode=modes[i % len(modes)], purpose="boundary", expected_refusal=key)
                for i, case in enumerate(found)
            ]
    # Family by family across every reason, so that a cut keeps each reason.
    ordered = [
        cases[i] for i in range(max((len(c) for c in per_key), default=0)) for cases in per_key if i < len(cases)
    ]
    return ordered, extra


def _raw_rows(space: KernelSpace, values: dict, count: int) -> list[dict]:
    """Cases drawn over every axis and size of the profile, whatever the model says."""
    axes = list(values)
    sizes = {dim: sorted(size for pool in space.pools[dim].values() for size in pool) for dim in DIMS}
    if not all(sizes.values()):
        return []  # an axis of empty sizes only (m: [0]): its cases are the empty slice's
    rows = []
    for draw in _draw_integers(_stream_seed(space.spec, space.kernel.name, "raw"), count, len(axes) + len(DIMS)):
        row = {
            "kernel": space.kernel.name,
            **{axis: values[axis][u % len(values[axis])] for axis, u in zip(axes, draw)},
        }
        row.update({dim: sizes[dim][u % len(sizes[dim])] for dim, u in zip(DIMS, draw[len(axes) :])})
        rows.append(row)
    return rows


# The order special values and sides are given to a kernel in, so that a small budget still
# has a zero and a negative scale on each side first (a pruned channel, a sign dropped).
SPECIAL_ORDER = (
    ("zero", "b"),
    ("negative", "a"),
    ("negative", "b"),
    ("zero", "a"),
    ("nan", "b"),
    ("inf", "a"),
    ("inf", "b"),
    ("nan", "a"),
)


def _special(spaces: list, families: dict, sides: list) -> list[CaseParams]:
    """Each special value x side (of `sides`) x scale form of that side x compile-mode family, on
    valid cases. Each kernel's list is ordered every (value, side) first (SPECIAL_ORDER, its
    multi-element forms first: one zero output channel), then every form, then every family;
    the kernels' lists are interleaved, so that a budget cut gives every kernel its share."""
    per_kernel: list[list[CaseParams]] = []
    for kernel, _, covered, specials, valid, _ in spaces:
        ranked: list[tuple] = []
        combos = [(v, s) for v, s in SPECIAL_ORDER if v in specials and s in sides]
        for combo_index, (value, side) in enumerate(combos):
            forms = sorted(covered[f"scale_{side}"], key=lambda f: FORM_BY_ID[f].per_tensor)
            for form_index, form in enumerate(forms):
                bases = [p for p in valid if p.value_of(f"scale_{side}") == form]
                if not bases:
                    continue
                offset = zlib.crc32(f"{kernel.name}::{value}::{form}".encode())
                if side == "b":
                    offset = zlib.crc32(f"{kernel.name}::{value}::b::{form}".encode())
                family_modes = list(families.values())
                for index, modes in enumerate(family_modes):
                    case = bases[(offset + index * 3) % len(bases)].with_values(
                        mode=modes[(offset + index) % len(modes)], special_scale=value, purpose="special"
                    )
                    if side == "b":
                        case = case.with_values(special_side="b")
                    # Rotated, so that the first round already spreads over the families.
                    round_ = (index - combo_index - form_index) % len(family_modes)
                    ranked.append(((round_, form_index, combo_index), case))
        per_kernel.append([case for _, case in sorted(ranked, key=lambda item: item[0])])
    return [
        cases[i] for i in range(max((len(c) for c in per_kernel), default=0)) for cases in per_kernel if i < len(cases)
    ]


def _empty_slice(spaces: list, dims: list, families: dict) -> list[CaseParams]:
    """Per kernel, each empty dim (M = 0: an idle expert; K = 0; N = 0) on a valid case, once per
    compile-mode family, kernels interleaved: purpose valid where the kernel's model takes it,
    else boundary with the refusal."""
    per_kernel = []
    for kernel, space, _, _, valid, _ in spaces:
        found = []
        for index, modes in enumerate(families.values()):
            for dim in dims:
                if not valid:
                    break
                offset = zlib.crc32(f"{kernel.name}::empty::{dim}".encode())
                base = valid[(offset + index * 5) % len(valid)].without("special_side")
                case = base.with_values(**{dim: 0}, mode=modes[(offset + index) % len(modes)])
                if dim == "m" and case.operand_layout == TOKEN_STRIDE0:
                    case = case.with_values(operand_layout="dense")  # no token left to lay out
                broken = _row_breaks(space.model, case)
                case = (
                    case.with_values(purpose="boundary", expected_refusal=broken[0])
                    if broken
                    else case.with_values(purpose="valid")
                )
                if len(broken) <= 1:
                    found.append(case)
        per_kernel.append(found)
    return [
        cases[i] for i in range(max((len(c) for c in per_kernel), default=0)) for cases in per_kernel if i < len(cases)
    ]


def synthetic_slice(axes: Mapping[str, Any]) -> bool:
    """A profile that pins the production axes to their neutral value (a benchmark's, a smoke
    run's): no server sizes, extremes or interactions are added to it."""
    return all(list(axes.get(axis, ())) == [_neutral_of(axis)] for axis in PRODUCTION_AXES)


def specials_asked(axes: Mapping[str, Any]) -> bool:
    """Whether the profile asks for special values (its special_scale axis lists one)."""
    return any(value != "none" for value in axes.get("special_scale", ()))


def _listed_sizes(value) -> set:
    """The sizes an axis of M (a list or a {min, max} range) holds."""
    if isinstance(value, dict):
        return set(range(value["min"], value["max"] + 1))
    return set(value)


def _server_slice(spaces: list, axes: Mapping[str, Any], families: dict) -> list[CaseParams]:
    """Per kernel, the token counts a server meets (schema.SERVER_M) that the axis of M does not
    list, each on a valid case of its own; two K tails of a 32-block, an N tail of a 64-wide
    tile, an fp8 output with its scale_result (below); then M = N and M = N = K on a valid case
    (rowwise scales first: a kernel that tells per-token from per-channel scales by their length
    is wrong only there). The guarantee adds what of these a budget cuts (guarantee.INTERACTIONS).
    Only cases the kernel's model takes; kernels interleaved."""
    listed = _listed_sizes(axes["m"])
    per_kernel = []
    for kernel, space, _, _, valid, _ in spaces:
        found: list[CaseParams] = []
        bases = [p.without("special_side") for p in valid if p.purpose == "valid"]
        if not bases:
            per_kernel.append(found)
            continue
        modes = [mode for family_modes in families.values() for mode in family_modes]
        wanted: list[tuple[dict[str, Any], str]] = [({"m": m}, f"m{m}") for m in SERVER_M if m not in listed]
        # K above one 32-block and not a multiple of it (48, 80: a 32-wide K loop's remainder),
        # where the axis of K lists one: its class (ktail) holds other sizes too.
        tails = sorted(k for k in _listed_sizes(axes["k"]) if k > 32 and k % 32)
        # N above one 64-wide tile and not a multiple of it (96: a shifted or masked last N tile).
        n_tails = sorted(n for n in _listed_sizes(axes["n"]) if n > 64 and n % 64)
        wanted[2:2] = [({"k": k}, f"k{k}") for k in tails[:2]] + [({"n": n}, f"n{n}") for n in n_tails[:1]]
        if takes_axis(kernel.name, KERNEL_AXES["scale_result"][2], kernel.impl is None and kernel.fn is None):
            # An fp8 output with its output scale (torch._scaled_mm's scale_result), as an fp8
            # activation for the next layer is made.
            wanted[1:1] = [({"out_dtype": "e4m3fn", "scale_result": "two", "bias": False}, "fp8out")]
        # NaN in an operand (inf where the dtype has one: e5m2), not only in a scale.
        fp8 = [p for p in bases if p.dtype_a in ("e4m3fn", "e5m2") and p.value_regime == "standard"]
        if fp8 and specials_asked(axes):
            # In the weight too (its last element): a kernel may sanitise one operand's loads only.
            operands = [({"special_operand": "nan_ab"}, "nan-a")]
            if any(p.dtype_a == "e5m2" for p in fp8):
                operands.append(({"special_operand": "inf"}, "inf-a"))
            wanted[3:3] = operands
        rowwise = [p for p in bases if not FORM_BY_ID[p.scale_a].per_tensor] or bases
        for base in rowwise[:1]:
            wanted += [({"m": base.n}, "m=n"), ({"m": base.k, "n": base.k}, "m=n=k")]
        for index, (change, label) in enumerate(wanted):
            offset = zlib.crc32(f"{kernel.name}::server::{label}".encode())
            pool = rowwise if label.startswith("m=") else bases
            if label.endswith("-a"):
                pool = [p for p in fp8 if label == "nan-a" or p.dtype_a == "e5m2"]
            for step in range(len(pool)):
                base = pool[(offset + step) % len(pool)]
                case = base.with_values(**change, mode=modes[(offset + index) % len(modes)])
                if case.m and not _row_breaks(space.model, case) and not space._excluded(case):
                    found.append(case)
                    break
        per_kernel.append(found)
    return [
        cases[i] for i in range(max((len(c) for c in per_kernel), default=0)) for cases in per_kernel if i < len(cases)
    ]


def _fill(space: KernelSpace, values: dict, missing: int, seed: int, add) -> int:
    """Up to `missing` more valid cases of the kernel, drawn over every axis and shape class."""
    if missing <= 0:
        return 0
    pairs = space.possible_pairs()
    if not pairs:
        return 0
    axes = [a for a in values if a not in ("scale_a", "scale_b")]
    width = 1 + len(axes) + len(CLASS_AXES) + len(DIMS)
    added = 0
    for attempt in range(4):
        # Generous: small spaces repeat values, and refused or duplicate draws are skipped.
        for draw in _draw_integers(seed + attempt, max(missing * 8, 64), width):
            if added >= missing:
                return added
            row = dict(zip(("scale_a", "scale_b"), pairs[draw[0] % len(pairs)]))
            row.update({axis: values[axis][u % len(values[axis])] for axis, u in zip(axes, draw[1:])})
            offset = 1 + len(axes)
            row.update(
                {axis: space.classes[axis][u % len(space.classes[axis])] for axis, u in zip(CLASS_AXES, draw[offset:])}
            )
            if not space.allowed(row):
                continue
            params = space.sizes(row, draw[offset + len(CLASS_AXES) :])
            if params is not None and add(_purposed(params)):
                added += 1
    return added
