"""Explore mode: hypothesis searches the matrix's axes for failures and shrinks each one to its
smallest shapes and simplest configuration; save_corpus adds the minimal cases to the corpus file
(matrix/corpus.py), which matrix.yaml can include to replay them.

Shrinking moves every axis towards its first listed value (shape lists are sorted, so towards the
smallest size; a {min, max} range towards min), so list the plainest value of an axis first.
Each failure signature is its own exception type, so hypothesis shrinks distinct bugs separately
instead of letting one absorb the other.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from ..matrix.case_params import case_id, make_case
from ..matrix.cases import given_axes, is_excluded, kernel_axes, kernel_case_params
from ..matrix.corpus import complete_params, read_entries, write_corpus
from ..matrix.schema import SHAPE_AXES
from ..verdict.case_axes import CaseParams

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from ..matrix.case_params import Case
    from ..matrix.spec import KernelSpec, Profile
    from ..records import CaseRecord
    from ..verdict.outcome import Outcome
    from .session import MatrixSession


class ExploreFailure(AssertionError):
    """A case that failed while exploring; subclassed per signature."""


_FAILURE_TYPES: dict[str, type] = {}


def _failure_type(key: str) -> type:
    if key not in _FAILURE_TYPES:
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        _FAILURE_TYPES[key] = type(f"ExploreFailure_{digest}", (ExploreFailure,), {})
    return _FAILURE_TYPES[key]


def _dim_strategy(value: Mapping[str, int] | Iterable[int]) -> st.SearchStrategy[int]:
    if isinstance(value, dict):
        return st.integers(value["min"], value["max"])
    return st.sampled_from(sorted(value))


def explore_kernel(
    state: MatrixSession, kernel: KernelSpec, examples: int, profile: Profile | None = None
) -> list[tuple[Case, Outcome]]:
    """[(case, outcome)] — the minimal failing case of each signature hypothesis found, over the
    axes of `profile` (default: the run's; for a composite, one of its parts)."""

    profile = profile or state.profile
    axes = state.spec.axes_for(profile)
    values = kernel_axes(kernel, axes, given_axes(state.spec, profile))
    strategy = st.fixed_dictionaries(
        {
            "kernel": st.just(kernel.name),
            **{name: st.sampled_from(choices) for name, choices in values.items()},
            **{dim: _dim_strategy(axes[dim]) for dim in SHAPE_AXES},
        }
    )
    last: dict[str, tuple[Case, Outcome]] = {}

    @hypothesis_seed(state.seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
        print_blob=False,
    )
    @given(strategy)
    def probe(params: dict[str, Any]) -> None:
        assume(not is_excluded(state.spec, params, state.target_arch))
        case = make_case({**params, **kernel_case_params(kernel)})  # as generation makes its cases
        result = state.run(case, triage=False)
        if result.failed:
            key = f"{result.outcome}: {result.signature}"
            # Hypothesis replays each shrunk failure last, so the final entry is the minimal one.
            last[key] = (case, result)
            raise _failure_type(key)(key)

    try:
        probe()
    except BaseException as exc:
        # Only our own failures (one, or a group of them) are findings, already in `last`;
        # anything else (a harness error, an unsatisfiable matrix) must surface.
        if not _only_findings(exc):
            raise
    return [last[key] for key in sorted(last)]


def _only_findings(exc: BaseException) -> bool:
    group = getattr(exc, "exceptions", None)
    if group is not None and not isinstance(exc, ExploreFailure):
        return all(_only_findings(inner) for inner in group)
    return isinstance(exc, ExploreFailure)


def explore_items(parent: pytest.Collector, state: MatrixSession, examples: int) -> Iterator[ExploreItem]:
    """One item per kernel, each searching `examples` cases (--scaledmm-explore)."""
    # A composite profile: each part's kernels over that part's axes.
    composite = bool(state.profile.parts)
    for part in state.profile.leaves:
        for kernel in state.spec.kernels_for(part):
            name = f"explore[{part.name}:{kernel.name}]" if composite else f"explore[{kernel.name}]"
            yield ExploreItem.from_parent(
                parent, name=name, kernel=kernel, state=state, profile=part, examples=examples
            )


class ExploreFound(Exception):
    def __init__(self, records: list[CaseRecord]):
        super().__init__(f"{len(records)} minimal failing case(s)")
        self.records = records


class ExploreItem(pytest.Item):
    """Hypothesis search over one kernel's axes; fails listing the minimal cases it found."""

    def __init__(
        self, *, kernel: KernelSpec, state: MatrixSession, profile: Profile, examples: int, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.kernel = kernel
        self.state = state
        self.profile = profile
        self.examples = examples

    def runtest(self) -> None:
        state = self.state
        environment = state.environment_to_send()
        if environment is not None:
            self.user_properties.append(("scaledmm_env", environment))
        start = time.monotonic()
        found = explore_kernel(state, self.kernel, self.examples, self.profile)
        records = []
        for case, result in found:
            triage = state.triage(case, result)
            if triage:
                result.observations.triage = triage
            record = state.record(case, result)
            record["explore"] = {"kernel": self.kernel.name, "seconds": round(time.monotonic() - start, 3)}
            records.append(record)
        self.user_properties.append(("scaledmm_explore", records))
        if records:
            raise ExploreFound(records)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, ExploreFound):
            lines = [f"hypothesis found {len(excinfo.value.records)} failure signature(s); minimal cases:"]
            for record in excinfo.value.records:
                lines.append(f"  {record['outcome']}: {record['signature']}")
                lines.append(f"    {record['id']}")
                shape = ", ".join(f"{k}={v}" for k, v in record["params"].items())
                lines.append(f"    {shape}")
            return "\n".join(lines)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"scaledmm explore {self.kernel.name}"


def corpus_entry(record: dict, environment: dict | None) -> dict:
    env = environment or {}
    return {
        "outcome": record["outcome"],
        "signature": record["signature"],
        "found": {
            "torch": env.get("torch"),
            "device": env.get("device_name"),
            "arch": env.get("arch"),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
        },
        "params": dict(record["params"]),
    }


def save_corpus(path: Path, entries: Iterable[Mapping[str, Any]]) -> int:
    """Add entries (dicts with outcome, signature, found, params) to the corpus file, keeping those
    already there (validated first); returns how many were new. Each entry's id is recomputed
    from its completed params, so an entry is added once however its params were spelled."""

    path = Path(path)
    rows = [_corpus_row(entry) for entry in read_entries(path)] if path.exists() else []
    known = {row["id"] for row in rows}
    added = 0
    for entry in entries:
        row = _corpus_row(entry)
        if row["id"] not in known:
            known.add(row["id"])
            rows.append(row)
            added += 1
    write_corpus(path, rows)
    return added


def _corpus_row(entry: Mapping[str, Any]) -> dict:

    params = complete_params(entry["params"])
    meta = {k: entry[k] for k in ("outcome", "signature", "found") if k in entry}
    return {"id": case_id(CaseParams.from_json(params)), **meta, "params": params}
