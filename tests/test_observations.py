"""Outcome.observations: typed fields that a report writes as the record's `extra` object."""

import json

import pytest

from pytest_scaledmm.verdict.outcome import Observations, Outcome

# The `extra` keys in the order the run sets them (pipeline, run, isolate, the AOTInductor
# control, triage, the device): reports keep this order.
EXTRA_ORDER = [
    "changed_inputs",
    "compiled_graphs",
    "compiled_graph_calls",
    "kernel_choice",
    "dynamic_m",
    "kernel_slack",
    "opcheck",
    "run_outcome",
    "isolation",
    "aoti_control",
    "triage",
    "device",
]


def test_extra_is_the_fields_set_in_their_order_and_last_in_the_outcome():
    result = Outcome("PASS")
    assert result.to_json()["extra"] == {}
    result.observations.device = "cuda:1"
    result.observations.compiled_graphs = 0  # zero is a value, not an absence
    result.observations.kernel_choice = {"label": "aten", "kernels": ["extern_kernels.mm"]}
    data = result.to_json()
    assert list(data)[-1] == "extra"
    assert list(data["extra"].items()) == [
        ("compiled_graphs", 0),
        ("kernel_choice", {"label": "aten", "kernels": ["extern_kernels.mm"]}),
        ("device", "cuda:1"),
    ]


def test_every_field_round_trips_through_json_in_the_written_order():
    full = Observations(**{key: {"key": key} for key in EXTRA_ORDER})
    result = Outcome("MISMATCH", "MISMATCH: x", "compiled", observations=full)
    data = json.loads(json.dumps(result.to_json()))
    assert list(data["extra"]) == EXTRA_ORDER
    assert Outcome.from_json(data) == result
    assert Outcome.from_json({k: v for k, v in data.items() if k != "extra"}).observations == Observations()


def test_a_mistyped_field_is_an_error_not_a_new_key():
    with pytest.raises(AttributeError, match="kernel_chioce"):
        Outcome("PASS").observations.kernel_chioce = {}  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        Observations.from_json({"kernel_chioce": {}})
