"""The session's own seconds: when each process of the run was configured, how long it spent
generating the cases, and when its first case began; the report's `session.phases`. What a run
spends before its cases and after them is read here, not guessed from the wall."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

PROPERTY = "scaledmm_timeline"  # the user property the first item of a worker carries


@dataclass
class ProcessTimeline:
    process: str  # the xdist worker's name, or "main": the process that owns the run
    configured: float = field(default_factory=time.time)  # epoch seconds
    generation_s: float | None = None
    cases_from: str | None = None  # "generated here", or "controller" (read from its file)
    first_case: float | None = None  # epoch seconds

    def generated(self, seconds: float) -> None:
        if self.generation_s is None:
            self.generation_s = round(seconds, 6)

    def first_case_begins(self) -> dict | None:
        """Mark the first case's start; the timeline to send with it (None after the first)."""
        if self.first_case is not None:
            return None
        self.first_case = time.time()
        return asdict(self)


def _since(start: float, moment: object) -> float | None:
    return round(moment - start, 3) if isinstance(moment, (int, float)) else None


def phases_block(started: float, own: ProcessTimeline, others: dict[str, dict], last_record: float | None) -> dict:
    """`session.phases`: seconds since the run's start (its owner's configure) for each process,
    and when the last record came (what follows it is teardown and the report)."""
    processes = {}
    for timeline in [asdict(own), *others.values()]:
        processes[str(timeline.get("process") or "main")] = {
            "configured_s": _since(started, timeline.get("configured")),
            "generation_s": timeline.get("generation_s"),
            "cases_from": timeline.get("cases_from"),
            "first_case_s": _since(started, timeline.get("first_case")),
        }
    return {"processes": processes, "last_record_s": _since(started, last_record)}
