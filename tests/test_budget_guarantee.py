"""A budget that never silently thins: every value of a kernel's space and every special value on
each side gets a checked case whatever `cases:` says; a limit the matrix sets that keeps a shape
class out is said ('not proven'), and --scaledmm-strict-coverage fails the run on it."""

import yaml

from matrices import IN_PROCESS, synthetic

SPECIALS = ["zero", "negative", "inf", "nan"]


def guarantee_matrix(cases: int, **top) -> str:
    axes = synthetic(
        {
            "scale_a": ["tensor_0d", "rowwise"],
            "scale_b": ["tensor_0d", "rowwise"],
            "mode": ["eager"],
            "m": [4],
            "k": [32],
            "n": [16],
            "special_scale": ["none", *SPECIALS],
            "special_side": ["a", "b"],
        }
    )
    kernel = {"name": "correct_shapes", "impl": "planted_shape_kernels:correct_shapes"}
    document = {"version": 1, "kernels": [kernel], "axes": axes, "profiles": {"default": {"cases": cases}}, **top}
    return yaml.safe_dump(document, sort_keys=False)


def test_a_small_budget_still_checks_every_special_value_on_each_side(matrix_project):
    matrix_project.write_matrix(guarantee_matrix(cases=5))
    result = matrix_project.run(
        "--scaledmm-matrix", *IN_PROCESS, "-k", "not m65536", "--scaledmm-report", "report.json"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = matrix_project.report()
    ran = [case for case in report["cases"] if case["outcome"] == "PASS"]
    pairs = {(case["params"].get("special_scale"), case["params"].get("special_side", "a")) for case in ran}
    assert {(value, side) for value in SPECIALS for side in "ab"} <= pairs
    # Each scale form on each side too, past the budget of 5.
    assert {case["params"]["scale_a"] for case in ran} == {"tensor_0d", "rowwise"}
    assert {case["params"]["scale_b"] for case in ran} == {"tensor_0d", "rowwise"}
    dimensions = report["coverage"]["dimensions"]["correct_shapes"]["dimensions"]
    assert dimensions["special_scale"]["checked"] == ["none", *SPECIALS]
    assert report["matrix"]["generation"]["guaranteed"] > 0


# Operands of at most 4096 elements: M past 65535 and a model's K cannot be built; N = 36 can.
CAPPED = {"limits": {"max_operand_elements": 4096}}


def test_a_limit_that_keeps_a_class_out_is_not_proven(matrix_project):
    matrix_project.write_matrix(guarantee_matrix(cases=5, **CAPPED))
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "-k", "n36", "--scaledmm-report", "report.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["not proven: kernel correct_shapes: m65536 (M past a launch grid's 65535 limit): *"])
    assert "k14336 (a model's K" in result.stdout.str() and "k11008" in result.stdout.str()
    report = matrix_project.report()
    block = report["coverage"]["dimensions"]["correct_shapes"]
    assert [item.split(" ")[0] for item in block["not_proven"]] == ["m65536", "k14336", "k11008"]
    assert block["shapes_added"] == ["n36"]
    assert "max_operand_elements" in block["not_proven"][0]


def test_strict_coverage_fails_the_run_on_what_is_not_proven(matrix_project):
    matrix_project.write_matrix(guarantee_matrix(cases=5, **CAPPED))
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "-k", "n36", "--scaledmm-strict-coverage")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["FAILED --scaledmm-strict-coverage: 3 shape class(es) not proven*"])
    assert "Traceback" not in result.stdout.str()


def test_strict_coverage_passes_when_everything_is_proven(matrix_project):
    matrix_project.write_matrix(guarantee_matrix(cases=5))
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "-k", "n36", "--scaledmm-strict-coverage")
    assert result.ret == 0
    assert "not proven" not in result.stdout.str()


def test_a_nan_and_an_inf_in_each_operand_and_m_equal_to_n_with_each_sides_scale_are_guaranteed(tmp_path):
    from pytest_scaledmm.matrix.cases import FORM_BY_ID, generate_cases
    from pytest_scaledmm.matrix.spec import load_spec

    path = tmp_path / "matrix.yaml"
    # The production axes (no axes given), a budget far below what they hold.
    path.write_text('version: 1\nkernels: [{name: k, impl: "planted_kernels:correct"}]\nprofiles: {p: {cases: 12}}\n')
    spec = load_spec(path)
    cases, _ = generate_cases(spec, spec.profile("p"))
    operands = {(c.params.special_operand, c.params.dtype_a, c.params.dtype_b) for c in cases}
    in_a = {value for value, a, _ in operands if value in ("nan", "nan_ab", "inf", "inf_ab")}
    in_b = {value for value, _, b in operands if value in ("nan_b", "nan_ab", "inf_b", "inf_ab")}
    assert in_a & {"nan", "nan_ab"} and in_a & {"inf", "inf_ab"}
    assert in_b & {"nan_b", "nan_ab"} and in_b & {"inf_b", "inf_ab"}
    assert all(a == "e5m2" for value, a, _ in operands if value in ("inf", "inf_ab"))
    assert all(b == "e5m2" for value, _, b in operands if value in ("inf_b", "inf_ab"))
    square = [c for c in cases if c.params.m == c.params.n]
    assert any(not FORM_BY_ID[c.params.scale_a].per_tensor for c in square)
    assert any(not FORM_BY_ID[c.params.scale_b].per_tensor for c in square)
