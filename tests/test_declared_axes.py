"""A kernel's declaration and the matrix's axes: an axis the matrix leaves out takes the values
the kernel declares (every declared scale form is exercised); what the declaration still leaves
out, and a budget the cases cannot fill, are said by a warning naming the kernel and the axis."""

from pathlib import Path

import yaml

from matrices import IN_PROCESS, synthetic
from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.spec import load_spec

FORMS = ["tensor_0d", "tensor_1d", "rowwise"]
KERNEL = {"name": "mine", "impl": "planted_kernels:correct", "scale_forms": FORMS}


def spec_of(tmp_path: Path, axes: dict, cases: int = 60, kernel=KERNEL, profile_axes=None):
    document = {
        "version": 1,
        "kernels": [kernel],
        "axes": synthetic(axes, "dtype_a", "dtype_b", "out_dtype"),
        "profiles": {"default": {"cases": cases, **({"axes": profile_axes} if profile_axes else {})}},
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_spec(path)


def cases_and_notes(spec):
    return generate_cases(spec, spec.profile("default"), "cpu")


def test_left_out_scale_axes_take_the_declared_forms(tmp_path):
    """The example that collapsed: three declared forms, no scale axis listed. It ran 0-D x 0-D
    alone; every declared pairing now meets every mode."""
    spec = spec_of(tmp_path, {"mode": ["aot_eager", "inductor"], "m": [1, 17, 64], "k": [32, 64], "n": [16]})
    cases, notes = cases_and_notes(spec)
    pairs = {(c.params.scale_a, c.params.scale_b) for c in cases}
    assert pairs == {(a, b) for a in FORMS for b in FORMS}
    assert {(c.params.scale_a, c.params.scale_b, c.params.mode) for c in cases} >= {
        (a, b, m) for a in FORMS for b in FORMS for m in ("aot_eager", "inductor")
    }
    assert len(cases) == 60 and [w for w in notes["warnings"] if "production data" not in w] == []


def test_left_out_dtype_axes_take_the_declared_dtypes_also_without_fast_accum(tmp_path):
    kernel = {"name": "mine", "impl": "planted_kernels:no_fast_accum", "dtypes": ["e4m3fn", "e5m2"]}
    spec = spec_of(tmp_path, {"mode": ["aot_eager"], "m": [4, 8], "k": [32], "n": [16]}, cases=12, kernel=kernel)
    cases, _ = cases_and_notes(spec)
    assert {c.params.dtype_a for c in cases} == {"e4m3fn", "e5m2"}


def test_a_declared_form_the_axes_leave_out_is_warned_about(tmp_path):
    spec = spec_of(
        tmp_path,
        {
            "scale_a": ["tensor_0d", "tensor_1d"],
            "scale_b": ["tensor_0d"],
            "mode": ["aot_eager"],
            "m": [4],
            "k": [32],
            "n": [16],
        },
        cases=2,
    )
    _, notes = cases_and_notes(spec)
    assert (
        "kernel 'mine' declares scale_a rowwise, which profile 'default' does not list under axes.scale_a"
        in notes["warnings"][0]
    )
    assert any("declares scale_b tensor_1d, rowwise" in w for w in notes["warnings"])


def test_a_budget_the_declaration_cannot_fill_is_warned_about(tmp_path):
    spec = spec_of(
        tmp_path,
        {
            "scale_a": ["tensor_0d", "tensor_1d", "tensor_1x1", "rowwise", "blockwise"],
            "scale_b": ["tensor_0d"],
            "mode": ["aot_eager"],
            "m": [4],
            "k": [32],
            "n": [16],
        },
        cases=60,
        kernel={**KERNEL, "scale_forms": ["tensor_0d"]},
    )
    cases, notes = cases_and_notes(spec)
    assert len(cases) < 60
    budget = [w for w in notes["warnings"] if "whose budget is 60" in w]
    assert len(budget) == 1
    assert budget[0].startswith(f"kernel 'mine': {len(cases)} case(s) for profile 'default'")
    assert "its declaration narrows scale_a ['tensor_0d'] of ['tensor_0d', 'tensor_1d'" in budget[0]


def test_the_warning_is_shown_in_the_run_summary_and_kept_in_the_report(matrix_project):
    matrix_project.write_matrix(
        yaml.safe_dump(
            {
                "version": 1,
                "kernels": [{**KERNEL, "scale_forms": ["tensor_0d", "rowwise"]}],
                "axes": synthetic(
                    {
                        "scale_a": ["tensor_0d"],
                        "scale_b": ["tensor_0d"],
                        "mode": ["aot_eager"],
                        "m": [4],
                        "k": [32],
                        "n": [16],
                    }
                ),
                "profiles": {"default": {"cases": 5}},
            },
            sort_keys=False,
        )
    )
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    assert result.ret == 0
    out = result.stdout.str()
    assert "warning: kernel 'mine' declares scale_a rowwise" in out
    assert "warning: kernel 'mine': 1 case(s) for profile 'default', whose budget is 5" in out
    warnings = matrix_project.report()["matrix"]["generation"]["warnings"]
    assert any("declares scale_b rowwise" in w for w in warnings)


def test_built_in_kernels_take_the_whole_range_their_model_accepts(tmp_path):
    """A built-in's left-out scale axes take the production range, narrowed by its support model
    (fp8_linear: per-tensor scales only); a listed axis is the matrix's word."""
    axes = {"mode": ["aot_eager"], "m": [4], "k": [32], "n": [16]}
    spec = spec_of(tmp_path, axes, cases=40, kernel="fp8_linear")
    cases, notes = cases_and_notes(spec)
    valid = {(c.params.scale_a, c.params.scale_b) for c in cases if c.params.purpose == "valid"}
    forms = ("tensor_0d", "tensor_1d", "tensor_1x1")
    assert valid == {(a, b) for a in forms for b in forms}
    assert not any("declares" in w for w in notes["warnings"])
    listed = spec_of(
        tmp_path, {**axes, "scale_a": ["tensor_0d"], "scale_b": ["tensor_0d"]}, cases=4, kernel="fp8_linear"
    )
    assert {(c.params.scale_a, c.params.scale_b) for c in cases_and_notes(listed)[0]} == {("tensor_0d", "tensor_0d")}
