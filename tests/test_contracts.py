"""The kernel contracts beside the one-function call: weights built once by a prepare step (a
tensor-subclass weight), a module factory, and a kernel that quantises its high-precision
activation itself; each right kernel passes and its planted wrong twin is caught, a declaration
that makes the bound meaningless is refused, and so are kernels at the contracts' edges
(tests/planted_contract_edge_kernels.py)."""

import sys
from pathlib import Path

import pytest
import torch
from case_factory import case_record
from direct_run import run_matrix
from torch_facts import eager_takes_half_tensorwise_scales

from matrices import IN_PROCESS, matrix_text
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.spec import parse_spec
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.reference import reference

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import planted_contract_kernels as planted  # noqa: E402

MODULE = "planted_contract_kernels"
ROWWISE = {
    "scale_a": ["rowwise"],
    "scale_b": ["rowwise"],
    "out_dtype": ["bf16"],
    "mode": ["aot_eager"],
    "k": [64],
    "n": [32],
}


def outcomes(results) -> dict:
    found: dict = {}
    for case, result in results:
        found.setdefault(case.params.kernel, []).append(result)
    return found


def kernel(name, **declared) -> dict:
    return {"name": name, **declared}


def test_a_tensor_subclass_weight_is_built_once_outside_compile_and_its_wrong_twin_is_caught():
    pytest.importorskip("torchao")
    entries = [
        kernel("subclass", impl=f"{MODULE}:linear", prepare=f"{MODULE}:subclass_weight", activation="dynamic"),
        kernel(
            "subclass_reversed",
            impl=f"{MODULE}:linear",
            prepare=f"{MODULE}:subclass_weight_reversed_scales",
            activation="dynamic",
        ),
    ]
    text = matrix_text(entries, {**ROWWISE, "m": [4, 17], "value_regime": ["standard", "full_range"]}, cases=8)
    found = outcomes(run_matrix(text))
    assert {r.outcome for r in found["subclass"]} == {oc.PASS}, [r.detail for r in found["subclass"]]
    assert {r.outcome for r in found["subclass_reversed"]} == {oc.MISMATCH}
    # The activation maps exactly onto the case's data on full_range: the bound says so.
    bounds = [r.errors["eager"]["bound"]["activation"] for r in found["subclass"]]
    assert "exact" in bounds


def test_a_module_factory_is_compiled_as_a_module_and_its_bf16_scale_twin_is_caught():
    entries = [
        kernel("layer", module=f"{MODULE}:scaled_linear"),
        kernel("layer_bf16_scale", module=f"{MODULE}:scaled_linear_bf16_scale"),
    ]
    axes = {**ROWWISE, "out_dtype": ["fp32"], "m": [4, 16], "value_regime": ["standard", "real_scales"]}
    found = outcomes(run_matrix(matrix_text(entries, axes, cases=8)))
    assert {r.outcome for r in found["layer"]} == {oc.PASS}, [r.detail for r in found["layer"]]
    assert oc.MISMATCH in {r.outcome for r in found["layer_bf16_scale"]}


def test_a_dynamic_activation_kernel_is_held_to_a_sound_bound_and_its_whole_tensor_twin_is_caught():
    entries = [
        kernel("per_token", impl=f"{MODULE}:dynamic_per_token", activation="dynamic"),
        kernel("per_token_whole", impl=f"{MODULE}:dynamic_per_token_whole_tensor", activation="dynamic"),
    ]
    axes = {**ROWWISE, "m": [4, 17], "value_regime": ["standard", "full_range", "real_scales"]}
    found = outcomes(run_matrix(matrix_text(entries, axes, cases=12)))
    assert {r.outcome for r in found["per_token"]} == {oc.PASS}, [r.detail for r in found["per_token"]]
    assert oc.MISMATCH in {r.outcome for r in found["per_token_whole"]}


def test_the_activation_of_a_dynamic_case_is_exact_and_the_reference_is_of_it():
    params = case_record(kernel="k", scale_a="rowwise", scale_b="rowwise", m=8, k=64, activation="dynamic")
    inputs = make_inputs(params, 3, "cpu")
    exact = inputs.a.double() * inputs.scale_a.double()
    assert torch.equal(inputs.activation.double(), exact)
    # Each token holds the dtype's largest value times a power of two: amax / 448 is exact.
    amax = inputs.a.double().abs().amax(dim=1)
    assert torch.all(amax == 448)
    assert torch.all(torch.frexp(inputs.scale_a).mantissa.abs() == 0.5)
    ref = reference(params, inputs)
    assert ref.bound["activation"] == "exact"
    # An inexact quantiser (torchao's int8 divides by 127.5) is bounded by its rounding instead.
    int8 = params.with_values(dtype_a="int8", dtype_b="int8", activation_divisor=127.5)
    assert reference(int8, make_inputs(int8, 3, "cpu")).bound["activation"] == "requantised"


def test_a_prepare_step_runs_once_per_case_and_the_serving_loop_keeps_its_weight():
    planted.PREPARED.clear()
    entries = [kernel("counted", impl=f"{MODULE}:counted_apply", prepare=f"{MODULE}:counted_weight")]
    results = run_matrix(matrix_text(entries, {**ROWWISE, "m": [4]}, cases=1))
    assert [r.outcome for _, r in results] == [oc.PASS]
    # Once for the case (its serving loop keeps that weight); each step of its call sequence but
    # the last (the first shape again, on that weight) is another layer, with a weight of its own.
    assert planted.PREPARED[0] == (64, 32)
    steps = results[0][1].observations.sequence["steps"]
    assert len(planted.PREPARED) == 1 + sum(step["kind"] != "back" for step in steps)
    # The weight is a tuple: nothing can be written into it in place, and the record says so.
    (said,) = [r.observations.not_checked for _, r in results]
    assert said == [
        "call with new values in the first call's tensors: an argument is not a plain tensor"
        " (a weight object, a tuple of scales)"
    ]


def test_a_prepare_step_that_raises_is_the_kernels_failure():
    entries = [kernel("broken", impl=f"{MODULE}:counted_apply", prepare=f"{MODULE}:raising_weight")]
    results = run_matrix(matrix_text(entries, {**ROWWISE, "m": [4]}, cases=1))
    (result,) = [r for _, r in results]
    assert result.outcome == oc.REFUSED
    assert "prepare step raised" in result.detail


@pytest.mark.parametrize(
    "entry,key,message",
    [
        ({"name": "k", "prepare": "m:p"}, "kernels[0].prepare", "a prepare step needs impl"),
        ({"name": "k", "impl": "m:f", "module": "m:g"}, "kernels[0].module", "a module kernel has no impl"),
        ({"name": "k", "module": "m:g", "prepare": "m:p"}, "kernels[0].module", "a module kernel has no prepare"),
        (
            {"name": "k", "impl": "m:f", "pair_rules": [{"scale_pair": ["rowwise", "rowwise"]}]},
            "kernels[0].pair_rules[0]",
            "is not valid under any of the given schemas",
        ),
        ({"name": "torchao_int8_weight", "impl": "m:f"}, "kernels[0].name", "is a packed kernel's name"),
        ({"name": "k", "impl": "m:f", "slack": 2}, "kernels[0]", "'slack_reason' is a dependency of 'slack'"),
        (
            {"name": "k", "impl": "m:f", "slack": 0.5, "slack_reason": "tight"},
            "kernels[0].slack",
            "less than the minimum",
        ),
        ({"name": "k", "impl": "m:f", "activation": "static"}, "kernels[0].activation", "is not one of"),
    ],
)
def test_a_bad_contract_declaration_names_the_key(matrix_project, entry, key, message):
    matrix_project.write_matrix(matrix_text([entry]))
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", *IN_PROCESS)
    assert result.ret == 4
    text = result.stderr.str() + result.stdout.str()
    assert key in text and message in text, text
    assert "Traceback" not in text


def test_a_kernels_own_slack_is_recorded_and_a_looser_one_fails_the_gate(matrix_project):
    import json

    from pytest_scaledmm.reports.gate import check

    def run(slack, report):
        entry = {"name": "mine", "impl": "planted_kernels:correct"}
        if slack:
            entry.update(slack=slack, slack_reason="rounds its epilogue twice")
        matrix_project.write_matrix(matrix_text([entry]))
        matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", report, *IN_PROCESS)
        return json.loads((matrix_project.path / report).read_text())

    base, looser = run(None, "base.json"), run(2, "loose.json")
    (record,) = looser["cases"]
    assert record["extra"]["kernel_slack"] == {"slack": 2, "reason": "rounds its epilogue twice"}
    assert record["errors"]["eager"]["bound"]["slack"] == 2.0
    assert looser["matrix"]["tolerance"]["kernels"]["mine"]["slack"] == 2
    refused = check((Path("base.json"), base), (Path("loose.json"), looser))
    assert not refused.passed
    assert any(
        "kernel mine's tolerance slack loosened from 1 to 2 (reason given: rounds its epilogue twice)" in r
        for r in refused.reasons
    ), refused.reasons
    accepted = check((Path("base.json"), base), (Path("loose.json"), looser), allow_looser_slack=True)
    assert accepted.passed, accepted.reasons
    assert any("loosened" in note for note in accepted.notes)


def test_repro_scripts_of_contract_kernels_reproduce_in_a_fresh_process(matrix_project, pytester):
    """The script builds the weights once as the run did (prepare step, module factory) and
    hands the dynamic kernel its activation: each reproduces the MISMATCH without the plugin."""
    import json
    import subprocess

    pytest.importorskip("torchao")
    entries = [
        kernel(
            "subclass_reversed",
            impl=f"{MODULE}:linear",
            prepare=f"{MODULE}:subclass_weight_reversed_scales",
            activation="dynamic",
        ),
        kernel("layer_bf16_scale", module=f"{MODULE}:scaled_linear_bf16_scale"),
        kernel("per_token_whole", impl=f"{MODULE}:dynamic_per_token_whole_tensor", activation="dynamic"),
    ]
    axes = {**ROWWISE, "out_dtype": ["fp32"], "m": [16], "value_regime": ["real_scales"]}
    matrix_project.write_matrix(matrix_text(entries, axes, cases=3))
    result = matrix_project.run(
        "--scaledmm-matrix",
        "matrix.yaml",
        "--scaledmm-repro-dir",
        "repros",
        "--scaledmm-report",
        "report.json",
        *IN_PROCESS,
    )
    assert result.ret == 1
    index = json.loads((pytester.path / "repros" / "index.json").read_text())
    assert {entry["case"].split(".")[0] for entry in index.values()} == {e["name"] for e in entries}
    without_plugin = (
        "import runpy, sys; sys.modules['pytest_scaledmm'] = None; "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    for name in index:
        done = subprocess.run(
            [sys.executable, "-c", without_plugin, str(pytester.path / "repros" / name)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=pytester.path,
        )
        assert done.returncode == 10, done.stdout + done.stderr
        assert "REPRODUCED" in done.stdout


def test_a_kernel_can_ask_for_the_case_forms(matrix_project):
    """`forms` is passed to a kernel whose signature takes it: (1, 1) is then tensorwise, not one
    128x128 block."""
    (matrix_project.path / "formkernels.py").write_text(
        "import torch\n"
        "SEEN = []\n"
        "def fn(a, b, scale_a, scale_b, *, bias=None, out_dtype, forms):\n"
        "    assert forms == ('tensor_1x1', 'tensor_0d'), forms\n"
        "    return torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)\n"
    )
    axes = {"scale_a": ["tensor_1x1"], "scale_b": ["tensor_0d"], "out_dtype": ["bf16"]}
    matrix_project.write_matrix(matrix_text([kernel("formed", impl="formkernels:fn")], axes, cases=1))
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    assert [c["outcome"] for c in matrix_project.report()["cases"]] == [oc.PASS], result.stdout.str()[-2000:]


def test_pair_rules_and_scale_layouts_declare_what_a_wrapper_takes():
    """A wrapper of torch._scaled_mm declares the pair that wants bf16 out and the scale layouts
    it takes: the refusals outside them are UNSUPPORTED, not REFUSED."""
    entries = [
        kernel(
            "wrapper",
            impl="planted_kernels:correct",
            scale_layouts=["contiguous"],
            pair_rules=[{"scale_pair": ["rowwise", "rowwise"], "out_dtypes": ["bf16"], "bias": False}],
        )
    ]
    from pytest_scaledmm.matrix.spec import parse_spec
    from pytest_scaledmm.verdict.refusals import declared_breaks

    spec = parse_spec(Path("matrix.yaml"), matrix_text(entries))
    (declared,) = spec.kernels
    base = case_record(scale_a="rowwise", scale_b="rowwise", m=4)
    assert declared_breaks(declared, base) == []
    assert [key for key, _ in declared_breaks(declared, base.with_values(out_dtype="fp32", bias=True))] == [
        "pair_rules",
        "pair_rules",
    ]
    assert [key for key, _ in declared_breaks(declared, base.with_values(scale_layout="noncontiguous"))] == [
        "scale_layouts"
    ]
    assert declared_breaks(declared, base.with_values(scale_a="tensor_0d", out_dtype="fp32")) == []


def test_hook_kernels_declare_the_contracts_with_callables(matrix_project):
    pytest.importorskip("torchao")
    (matrix_project.path / "conftest.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "import planted_contract_kernels as k\n"
        "from pytest_scaledmm.matrix.kernels import Kernel\n"
        "def pytest_scaledmm_kernels(config):\n"
        "    return [Kernel('hook_weight', fn=k.linear, prepare=k.subclass_weight, activation='dynamic'),\n"
        "            Kernel('hook_layer', module=k.scaled_linear)]\n"
    )
    axes = {**ROWWISE, "m": [4]}
    matrix_project.write_matrix(matrix_text(["hook_weight", "hook_layer"], axes, cases=2))
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    outcomes = {c["params"]["kernel"]: c["outcome"] for c in matrix_project.report()["cases"]}
    assert outcomes == {"hook_weight": oc.PASS, "hook_layer": oc.PASS}, result.stdout.str()[-3000:]


def test_a_packed_kernel_without_its_library_is_skipped_with_the_install_command(monkeypatch):
    from importlib import metadata

    from pytest_scaledmm.matrix.packs import torchao as pack

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    results = run_matrix(matrix_text(["torchao_fp8_inference_tensorwise"], cases=1))
    assert [(r.outcome, r.detail) for _, r in results] == [(oc.SKIPPED, f"torchao is not installed: {pack.INSTALL}")]
    monkeypatch.setattr(metadata, "version", lambda name: "0.9.0")
    results = run_matrix(matrix_text(["torchao_fp8_inference_tensorwise"], cases=1))
    assert [r.detail for _, r in results] == [f"torchao 0.9.0 is older than {pack.MIN_VERSION}: {pack.INSTALL}"]


# -- declarations, wrappers and prepare steps at the edges of the contracts ------------------------


EDGE_MODULE = "planted_contract_edge_kernels"


TENSORWISE = {
    "scale_a": ["tensor_0d"],
    "scale_b": ["tensor_0d"],
    "out_dtype": ["bf16"],
    "mode": ["aot_eager"],
    "m": [8],
    "k": [64],
    "n": [16],
}


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
    results = run_matrix(matrix_text([{"name": "w", "impl": f"{EDGE_MODULE}:kwargs_wrapper"}], TENSORWISE, cases=1))
    assert [r.outcome for _, r in results] == [oc.PASS], [r.detail for _, r in results]


def test_a_prepare_step_that_rewrites_the_callers_weights_in_place_does_not_pass():
    entries = [{"name": "p", "impl": f"{EDGE_MODULE}:keep", "prepare": f"{EDGE_MODULE}:doubling_prepare"}]
    results = run_matrix(matrix_text(entries, TENSORWISE, cases=1))
    assert oc.PASS not in [r.outcome for _, r in results]


def test_a_module_that_keeps_its_first_calls_activation_scale_does_not_pass():
    entries = [{"name": "s", "module": f"{EDGE_MODULE}:stale_scale", "activation": "dynamic"}]
    results = run_matrix(matrix_text(entries, {**TENSORWISE, "value_regime": ["standard", "full_range"]}, cases=2))
    assert oc.PASS not in [r.outcome for _, r in results]


def test_the_torchao_pack_takes_fp32_scales_as_its_callers_pass_them():
    """bf16 and fp16 scales reach torchao's float8 paths only through a wrapper's error path
    (torch._scaled_mm refuses them): the pack declares fp32, so such a case is a boundary case
    refused alike or tolerated, never a failure of the kernel, and fp32 scales pass."""
    pytest.importorskip("torchao")
    from pytest_scaledmm.matrix.packs import torchao as pack

    fp8 = [name for name, entry in pack.KERNELS.items() if entry["family"] == "fp8"]
    assert fp8 and all(pack.KERNELS[name]["scale_dtypes"] == ["fp32"] for name in fp8)
    axes = {
        "scale_a": ["tensor_0d"],
        "scale_b": ["tensor_0d"],
        "out_dtype": ["bf16"],
        "mode": ["aot_eager"],
        "scale_dtype": ["fp32", "bf16", "fp16"],
        "m": [16],
        "k": [128],
        "n": [128],
    }
    by_dtype: dict = {}
    for case, result in run_matrix(matrix_text(["torchao_fp8_inference_tensorwise"], axes, cases=6)):
        params = case.params
        by_dtype.setdefault(params.scale_dtype, set()).add((params.purpose or "valid", result.outcome))
    assert by_dtype["fp32"] == {("valid", oc.PASS)}, by_dtype
    # Where this torch's eager op takes them, its compiled side alone refuses: torch's own
    # discrepancy, still no failure of the kernel's values.
    allowed = {oc.UNSUPPORTED, oc.BOUNDARY_PARITY}
    if eager_takes_half_tensorwise_scales():
        allowed.add(oc.COMPILE_ONLY_ERROR)
    for dtype in ("bf16", "fp16"):
        assert {purpose for purpose, _ in by_dtype[dtype]} == {"boundary"}, by_dtype
        assert not {outcome for _, outcome in by_dtype[dtype]} - allowed, by_dtype
