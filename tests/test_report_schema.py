"""The report's JSON Schema is derived from its types (records.py): a field declared there is
checked when a report is read, with what `Annotated` adds; a type the derivation cannot state is
an error at import, never a field left unchecked."""

from __future__ import annotations

from typing import Annotated, Any, Required, TypedDict

import pytest
from reports_factory import case, report, write

from pytest_scaledmm.cli import main
from pytest_scaledmm.records import NON_FINITE_PATTERN, Check, Count, Number, Rest, Slot
from pytest_scaledmm.reports.report_schema import REPORT_SCHEMA, first_problem, schema_of


class Inner(TypedDict, total=False):
    ok: bool
    ratio: Number


class Sample(TypedDict, total=False):
    name: Required[Annotated[str, Check(min_length=1)]]
    count: Count
    inner: Inner | None
    tags: list[str]
    free: dict[str, Any]
    rows: dict[str, Annotated[Inner, Rest(list[int])]]
    params: Annotated[dict[str, Any], Slot("params")]
    started: str | float | None
    level: Annotated[Required[int], Check(minimum=0)]


def test_each_kind_of_annotation_becomes_its_schema():
    schema = schema_of(Sample, {"params": {"type": "object", "required": ["kernel"]}})
    # Required through Annotated, under postponed annotations (this module's) too.
    assert schema["type"] == "object" and schema["required"] == ["name", "level"]
    fields = schema["properties"]
    assert fields["name"] == {"type": "string", "minLength": 1}
    assert fields["count"] == {"type": "integer", "minimum": 0}
    # A TypedDict or null; the number written as a string only as inf, -inf or nan.
    assert fields["inner"]["type"] == ["object", "null"]
    assert fields["inner"]["properties"]["ratio"] == {"type": ["number", "string"], "pattern": NON_FINITE_PATTERN}
    assert fields["tags"] == {"type": "array", "items": {"type": "string"}}
    assert fields["free"] == {"type": "object"}
    assert fields["rows"]["additionalProperties"]["additionalProperties"] == {
        "type": "array",
        "items": {"type": "integer"},
    }
    assert fields["params"] == {"type": "object", "required": ["kernel"]}
    assert fields["started"] == {"type": ["string", "number", "null"]}


@pytest.mark.parametrize(
    "annotation",
    [
        tuple[int, int],
        set[str],
        Annotated[int, "a note"],
        Inner | list[int],
        Count | float,  # the minimum would hold the float too
        Annotated[int, Check(pattern="^x")],  # a pattern checks no number
        dict[int, str],  # a JSON object's keys are strings
    ],
)
def test_an_annotation_the_schema_cannot_state_is_refused(annotation):
    class Odd(TypedDict):
        value: Any

    Odd.__annotations__["value"] = annotation
    with pytest.raises(TypeError):
        schema_of(Odd, {})


def test_the_report_schema_holds_every_declared_field():
    record = REPORT_SCHEMA["properties"]["cases"]["items"]
    assert record["required"] == ["id", "outcome", "params"]
    assert "kernel" in record["properties"]["params"]["required"]  # the axes' slot, filled
    groups = REPORT_SCHEMA["properties"]["signatures"]["items"]["properties"]
    assert groups["count"] == {"type": "integer", "minimum": 0}
    shard = REPORT_SCHEMA["properties"]["shard"]
    assert shard["required"] == ["index", "count", "total_cases", "total_ids_sha256"]
    assert shard["properties"]["index"] == {"type": ["integer", "null"], "minimum": 1}


@pytest.mark.parametrize(
    "where, value, wanted",
    [
        (("signatures", 0, "count"), "3", "key 'signatures[0].count' must be a whole number, not a string"),
        (("cases", 0, "explore"), [], "key 'cases[0].explore' must be an object, not an array"),
        (("cases", 0, "runs"), [{"signature": None}], "key 'cases[0].runs[0].outcome' is missing"),
        (("environment", "sm_count"), 1.5, "key 'environment.sm_count' must be a whole number or null"),
        (("signatures", 0, "outcomes", "PASS"), -1, "key 'signatures[0].outcomes.PASS' is -1, below 0"),
        # `$` would match before the line break.
        (("cases", 0, "outcome"), "PASS\n", "key 'cases[0].outcome' is 'PASS\\n', not an outcome class name"),
        (("cases", 0, "timing", "eager_s"), "inf\n", "key 'cases[0].timing.eager_s' is 'inf\\n', not a number"),
    ],
)
def test_a_field_declared_only_as_a_type_is_checked_when_read(tmp_path, capsys, where, value, wanted):
    data = report([case("p1", "PASS"), case("m1", "MISMATCH", "MISMATCH: off")])
    data["cases"][0]["timing"] = {"eager_s": 0.1}
    assert first_problem(data) is None  # as the plugin writes it
    node = data
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    assert wanted in (first_problem(data) or "")
    crafted = write(tmp_path / "crafted.json", data)
    assert main(["compare", str(crafted)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{crafted}: {wanted}" in err


def test_a_whole_number_beyond_a_float_is_infinite_to_the_gate(tmp_path, capsys):
    """JSON holds integers of any size: a ratio or a slack of 10**400 is infinite where the gate
    compares it (not proven, a looser slack), never an OverflowError."""
    baseline = report([case("p1", "PASS"), case("p2", "PASS")])
    candidate = report([case("p1", "PASS"), case("p2", "PASS")])
    candidate["cases"][0]["errors"]["eager"]["ratio"] = 10**400
    candidate["matrix"]["tolerance"] = {"slack": 10**400}
    argv = ["gate", "--baseline", str(write(tmp_path / "b.json", baseline))]
    assert main([*argv, "--candidate", str(write(tmp_path / "c.json", candidate))]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "p1" in out, out
