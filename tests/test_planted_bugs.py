"""Each planted bug (tests/planted_kernels.py) is caught with its outcome class, and the correct
kernel run over the very same cases produces no failure at all."""

import ast
from pathlib import Path

import pytest
from case_factory import failing_call
from direct_run import run_matrix

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.verdict import outcome as oc

ROWWISE_SQUARE = {"scale_a": ["rowwise"], "scale_b": ["rowwise", "tensor_1d"], "m": [16], "n": [16]}

# kernel, the axes that expose it, expected class, the layer it must be blamed on, and which of
# its cases must be caught (None: all; the others must pass).
BUGS = [
    ("rows_on_wrong_axis", ROWWISE_SQUARE, oc.MISMATCH, "eager+compiled", None),
    (
        "swapped_scales",
        {**ROWWISE_SQUARE, "scale_b": ["rowwise"], "scale_a": ["rowwise", "tensor_0d"]},
        oc.MISMATCH,
        "eager+compiled",
        None,
    ),
    ("drops_bias", {"bias": [True]}, oc.MISMATCH, "eager+compiled", None),
    ("ignores_out_dtype", {"out_dtype": ["bf16", "fp16"]}, oc.MISMATCH, "eager+compiled", None),
    ("wrong_fake_shape", {"m": [4], "n": [16]}, oc.OPCHECK_FAILED, "opcheck", None),
    ("wrong_only_compiled", {"scale_b": ["tensor_1d", "rowwise"]}, oc.MISMATCH, "compiled", None),
    (
        "asserts_0d_x_1d_under_compile",
        {"scale_a": ["tensor_0d"], "scale_b": ["tensor_1d"], "mode": ["eager", "aot_eager"]},
        oc.COMPILE_ONLY_ERROR,
        "dynamo",
        None,
    ),
    # Refuses M = 1 while declaring nothing, so M = 1 is inside its support (min_m: 2 would earn UNSUPPORTED).
    ("refuses_m1", {"m": [1, 4]}, oc.REFUSED, "eager", lambda p: p.m == 1),
    ("flattens_without_reshape", {"activation_rank": [3], "m": [4, 5]}, oc.MISMATCH, "eager+compiled", None),
    (
        "reads_scale_from_storage_start",
        {"scale_a": ["rowwise"], "scale_layout": ["offset", "noncontiguous"]},
        oc.MISMATCH,
        "eager+compiled",
        None,
    ),
    (
        "compiled_scales_after_matmul",
        {"special_scale": ["inf"], "scale_a": ["rowwise", "tensor_0d"]},
        oc.MISMATCH,
        "compiled",
        None,
    ),
    (
        "first_token_scale",
        {"scale_a": ["rowwise", "tensor_1x1"], "m": [2, 5]},  # M = 1 fails at its other M (3), eager only
        oc.MISMATCH,
        "eager+compiled",
        lambda p: p.scale_a == "rowwise" and p.m > 1,
    ),
    ("drops_k_tail", {"k": [128, 256, 160, 32]}, oc.MISMATCH, "eager+compiled", lambda p: p.k % 128 != 0),
    ("refuses_everything_runtime_error", {}, oc.REFUSED, "eager", None),
    ("internal_assert", {}, oc.INTERNAL_ERROR, "eager", None),
    ("exits", {}, oc.CRASH, "eager", None),
    ("returns_none", {}, oc.MISMATCH, "eager+compiled", None),
    ("returns_tuple", {}, oc.MISMATCH, "eager+compiled", None),
    ("returns_meta", {"m": [4, 5]}, oc.MISMATCH, "eager+compiled", None),
]
# The reference each bug is measured against: the same computation without the bug.
REFERENCE = {"wrong_fake_shape": "correct_custom_op"}


def run_bug(kernel, axes):
    """(buggy kernel's results, reference kernel's results) over the same cases."""
    reference = REFERENCE.get(kernel, "correct")
    results = run_matrix(matrix_text([planted(kernel), planted(reference)], axes))
    return [r for r in results if r[0].params.kernel == kernel], [r for r in results if r[0].params.kernel == reference]


@pytest.mark.parametrize("kernel,axes,expected,layer,caught_when", BUGS, ids=[b[0] for b in BUGS])
def test_planted_bug_is_caught_and_reference_passes(kernel, axes, expected, layer, caught_when):
    buggy, reference = run_bug(kernel, axes)
    assert buggy and len(reference) == len(buggy)
    for case, result in buggy:
        # A case's own call, or the call of its sequence that failed (another K, say), shows it.
        must_catch = caught_when is None or caught_when(failing_call(case.params, result.observations.sequence))
        assert result.outcome == (expected if must_catch else oc.PASS), (case.id, result.signature, result.detail)
        if must_catch:
            # A call of the sequence is the eager side's only.
            by_step = (result.observations.sequence or {}).get("failed") is not None
            expected_layer = "eager" if by_step else layer
            assert result.signature and result.layer == expected_layer, (case.id, result.signature, result.layer)
    assert [r.outcome for _, r in reference] == [oc.PASS] * len(reference), [(c.id, r.signature) for c, r in reference]


def test_every_planted_bug_of_a_real_kernel_is_in_the_table():
    """A bug planted in planted_kernels.py's section of real kernels' bugs and left out of BUGS
    would be checked by nothing."""
    source = (Path(__file__).parent / "planted_kernels.py").read_text()
    start = source[: source.index("# -- planted bugs of real kernels")].count("\n")
    end = source[: source.index("# -- custom ops")].count("\n")
    section = {
        node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and start < node.lineno <= end
    }
    assert len(section) >= 8
    assert section <= {kernel for kernel, *_ in BUGS}


def test_opcheck_runs_once_per_family():
    """Cases that differ only in shape, mode or special value share one opcheck; its result is
    recorded on each, and a failed one names the failing test util and keeps the case's own
    outcome."""
    buggy, reference = run_bug("wrong_fake_shape", {"m": [4, 8], "special_scale": ["none", "nan"]})
    for results in (buggy, reference):
        ran = [r for _, r in results if not r.observations.opcheck["cached"]]
        assert len(ran) == 1 and "opcheck_s" in ran[0].timing
    for _, result in buggy:
        assert "test_faketensor" in result.signature
        assert result.observations.run_outcome["outcome"] == oc.PASS  # the kernel itself computes right
    assert all(r.observations.opcheck["error"] is None for _, r in reference)


def test_plugin_reports_planted_bugs(matrix_project):
    """Through pytest: failing cases fail their items with the outcome class, the summary
    groups them by signature, and the session fails."""
    matrix_project.write_matrix(
        matrix_text([planted("drops_bias"), planted("wrong_fake_shape"), planted("correct")], {"bias": [True]})
    )
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(["*1 x MISMATCH*", "*1 x OPCHECK_FAILED [[]opcheck[]] opcheck test_faketensor*"])
    outcomes = {c["params"]["kernel"]: c["outcome"] for c in matrix_project.report()["cases"]}
    assert outcomes == {"drops_bias": oc.MISMATCH, "wrong_fake_shape": oc.OPCHECK_FAILED, "correct": oc.PASS}


def test_mismatch_names_the_side_off_the_reference(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("wrong_only_compiled")]))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=1)
    (case,) = matrix_project.report()["cases"]
    assert case["outcome"] == "MISMATCH"
    assert case["layer"] == "compiled"
    assert case["errors"]["eager"]["ok"] is True
    assert case["errors"]["compiled"]["ratio"] > 1
