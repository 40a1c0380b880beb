"""Cases: frozen parameters, stable ids, generation from a Spec.

Generation is a pure function of the matrix file, the profile and the seed: no hardware, time,
set ordering or hash() enters it, so every process and xdist worker collects the same cases.
A covering array (allpairspy) guarantees every pair of categorical axis values meets at least
once per kernel (every scale_a x scale_b pairing, every scale form x compile mode ...);
hypothesis draws the shapes of those rows and then fills the profile's budget with further
cases drawn over all axes.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from ..verdict.scale_forms import FORMS
from .schema import CATEGORICAL_AXES, SHAPE_AXES
from .spec import KernelSpec, Profile, Spec

SCALE_SHORT = {form.id: form.short for form in FORMS}
LAYOUT_SHORT = {"noncontiguous": "nc", "offset": "off", "expanded": "exp"}
KERNEL_SHORT = {"aten_scaled_mm": "fp8", "int8_w8a8": "w8a8"}


@dataclass(frozen=True)
class Case:
    id: str
    params: Mapping[str, Any]

    def __getitem__(self, key):
        return self.params[key]

    def to_json(self) -> dict:
        return dict(self.params)


def _dtype_part(params: Mapping[str, Any]) -> str:
    a, b = params["dtype_a"], params["dtype_b"]
    if a == "int8":
        return ""
    short = {"e4m3fn": "e4m3", "e5m2": "e5m2", "e4m3fnuz": "e4m3fnuz", "e5m2fnuz": "e5m2fnuz"}
    return short[a] if a == b else f"{short[a]}x{short[b]}"


def case_id(params: Mapping[str, Any]) -> str:
    """Readable id plus a short hash of every parameter, e.g. fp8e4m3-s0d_x_s1d-m17k64n32-bf16-inductor-1a2b3c."""
    kernel = params["kernel"]
    dtype = _dtype_part(params)
    head = KERNEL_SHORT.get(kernel)
    head = f"{head}{dtype}" if head else (f"{kernel}.{dtype}" if dtype else kernel)
    parts = [
        head,
        f"{SCALE_SHORT[params['scale_a']]}_x_{SCALE_SHORT[params['scale_b']]}",
        f"m{params['m']}k{params['k']}n{params['n']}",
        params["out_dtype"],
        params["mode"],
    ]
    if params.get("bias"):
        parts.append("bias")
    if params.get("use_fast_accum"):
        parts.append("fast")
    if params.get("scale_layout", "contiguous") != "contiguous":
        parts.append(LAYOUT_SHORT[params["scale_layout"]])
    if params.get("activation_rank", 2) == 3:
        parts.append("3d")
    if params.get("special_scale", "none") != "none":
        parts.append(params["special_scale"])
    digest = hashlib.sha256(json.dumps(dict(params), sort_keys=True).encode()).hexdigest()[:6]
    return "-".join(parts + [digest])


def make_case(params: Mapping[str, Any]) -> Case:
    params = dict(params)
    return Case(case_id(params), params)


def input_seed(run_seed: int, cid: str) -> int:
    """Per-case seed; crc32 because hash() is salted per process."""
    return zlib.crc32(f"{run_seed}::{cid}".encode())


def matches(rule: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    """A rule (exclude or known-failure match) holds when every key it names matches."""
    for key, want in rule.items():
        if key not in params:
            return False
        wanted = want if isinstance(want, list) else [want]
        if params[key] not in wanted:
            return False
    return True


def kernel_axes(kernel: KernelSpec, axes: Mapping[str, Any]) -> dict[str, list]:
    """Categorical values a kernel can be given; static kernel facts only (its declaration and
    its signature), never hardware."""
    from .kernels import kernel_accepts_fast_accum

    values = {name: list(axes[name]) for name in CATEGORICAL_AXES}
    if kernel.family == "int8":
        values["dtype_a"] = values["dtype_b"] = ["int8"]
        values["use_fast_accum"] = [False]
    elif not kernel_accepts_fast_accum(kernel):
        # No use_fast_accum parameter: the harness never passes it, so no case asks for it.
        values["use_fast_accum"] = [False]
    elif kernel.dtypes:
        for side in ("dtype_a", "dtype_b"):
            values[side] = [d for d in values[side] if d in kernel.dtypes] or list(kernel.dtypes[:1])
    if kernel.scale_forms:
        for side in ("scale_a", "scale_b"):
            values[side] = [s for s in values[side] if s in kernel.scale_forms] or list(kernel.scale_forms[:1])
    return values


def _covering_rows(values: dict[str, list], strength: int, excluded) -> list[dict]:
    """Covering array over the categorical axes. The two scale forms are joined into one axis so
    that every scale pairing meets every compile mode, dtype and layout (the rank-mismatch bugs
    live in such triples)."""
    from allpairspy import AllPairs

    values = dict(values)
    side_a, side_b = values.pop("scale_a"), values.pop("scale_b")
    pairs = [(a, b) for a in side_a for b in side_b]
    values = {"scale_pair": pairs, **values}
    varying = [name for name in values if len(values[name]) > 1]
    fixed = {name: values[name][0] for name in values if len(values[name]) == 1}
    if len(varying) <= strength:
        import itertools

        combos = [dict(zip(varying, combo)) for combo in itertools.product(*(values[n] for n in varying))]
        rows = [{**fixed, **c} for c in combos]
    else:

        def allowed(partial):
            return not excluded(_split_pair({**fixed, **dict(zip(varying, partial))}))

        found = AllPairs([values[n] for n in varying], filter_func=allowed, n=strength)
        rows = [{**fixed, **dict(zip(varying, row))} for row in found]
    rows = [_split_pair(r) for r in rows]
    return [r for r in rows if not excluded(r)]


def _split_pair(row: dict) -> dict:
    row = dict(row)
    if "scale_pair" in row:
        row["scale_a"], row["scale_b"] = row.pop("scale_pair")
    return row


def _dim_strategy(spec_value):
    from hypothesis import strategies as st

    if isinstance(spec_value, dict):
        return st.integers(spec_value["min"], spec_value["max"])
    return st.sampled_from(list(spec_value))


_STABLE_BACKEND = "scaledmm-stable"


def _stable_backend() -> dict:
    """settings(backend=...) for draws that depend on the seed alone. Hypothesis mixes in integer
    constants found in the user's loaded modules (a conftest, an editable install), which would
    make case ids differ between processes; this provider never draws constants. Empty where
    this hypothesis has no provider API (nor such constants)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return {}
    if not hasattr(providers, "AVAILABLE_PROVIDERS") or not hasattr(providers.HypothesisProvider, "_maybe_draw_constant"):
        return {}
    providers.AVAILABLE_PROVIDERS.setdefault(_STABLE_BACKEND, f"{__name__}._SeedOnlyProvider")
    return {"backend": _STABLE_BACKEND}


def _seed_only_provider():
    from hypothesis.internal.conjecture.providers import HypothesisProvider

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
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

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

    collect()
    return found


def _stream_seed(spec: Spec, *parts: str) -> int:
    return zlib.crc32("::".join([str(spec.seed), *parts]).encode())


def generate_cases(spec: Spec, profile: Profile) -> tuple[list[Case], dict]:
    """All cases of a profile, in a stable order, and notes on how they were made."""
    from hypothesis import strategies as st

    axes = spec.axes_for(profile)
    kernels = spec.kernels_for(profile)
    shape_strategy = st.fixed_dictionaries({d: _dim_strategy(axes[d]) for d in SHAPE_AXES})
    cases: list[Case] = []
    seen: set[str] = set()
    notes = {"covering_rows": 0, "drawn": 0, "truncated": 0, "included": 0}

    def excluded(params):
        return any(matches(rule, params) for rule in spec.exclude)

    def add(params) -> bool:
        if excluded(params):
            return False
        case = make_case(params)
        if case.id in seen:
            return False
        seen.add(case.id)
        cases.append(case)
        return True

    per_kernel = []
    for kernel in kernels:
        values = kernel_axes(kernel, axes)
        rows = _covering_rows(values, profile.strength, lambda p, k=kernel.name: excluded({**p, "kernel": k}))
        per_kernel.append((kernel, values, rows))
    total_rows = sum(len(rows) for _, _, rows in per_kernel)
    if total_rows > profile.cases:
        # Over budget: keep each kernel's share; the covering guarantee is lost and said so.
        notes["truncated"] = total_rows - profile.cases
        shares = [len(rows) * profile.cases // total_rows for _, _, rows in per_kernel]
        per_kernel = [(k, v, rows[:share]) for (k, v, rows), share in zip(per_kernel, shares)]
    for kernel, _, rows in per_kernel:
        shapes = draw_examples(shape_strategy, len(rows), _stream_seed(spec, kernel.name, "shapes")) or [{}]
        for i, row in enumerate(rows):
            if add({"kernel": kernel.name, **row, **shapes[i % len(shapes)]}):
                notes["covering_rows"] += 1
    spare = profile.cases - len(cases)
    for index, (kernel, values, _) in enumerate(per_kernel):
        missing = spare // len(per_kernel) + (1 if index < spare % len(per_kernel) else 0)
        if missing <= 0:
            continue
        full = st.fixed_dictionaries(
            {
                "kernel": st.just(kernel.name),
                **{n: st.sampled_from(v) for n, v in values.items()},
                **{d: _dim_strategy(axes[d]) for d in SHAPE_AXES},
            }
        )
        # Generous: small spaces repeat values, and excluded or duplicate draws are skipped.
        for params in draw_examples(full, max(missing * 10, 50), _stream_seed(spec, kernel.name, "drawn")):
            if missing == 0:
                break
            if add(params):
                missing -= 1
                notes["drawn"] += 1
    for params in spec.included_cases:
        if add(params):
            notes["included"] += 1
    return cases, notes

