"""The outcome table is the one place a class is declared: a new informational class, added as
one row, is listed apart by the terminal summary and gets a repro script, with no other change."""

import dataclasses
import json

import pytest
from case_factory import case_params
from reports_factory import report, write

from pytest_scaledmm.matrix.case_params import make_case
from pytest_scaledmm.reports import repro
from pytest_scaledmm.reports.report import signature_groups
from pytest_scaledmm.reports.summary import root_cause_lines, sorted_out
from pytest_scaledmm.verdict import outcome as oc

CURIOUS = "CURIOUS"  # a class this version does not have: informational, never failing


@pytest.fixture
def curious_class(monkeypatch):
    row = dataclasses.replace(oc.outcome_class(oc.LENIENT), name=CURIOUS, abbrev="CURI", shown_apart=None)
    monkeypatch.setattr(oc, "CLASSES", (*oc.CLASSES, row))
    monkeypatch.setitem(oc._CLASS_BY_NAME, CURIOUS, row)
    return row


def _record(outcome, signature, **params):
    case = make_case(case_params(**params))
    return {"id": case.id, "params": case.to_json(), "outcome": outcome, "signature": signature, "layer": "compiled"}


def test_an_informational_class_added_as_a_row_is_listed_apart_in_the_summary(curious_class):
    records = [
        _record(CURIOUS, "curious: compiled is curious"),
        _record(oc.LENIENT, "RuntimeError: eager refuses", m=32),
        _record(oc.MISMATCH, "MISMATCH: off", m=48),
    ]
    failing, tolerated, informational = sorted_out(signature_groups(records), strict_errors=True)
    assert [g["outcome"] for g in failing] == [oc.MISMATCH]
    assert tolerated == []
    assert sorted(g["outcome"] for g in informational) == [CURIOUS, oc.LENIENT]

    lines = root_cause_lines(signature_groups(records), True, replay=lambda cid, *_: f"replay {cid}")
    headings = [line for line in lines if "informational root cause(s)" in line]
    # LENIENT keeps its heading; the new class is headed by its name, after it (table order).
    assert headings == [
        "1 informational root cause(s), compiled accepts invalid input with the reference's result:",
        f"1 informational root cause(s), outcome {CURIOUS}:",
    ]
    curious_at = lines.index(headings[1])
    assert "curious: compiled is curious" in "\n".join(lines[curious_at:])
    assert not any(CURIOUS in line for line in lines[: lines.index(headings[0])])


def test_an_informational_class_added_as_a_row_gets_a_repro_script(curious_class, tmp_path):
    assert repro.reproducible(CURIOUS) and repro.reproducible(oc.LENIENT) and repro.reproducible(oc.XFAIL)
    assert not repro.reproducible(oc.PASS) and not repro.reproducible(oc.FIXED_UPSTREAM)
    assert not repro.reproducible("NOT_A_CLASS")

    record = _record(CURIOUS, "curious: compiled is curious")
    path = write(tmp_path / "report.json", report([record]))
    scripts = repro.scripts_from_report(path, tmp_path / "repro")
    assert len(scripts) == 1 and scripts[0].is_file()
    index = json.loads((tmp_path / "repro" / "index.json").read_text())
    assert [entry["outcome"] for entry in index.values()] == [CURIOUS]
