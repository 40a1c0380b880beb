"""Regression tests from a hostile review of the kernel contracts (each failed when written)."""

import sys
from pathlib import Path

import pytest
from direct_run import run_matrix

from matrices import matrix_text
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.spec import parse_spec
from pytest_scaledmm.verdict import outcome as oc

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
MODULE = "review_contract_kernels"
TENSORWISE = {
    "scale_a": ["tensor_0d"],
    "scale_b": ["tensor_0d"],
    "out_dtype": ["bf16"],
    "mode": ["aot_eager"],
    "m": [8],
    "k": [64],
    "n": [16],
}


def test_run_gate_takes_the_looser_slack_flag_that_the_cli_and_the_plugin_pass():
    """`scaledmm gate` and `pytest --scaledmm-baseline` both call run_gate(allow_looser_slack=...):
    a TypeError on every gate."""
    import inspect

    from pytest_scaledmm.reports.gate import run_gate

    assert "allow_looser_slack" in inspect.signature(run_gate).parameters


@pytest.mark.parametrize(
    "entry",
    [
        {"slack": float("nan"), "slack_reason": "because"},
        {"activation": "dynamic", "activation_divisor": float("nan")},
        {"activation": "dynamic", "activation_divisor": float("inf")},
        # A divisor far from the dtype's range makes every element "off the grid": the bound grows
        # to the group's amax and a kernel 10% off passes, with no slack_reason and no gate.
        {"activation": "dynamic", "activation_divisor": 0.001},
        # The matrix's own slack is capped at 16 ("a larger slack lets wrong results pass").
        {"slack": 999999, "slack_reason": "because"},
    ],
)
def test_a_kernel_declaration_that_makes_the_bound_meaningless_is_refused(entry):
    text = matrix_text([{"name": "k", "impl": "planted_kernels:correct", **entry}])
    with pytest.raises(MatrixError):
        parse_spec(Path("matrix.yaml"), text)


def test_a_wrapper_that_forwards_kwargs_is_not_handed_the_harness_only_forms_keyword():
    results = run_matrix(matrix_text([{"name": "w", "impl": f"{MODULE}:kwargs_wrapper"}], TENSORWISE, cases=1))
    assert [r.outcome for _, r in results] == [oc.PASS], [r.detail for _, r in results]


def test_a_prepare_step_that_rewrites_the_callers_weights_in_place_does_not_pass():
    entries = [{"name": "p", "impl": f"{MODULE}:keep", "prepare": f"{MODULE}:doubling_prepare"}]
    results = run_matrix(matrix_text(entries, TENSORWISE, cases=1))
    assert oc.PASS not in [r.outcome for _, r in results]


def test_a_module_that_keeps_its_first_calls_activation_scale_does_not_pass():
    entries = [{"name": "s", "module": f"{MODULE}:stale_scale", "activation": "dynamic"}]
    results = run_matrix(matrix_text(entries, {**TENSORWISE, "value_regime": ["standard", "full_range"]}, cases=2))
    assert oc.PASS not in [r.outcome for _, r in results]


@pytest.mark.parametrize("garbage", ["1000", [1000], 7])
def test_the_gate_never_raises_on_a_kernel_slack_that_is_not_an_object(garbage):
    from reports_factory import case, report

    from pytest_scaledmm.reports.gate import check

    base = report([case("k.1", "PASS")])
    candidate = report([case("k.1", "PASS")])
    candidate["cases"][0].setdefault("extra", {})["kernel_slack"] = garbage
    result = check((Path("base.json"), base), (Path("cand.json"), candidate))  # AttributeError: 'str' ... 'get'
    assert not result.passed
