"""The isolated child's protocol (isolate.py): each message a frozen record, pickled over the pipe.

The parent sends `Setup` once, then one request per case (`RunCase`), triage rung (`RunRung`) or
AOTInductor control (`RunControl`); a request carries its case as JSON (CaseParams.to_json), the
form every boundary of the package uses. The child answers `Ready` once set up, then per request
any number of `SideMade` (each side's evidence as it is made) and one `Answer` or `Failed`.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..matrix.case_params import Case
from ..verdict.case_axes import CaseParams


@dataclass(frozen=True)
class Setup:
    """What the child runs with: the run's context without callables, the kernels by reference,
    the hook kernels whose spec takes the loaded callable, and the modules that register modes
    and runners."""

    ctx: Any
    refs: dict[str, str]
    hooked: frozenset[str]
    extensions: tuple[str, ...]


Request = TypeVar("Request", bound="CaseRequest")


@dataclass(frozen=True)
class CaseRequest:
    case_id: str
    params: dict[str, Any]

    @classmethod
    def of(cls: type[Request], case: Case, **rest: Any) -> Request:
        return cls(case.id, case.params.to_json(), **rest)

    def case(self) -> Case:
        return Case(self.case_id, CaseParams.from_json(self.params))


@dataclass(frozen=True)
class RunCase(CaseRequest):
    keep: tuple[int, ...] | None = None  # run.run_case's: the sequence steps kept (shrink.py)


@dataclass(frozen=True)
class RunRung(CaseRequest):
    rung: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunControl(CaseRequest):
    pass


@dataclass(frozen=True)
class Ready:
    """Set up: the child takes requests from now on."""

    pid: int


@dataclass(frozen=True)
class SideMade:
    """One side's evidence (Outcome's SideEvidence as JSON), sent before the process may die."""

    side: str
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    """The harness itself failed in the child (a traceback, not a case's outcome)."""

    traceback: str

    @classmethod
    def now(cls) -> Failed:
        """The exception being handled."""
        return cls(traceback.format_exc())


@dataclass(frozen=True)
class Answer:
    """The request's answer: an outcome's JSON, a rung's or a control's dict."""

    payload: Any
