"""The collection of a matrix run: the matrix file, one item per case, and the record every
case item ends with (the safety net gives one to a phase that ended without it)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..execution.triage import headline
from ..matrix.case_params import ordered_params
from ..records import CaseRecord, is_case_record
from ..reports.printable import printable
from ..verdict import outcome as oc
from .explore import explore_items
from .signal_guard import Terminated
from .timeline import PROPERTY as TIMELINE_PROPERTY

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from ..matrix.case_params import Case
    from .session import MatrixSession


class MatrixFile(pytest.File):
    def __init__(self, *, state: MatrixSession, **kwargs: Any) -> None:  # kwargs: pytest.File's
        super().__init__(**kwargs)
        self.state = state

    def collect(self) -> Iterator[pytest.Item]:
        state = self.state
        if state.settings.explore is not None:
            yield from explore_items(self, state, state.settings.explore.examples)
            return
        for case in state.cases():
            yield CaseItem.from_parent(self, name=case.id, case=case, state=state)


class CaseFailure(Exception):
    def __init__(self, record: CaseRecord):
        super().__init__(record.get("signature"))
        self.record = record


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, state: MatrixSession, **kwargs: Any) -> None:  # kwargs: pytest.Item's
        super().__init__(**kwargs)
        self.case = case
        self.state = state
        self.add_marker("scaledmm")

    def runtest(self) -> None:
        state = self.state
        start = time.perf_counter()
        try:
            timeline = state.timeline.first_case_begins()
            if timeline is not None and state.settings.worker:
                self.user_properties.append((TIMELINE_PROPERTY, timeline))
            environment = state.environment_to_send()
            if environment is not None:
                self.user_properties.append(("scaledmm_env", environment))
            result = state.run(self.case)
            # The case's whole time in this process: what the parts above do not hold is harness.
            result.timing["case_s"] = round(time.perf_counter() - start, 6)
            result.observations.device = state.context().device  # which GPU, under xdist
            record = state.apply_known_failures(state.record(self.case, result))
        except Exception as exc:  # the harness, not the case: still a record of this case
            record = state.harness_error_record(self.case, exc)
            self.user_properties.append(("scaledmm", record))
            raise CaseFailure(record) from exc
        self.user_properties.append(("scaledmm", record))
        # A signal that arrived while the kernel ran in this process, and that the kernel or the
        # runner swallowed, still ends the session (this case's record goes with it).
        if state.signalled == "SIGTERM":
            raise Terminated()
        if state.signalled == "SIGINT":
            raise KeyboardInterrupt()
        known = oc.outcome_class(record["outcome"])
        status = known.pytest_status if known is not None else "failed"  # an unknown class fails
        if known is not None and known.fails and not known.fails_when(state.settings.strict_errors):
            return  # tolerated: it passes, and the terminal shows it apart (pytest_report_teststatus)
        if status == "xfailed":
            pytest.xfail(f"{record['detail']}: {record['signature']}")
        if status == "skipped":
            # A refusal says which; a case not applicable here says why.
            signature = record.get("signature")
            pytest.skip(f"{record['outcome']}: {signature}" if signature else record.get("detail") or "")
        if status == "failed":
            raise CaseFailure(record)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, CaseFailure):
            text = format_failure(excinfo.value.record, self.state.replay_command(self.case.id, excinfo.value.record))
            return "\n".join(printable(line) for line in text.splitlines())  # the kernel's text is data
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"scaledmm {self.case.id}"


def missing_record(item: CaseItem, call: pytest.CallInfo[None], report: pytest.TestReport) -> CaseRecord | None:
    state = item.state
    if report.when == "setup" and report.passed:
        return None  # the call phase records the case
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return state.record(item.case, oc.Outcome(oc.SKIPPED, None, None, f"skipped before it ran: {reason}"))
    if call.excinfo is not None:
        return state.harness_error_record(item.case, call.excinfo.value, report.when)
    record = state.harness_error_record(
        item.case, f"the {report.when} phase ended without a record of the case", report.when
    )
    if report.passed:  # a case without a verdict never passes
        report.outcome = "failed"
        report.longrepr = record["detail"]
    return record


def user_property(properties: Iterable[tuple[str, object]], name: str) -> dict | None:
    """What a case item put in its user_properties under `name` (its environment)."""
    value = dict(properties).get(name)
    return value if isinstance(value, dict) else None


def record_property(properties: Iterable[tuple[str, object]]) -> CaseRecord | None:
    """The case's record a case item put in its user_properties, None where there is none."""
    value = dict(properties).get("scaledmm")
    return value if is_case_record(value) else None


def format_failure(record: CaseRecord, replay: str | None = None) -> str:
    lines = [headline(record)]
    if record.get("layer"):
        lines.append(f"layer: {record['layer']}")
    if record.get("detail"):
        lines.append(f"detail: {record['detail']}")
    params = ", ".join(f"{k}={v}" for k, v in ordered_params(record["params"]).items())
    lines.append(f"params: {params}")
    for side, error in (("eager", record.get("eager_error")), ("compiled", record.get("compiled_error"))):
        if error:
            message = error.get("message")
            first = message.splitlines()[0] if message else ""
            lines.append(f"{side} raised {error.get('type')}: {first}")
            source = error.get("source")
            if isinstance(source, str) and source:
                lines.append(f"  in user code: {source}")
    if replay:
        lines.append(f"replay: {replay}")
    return "\n".join(lines)
