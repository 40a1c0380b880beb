"""The input space a matrix leaves open: axes it leaves out take the whole production range, M
the token counts a server meets. Each planted kernel below is wrong in one dimension a synthetic
matrix never reached; the README's matrix as written and a matrix that lists only kernels find
each, and the same cases of the `correct` kernel pass."""

from pathlib import Path

import planted_state_kernels
import pytest
import yaml

from matrices import IN_PROCESS
from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.spec import parse_spec
from pytest_scaledmm.verdict import outcome as oc


def readme_matrix(entry: dict) -> dict:
    """The README's "your own kernel in five lines" matrix, its kernel line replaced by `entry`."""
    return {
        "version": 1,
        "kernels": [{**entry, "scale_forms": ["tensor_0d", "tensor_1d"]}],
        "axes": {"out_dtype": ["bf16", "fp16"], "mode": ["eager", "aot_eager", "inductor"], "m": [1, 16]},
        "profiles": {"default": {"cases": 60}},
    }


def kernels_only(entry: dict) -> dict:
    return {"version": 1, "kernels": [entry], "profiles": {"default": {"cases": 60}}}


MATRICES = {"readme": readme_matrix, "kernels-only": kernels_only}

# Planted kernel -> the cases that can show its bug (the generator must draw some).
PLANTED = {
    "k_tail_of_32_dropped": lambda p: p.k > 32 and p.k % 32 != 0,
    "stale_second_m_tile": lambda p: p.m > 128,
    "shifted_last_n_tile": lambda p: p.n > 64 and p.n % 64 != 0,
    "square_fast_path": lambda p: p.m == p.n > 1,
    "half_scale_bits": lambda p: p.scale_dtype != "fp32",
    "bias_promotes_output": lambda p: p.bias and p.bias_dtype == "fp32" and p.out_dtype != "fp32",
    "sanitizes_operands": lambda p: p.special_operand != "none",
    "sanitizes_weight": lambda p: "b" in p.special_operand.partition("_")[2],
    # Data pointers are not traceable (a compiled side fails on them): the eager cases show it.
    "caches_weight_by_pointer": lambda p: p.mode == "eager" and p.k > 0 and p.n > 0,
    # The eager side's call at 3 x M outgrows the first M's tile.
    "tile_config_cached_without_m": lambda p: 6 <= p.m <= 341 and p.k > 0 and p.n > 0,
    # Caches keyed on part of the call (tests/planted_state_kernels.py): a later call of the case's
    # sequence at a larger K, or in another output dtype, meets what the first call left.
    "planted_state_kernels:k_split_keyed_on_n": lambda p: p.k > 0 and p.n > 0,
    "planted_state_kernels:output_buffer_per_shape": lambda p: p.k > 0 and p.n > 0 and p.m > 0,
    # The sequence's step that adds or drops the bias at the first call's weight shape.
    "planted_state_kernels:stale_epilogue_per_weight_shape": lambda p: p.k > 0 and p.n > 0 and p.m > 0,
}
# What the failing case's record must say, where the class of failure alone would not show it.
SIGNATURES = {
    "caches_weight_by_pointer": "call with new values in the first call's tensors",
    "tile_config_cached_without_m": "call at another M after the first",
    "planted_state_kernels:k_split_keyed_on_n": "later call of a sequence",
    "planted_state_kernels:output_buffer_per_shape": "later call of a sequence",
    "planted_state_kernels:stale_epilogue_per_weight_shape": "later call of a sequence (the bias added or dropped",
}


def _cases(document: dict):
    spec = parse_spec(Path("matrix.yaml"), yaml.safe_dump(document, sort_keys=False))
    return spec, generate_cases(spec, spec.profile("default"), "cpu")


def _catching_case(document: dict, reaches) -> str:
    """The id of the first case that can show the bug and does (run here, on the CPU)."""
    from pytest_scaledmm.execution.run import RunContext, run_case  # noqa: PLC0415  torch
    from pytest_scaledmm.execution.sequence_plan import drawn_values  # noqa: PLC0415  torch
    from pytest_scaledmm.matrix.kernels import resolve_kernels  # noqa: PLC0415  torch

    spec, (cases, _) = _cases(document)
    candidates = [c for c in cases if reaches(c.params) and c.params.purpose in ("valid", "special")]
    assert candidates, "the generator drew no case of this dimension"
    ctx = RunContext(
        device="cpu",
        run_seed=spec.seed,
        kernel_specs={k.name: k for k in spec.kernels},
        kernels=resolve_kernels(spec.path, spec.kernels),
        drawn=drawn_values(cases),  # as a run's session gives it: the sequence's dtype steps
    )
    for case in candidates[:6]:
        if run_case(case, ctx).outcome not in (oc.PASS, oc.UNSUPPORTED):
            return case.id
    raise AssertionError(f"none of {len(candidates)} case(s) of the dimension failed")


@pytest.mark.parametrize("matrix", list(MATRICES))
@pytest.mark.parametrize("kernel", list(PLANTED))
def test_each_planted_dimension_is_caught_and_the_correct_twin_is_clean(matrix_project, kernel, matrix):
    module, _, function = kernel.rpartition(":")
    planted = MATRICES[matrix]({"name": function, "impl": f"{module or 'planted_kernels'}:{function}"})
    planted_state_kernels.forget()
    case_id = _catching_case(planted, PLANTED[kernel])
    planted_state_kernels.forget()  # the run below is in this process too: it starts as a fresh one
    matrix_project.write_matrix(yaml.safe_dump(planted, sort_keys=False))
    result = matrix_project.run(f"matrix.yaml::{case_id}", "--scaledmm-matrix", *IN_PROCESS)
    result.assert_outcomes(failed=1)
    assert SIGNATURES.get(kernel, "") in result.stdout.str()
    # The same case (same name, so the same id) of a kernel without the bug passes.
    twin = MATRICES[matrix]({"name": function, "impl": "planted_kernels:correct"})
    matrix_project.write_matrix(yaml.safe_dump(twin, sort_keys=False))
    result = matrix_project.run(f"matrix.yaml::{case_id}", "--scaledmm-matrix", *IN_PROCESS)
    result.assert_outcomes(passed=1)


def test_a_matrix_that_lists_only_kernels_draws_the_production_space():
    _, (cases, notes) = _cases(kernels_only({"name": "mine", "impl": "planted_kernels:correct"}))
    drawn = {
        axis: {c.params.value_of(axis) for c in cases} for axis in ("value_regime", "operand_layout", "scale_dtype")
    }
    assert drawn["value_regime"] >= {"standard", "full_range", "real_scales", "near_limit", "cancelling"}
    assert drawn["operand_layout"] >= {"dense", "a_padded", "a_offset", "b_row_major", "b_padded"}
    assert drawn["scale_dtype"] >= {"fp32", "bf16", "fp16"}
    assert {c.params.special_scale for c in cases if c.params.purpose == "special"} >= {"zero", "negative"}
    assert {c.params.special_side for c in cases if c.params.purpose == "special"} == {"a", "b"}
    assert not any("production data" in w for w in notes["warnings"])


def test_listed_m_gets_the_server_sizes_and_a_listed_axis_narrows(tmp_path):
    document = readme_matrix({"name": "mine", "impl": "planted_kernels:correct"})
    document["axes"]["value_regime"] = ["standard"]
    _, (cases, notes) = _cases(document)
    assert {c.params.value_regime for c in cases} == {"standard"}
    assert {1, 16} < {c.params.m for c in cases}
    assert set(notes["m_added"]["mine"]) >= {17, 127, 128, 129, 2048}
    assert any(c.params.m == c.params.n for c in cases)
    # The k axis left out: tails of a 32-block above one block.
    assert {c.params.k for c in cases} & {48, 80, 96, 192}


def test_a_profile_without_production_data_says_so(matrix_project):
    document = readme_matrix({"name": "mine", "impl": "planted_kernels:correct"})
    document["axes"].update(value_regime=["standard"], operand_layout=["dense"], special_scale=["none"])
    document["profiles"]["default"]["cases"] = 4
    matrix_project.write_matrix(yaml.safe_dump(document, sort_keys=False))
    result = matrix_project.run("--scaledmm-matrix", "--collect-only", "-q", *IN_PROCESS)
    assert result.ret == 0
    _, (_, notes) = _cases(document)
    assert any(w.startswith("profile 'default' draws no production data") for w in notes["warnings"])


def test_the_coverage_line_names_each_dimension_drawn_checked_and_left_out(matrix_project):
    document = readme_matrix({"name": "mine", "impl": "planted_kernels:correct"})
    document["axes"]["mode"] = ["eager"]
    document["profiles"]["default"]["cases"] = 12
    matrix_project.write_matrix(yaml.safe_dump(document, sort_keys=False))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    assert result.ret == 0
    line = next(x for x in result.stdout.lines if x.startswith("coverage mine (values checked/in its space):"))
    assert "value_regime " in line and "left out by the budget: " in line and "M added" in line
    dims = matrix_project.report()["coverage"]["dimensions"]["mine"]
    regime = dims["dimensions"]["value_regime"]
    assert set(regime["drawn"]) | set(regime["left_out"]) == set(regime["values"])
    assert set(regime["checked"]) <= set(regime["drawn"])
    assert dims["m_added"] and set(dims["m_added"]) <= {c["params"]["m"] for c in matrix_project.report()["cases"]}


def test_fp8_linear_is_right_at_k_zero(matrix_project):
    document = {
        "version": 1,
        "kernels": ["fp8_linear"],
        "axes": {"mode": ["eager", "aot_eager"], "m": [4], "k": [0, 32], "n": [16], "bias": [False, True]},
        "profiles": {"default": {"cases": 8}},
    }
    matrix_project.write_matrix(yaml.safe_dump(document, sort_keys=False))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    cases = [c for c in matrix_project.report()["cases"] if c["params"]["k"] == 0]
    assert cases and {c["outcome"] for c in cases} == {"PASS"}, result.stdout.str()[-2000:]


def test_the_gate_says_when_the_case_sets_differ_because_the_defaults_changed(tmp_path, capsys):
    from reports_factory import BASE, CAND, case, gate, report  # noqa: PLC0415  tests' own helpers

    baseline = report([case("old", "PASS"), case("both", "PASS")], **BASE)
    candidate = report([case("both", "PASS"), case("new", "PASS")], **CAND)
    baseline["matrix"]["generation"] = {"defaults": "aaaaaaaaaaaa"}
    candidate["matrix"]["generation"] = {"defaults": "bbbbbbbbbbbb"}
    assert gate(tmp_path, baseline, candidate) == 1
    err = capsys.readouterr()
    text = err.out + err.err
    assert "the case sets differ because the matrix's defaults changed" in text
    assert "defaults aaaaaaaaaaaa -> bbbbbbbbbbbb" in text
    assert f"--scaledmm-report {tmp_path / 'baseline.json'}" in text
    # The same defaults: missing cases alone, no word of defaults.
    candidate["matrix"]["generation"] = {"defaults": "aaaaaaaaaaaa"}
    assert gate(tmp_path, baseline, candidate) == 1
    err = capsys.readouterr()
    assert "missing from the candidate" in err.out + err.err and "defaults changed" not in err.out + err.err


def test_the_default_profile_has_an_fp8_output_with_scale_result_and_k_tails():
    from pytest_scaledmm.matrix.spec import load_spec  # noqa: PLC0415

    spec = load_spec(Path(__file__).resolve().parents[1] / "matrix.yaml")
    cases, notes = generate_cases(spec, spec.profile("default"), "cpu")
    fp8_out = [c for c in cases if c.params.out_dtype == "e4m3fn"]
    assert fp8_out and {c.params.kernel for c in fp8_out} == {"aten_scaled_mm"}
    assert {c.params.scale_result for c in fp8_out} == {"two"}
    assert {c.params.kernel for c in cases if c.params.k in (48, 80) and c.params.purpose == "valid"} == {
        "aten_scaled_mm",
        "int8_w8a8",
    }
    assert notes["truncated"] == 0  # the server slice takes what the covering rows leave


def test_a_record_says_which_later_calls_could_not_be_made(matrix_project):
    """Fail closed: the in-place call skipped for a weight object, the call at another M for a
    kernel that declares one M only, each named in the record's extra.not_checked."""
    import json

    from matrices import IN_PROCESS, SYNTHETIC

    one_m = {"name": "one_m", "impl": "planted_kernels:correct", "min_m": 16, "max_m": 16}
    document = {
        "version": 1,
        "kernels": [one_m],
        "axes": {**SYNTHETIC, "m": [16], "k": [32], "n": [16], "mode": ["eager"]},
        "limits": {"max_operand_elements": 4096},  # the extreme shapes kept out: the two cases
        "profiles": {"default": {"cases": 2}},
    }
    matrix_project.write_matrix(yaml.safe_dump(document, sort_keys=False))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "r.json", *IN_PROCESS)
    records = json.loads((matrix_project.path / "r.json").read_text())["cases"]
    assert result.ret == 0 and len(records) >= 2 and {r["outcome"] for r in records} == {"PASS"}
    for record in records:
        assert "other_m" not in record["extra"]
        assert record["extra"]["not_checked"] == [
            "call at another M after the first: no other M near this one that the kernel's declarations admit"
        ]


def _other_m(declared: dict, m: int, mode: str = "eager") -> list:
    from pytest_scaledmm.execution.run import RunContext, planned_other_m  # noqa: PLC0415  torch
    from pytest_scaledmm.matrix.case_params import Case  # noqa: PLC0415

    spec, (cases, _) = _cases(
        {
            "version": 1,
            "kernels": [{"name": "k", "impl": "planted_kernels:correct", **declared}],
            "axes": {"m": [m], "mode": [mode]},
            "profiles": {"default": {"cases": 1}},
        }
    )
    ctx = RunContext(device="cpu", run_seed=0, kernel_specs={k.name: k for k in spec.kernels}, kernels={})
    case = cases[0]
    return [entry["m"] for entry in planned_other_m(Case(case.id, case.params.with_values(m=m)), ctx)]


def test_the_other_m_keeps_to_what_the_kernel_declares():
    assert _other_m({}, 16) == [48]
    assert _other_m({"max_m": 16}, 16) == [5]
    # With a declared multiple, where M / 3 and M +- 1 are not: twice M, or half of it past 1024.
    assert _other_m({"m_multiple": 16}, 512) == [1024]
    assert _other_m({"m_multiple": 16}, 2048) == [1024]
    # A dynamic-M mode's first other M (48) is outside max_m: the eager call takes one inside.
    assert _other_m({"max_m": 16}, 16, "mark-dynamic") == [5]
    assert _other_m({"min_m": 16, "max_m": 16}, 16) == []


def _four_way_reach(params) -> bool:
    return (
        params.mode != "eager"
        and params.scale_a == params.scale_b == "tensor_1d"
        and bool(params.bias)
        and params.out_dtype == "fp16"
    )


def test_a_four_way_epilogue_bug_is_caught_where_the_budget_holds_the_epilogue(matrix_project):
    """Wrong only compiled AND with 1-D scales on both sides AND a bias AND an fp16 output: every
    whole epilogue under a compiled mode gets a case (matrix/epilogue.py). The README's matrix
    holds them; a budget that cannot says how many it leaves out, and one that can catches it."""
    impl = "planted_compile_kernels:fused_epilogue_wrong_for_1d_pair_bias_fp16"
    readme = readme_matrix({"name": "mine", "impl": impl})
    case_id = _catching_case(readme, _four_way_reach)
    matrix_project.write_matrix(yaml.safe_dump(readme, sort_keys=False))
    result = matrix_project.run(f"matrix.yaml::{case_id}", "--scaledmm-matrix", *IN_PROCESS)
    result.assert_outcomes(failed=1)
    twin = readme_matrix({"name": "mine", "impl": "planted_kernels:correct"})
    matrix_project.write_matrix(yaml.safe_dump(twin, sort_keys=False))
    matrix_project.run(f"matrix.yaml::{case_id}", "--scaledmm-matrix", *IN_PROCESS).assert_outcomes(passed=1)

    small = kernels_only({"name": "mine", "impl": impl})
    _, (_, notes) = _cases(small)
    cut = [w for w in notes["warnings"] if "epilogue" in w]
    assert len(cut) == 1 and "whole epilogues under a compiled mode of kernel mine" in cut[0]
    small["profiles"]["default"]["cases"] = 280
    _, (_, notes) = _cases(small)
    assert not [w for w in notes["warnings"] if "epilogue" in w]
    _catching_case(small, _four_way_reach)
