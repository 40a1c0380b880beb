"""Where a report's evidence came from, as compare, gate and the terminal say it: cases that ran
more than once (each counts by its worst run)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..records import CaseRecord


def repeated_cases(cases: Iterable[CaseRecord]) -> list[CaseRecord]:
    """The records of cases that ran more than once (a record with `runs`)."""
    return [record for record in cases if isinstance(record.get("runs"), list) and len(record["runs"]) > 1]


def repeated_note(cases: Iterable[CaseRecord]) -> str | None:
    """One line for the cases that ran more than once, with one of them and its runs; None when
    every case ran once."""
    repeated = repeated_cases(cases)
    if not repeated:
        return None
    # A case whose runs differ is the one worth showing.
    example = min(repeated, key=lambda r: (len({str(run.get("outcome")) for run in r["runs"]}) == 1, r["id"]))
    runs = ", then ".join(str(run.get("outcome")) for run in example["runs"])
    return f"{len(repeated)} case(s) ran more than once: each counts by its worst run (e.g. {example['id']}: {runs})"


def repeated_notes(reports: Iterable[tuple[str, Mapping]]) -> list[str]:
    """The repeated-cases line of each (label, report) that has one."""
    notes = []
    for label, report in reports:
        note = repeated_note(report.get("cases") or [])
        if note:
            notes.append(f"{label}: {note}")
    return notes
