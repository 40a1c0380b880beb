"""JUnit XML (`--junitxml`) properties of each case, every value JSON.

pytest writes a property as `str(value)`: a record shipped as a dict in user_properties came
out as a Python repr (`'cuda': None`), which no JUnit consumer can read. On the process that
writes the XML, each case's teardown report (the one pytest's junitxml plugin turns into
properties) gets flat `scaledmm.*` properties (outcome, kernel, mode, torch, arch, error ratios
...) and its dict-valued properties are wrapped so that they print as JSON. Records stay dicts
for every other reader. Non-finite numbers, which JSON has no spelling for, become the strings
"inf", "-inf" and "nan".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from .items import user_property

if TYPE_CHECKING:
    from .session import MatrixSession

# Flat properties, in this order: name -> where in the record (or the environment) it is.
RECORD_FIELDS = ("outcome", "signature", "root_cause", "layer")
PARAM_FIELDS = ("kernel", "mode", "dtype_a", "dtype_b", "scale_a", "scale_b", "out_dtype", "m", "k", "n", "purpose")
ENV_FIELDS = ("torch", "cuda", "hip", "triton", "arch", "device_name")


def plain(value: Any) -> Any:
    """`value` with every non-finite float as a string: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def as_json(value: Any) -> str:
    return json.dumps(plain(value), sort_keys=False, default=str, allow_nan=False)


class JsonDict(dict):
    """A dict that prints as JSON: what pytest's junitxml writes for it."""

    def __str__(self) -> str:
        return as_json(self)

    __repr__ = __str__


class JsonList(list):
    def __str__(self) -> str:
        return as_json(self)

    __repr__ = __str__


def flat_properties(record: Mapping, environment: Mapping | None, shard: tuple | None) -> list[tuple[str, str]]:
    out = []
    for key in RECORD_FIELDS:
        out.append((f"scaledmm.{key}", as_json(record.get(key))))
    params = record.get("params") or {}
    for key in PARAM_FIELDS:
        if key in params:
            out.append((f"scaledmm.{key}", as_json(params[key])))
    errors = record.get("errors") or {}
    for side in ("eager", "compiled"):
        check = errors.get(side) if isinstance(errors, Mapping) else None
        ratio = check.get("ratio") if isinstance(check, Mapping) else None
        out.append((f"scaledmm.{side}_error_ratio", as_json(ratio)))
    for key in ENV_FIELDS:
        out.append((f"scaledmm.{key}", as_json((environment or {}).get(key))))
    device = (record.get("extra") or {}).get("device") if isinstance(record.get("extra"), Mapping) else None
    out.append(("scaledmm.device", as_json(device)))
    if shard:
        out.append(("scaledmm.shard", as_json(f"{shard[0]}/{shard[1]}")))
    return out


class JunitProperties:
    """Registered on the process that writes `--junitxml` (never an xdist worker)."""

    def __init__(self, state: MatrixSession) -> None:
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown" or not report.user_properties:
            return
        properties = list(report.user_properties)
        if any(name.startswith("scaledmm.") for name, _ in properties):
            return  # done already
        record = dict(properties).get("scaledmm")
        wrapped = []
        for name, value in properties:
            if name.startswith("scaledmm") and isinstance(value, dict):
                value = JsonDict(value)
            elif name.startswith("scaledmm") and isinstance(value, list):
                value = JsonList(value)
            wrapped.append((name, value))
        if isinstance(record, dict):
            environment = user_property(properties, "scaledmm_env") or self.state.environment
            wrapped += flat_properties(record, environment, self.state.settings.shard)
        report.user_properties = wrapped
