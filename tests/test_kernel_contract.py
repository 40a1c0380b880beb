"""The kernel contract: every case ends as one record whatever the kernel does, a refusal is
UNSUPPORTED only when it is earned, declarations carry shape constraints, and a kernel is called
only with the keywords its signature accepts."""

import re
import textwrap
from pathlib import Path

import pytest
import torch
from case_factory import case_params, case_record
from direct_run import run_matrix

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.matrix.case_params import make_case
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.outcome import ErrorInfo

PARAMS = case_params(kernel="correct", scale_b="tensor_1d", mode="aot_eager", m=4)


def by_kernel(results) -> dict:
    found: dict = {}
    for case, result in results:
        found.setdefault(case.params.kernel, []).append((case, result))
    return found


# -- refusal is earned ---------------------------------------------------------------------------


def test_kernel_refusing_every_call_is_refused_and_fails_the_run(matrix_project):
    kernels = [
        planted("refuses_everything_type_error"),
        planted("refuses_everything_runtime_error"),
        planted("correct"),
    ]
    matrix_project.write_matrix(matrix_text(kernels))
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=2, passed=1)
    assert result.ret == 1
    outcomes = {c["params"]["kernel"]: c["outcome"] for c in matrix_project.report()["cases"]}
    assert outcomes == {
        "refuses_everything_type_error": oc.REFUSED,
        "refuses_everything_runtime_error": oc.REFUSED,
        "correct": oc.PASS,
    }


def test_refusing_m1_fails_unless_declared():
    text = matrix_text([planted("refuses_m1"), planted("refuses_m1_declared", "refuses_m1", min_m=2)], {"m": [1, 4]})
    found = by_kernel(run_matrix(text))
    outcomes = {(k, c.params.m): r.outcome for k, results in found.items() for c, r in results}
    assert outcomes == {
        ("refuses_m1", 1): oc.REFUSED,
        ("refuses_m1", 4): oc.PASS,
        ("refuses_m1_declared", 1): oc.UNSUPPORTED,
        ("refuses_m1_declared", 4): oc.PASS,
    }
    (unsupported,) = [r for c, r in found["refuses_m1_declared"] if c.params.m == 1]
    assert "min_m: 2" in unsupported.detail and "M = 1" in unsupported.detail
    (refused,) = [r for c, r in found["refuses_m1"] if c.params.m == 1]
    assert "declared support" in refused.detail and "min_m" in refused.detail


@pytest.mark.parametrize(
    "declared,axes,outside",
    [
        ({"max_m": 4}, {"m": [4, 8]}, lambda p: p.m > 4),
        ({"m_multiple": 4}, {"m": [4, 6]}, lambda p: p.m % 4),
        ({"k_multiple": 64}, {"k": [32, 64]}, lambda p: p.k % 64),
        ({"n_multiple": 32}, {"n": [16, 32]}, lambda p: p.n % 32),
        ({"scale_forms": ["tensor_0d", "tensor_1d"]}, {}, lambda p: False),
    ],
    ids=["max_m", "m_multiple", "k_multiple", "n_multiple", "scale_forms"],
)
def test_each_declared_limit_earns_unsupported_outside_and_only_there(declared, axes, outside):
    text = matrix_text([planted("refuses_everything_runtime_error", **declared)], axes)
    results = run_matrix(text)
    assert results
    for case, result in results:
        want = oc.UNSUPPORTED if outside(case.params) else oc.REFUSED
        assert result.outcome == want, (case.id, result.outcome, result.detail)
        if want == oc.UNSUPPORTED:
            assert next(iter(declared)) in result.detail


def test_case_outside_declared_scale_forms_is_unsupported():
    from pytest_scaledmm.matrix.spec import KernelSpec
    from pytest_scaledmm.verdict.refusals import outside_declared_support

    kernel = KernelSpec("k", family="fp8", scale_forms=("tensor_0d",), min_m=2, k_multiple=16)
    params = case_record(scale_a="rowwise", m=4)
    assert "scale_a rowwise" in outside_declared_support(kernel, params)
    assert outside_declared_support(kernel, params.with_values(scale_a="tensor_0d")) is None
    assert "k_multiple: 16" in outside_declared_support(kernel, params.with_values(scale_a="tensor_0d", k=24))


def test_internal_assert_alike_on_both_sides_is_internal_error():
    ((case, result),) = run_matrix(matrix_text([planted("internal_assert")]))
    assert result.outcome == oc.INTERNAL_ERROR
    assert result.failed and "INTERNAL ASSERT FAILED" in result.signature


def test_hook_kernel_declares_limits_like_a_matrix_entry():
    import planted_kernels

    from pytest_scaledmm.matrix.kernels import Kernel
    from pytest_scaledmm.matrix.spec import kernel_from_declaration

    declared = Kernel("hooked", planted_kernels.refuses_m1, min_m=2)
    entry = {k: getattr(declared, k) for k in ("name", "min_m")}
    kernel = kernel_from_declaration("pytest_scaledmm_kernels in conftest.py", 0, entry, declared.fn)
    assert kernel.min_m == 2
    text = matrix_text(["hooked"], {"m": [1, 4]})
    outcomes = {c.params.m: r.outcome for c, r in run_matrix(text, declared_kernels=[kernel])}
    assert outcomes == {1: oc.UNSUPPORTED, 4: oc.PASS}


@pytest.mark.parametrize(
    "declared,key,message",
    [
        ({"min_m": 0}, "kernels[0].min_m", "0 is less than the minimum of 1"),
        ({"k_multiple": "16"}, "kernels[0].k_multiple", "'16' is not of type 'integer'"),
        ({"min_m": 8, "max_m": 4}, "kernels[0].min_m", "greater than max_m"),
        ({"n_multiples": 16}, "kernels[0]", "n_multiples"),
        # The schema's "integer" takes 2.0; the harness would hand torch a float size.
        ({"m_multiple": 2.0}, "kernels[0].m_multiple", "2.0 is not an integer"),
        ({"k_multiple": 16.0}, "kernels[0].k_multiple", "16.0 is not an integer"),
        # A range with no multiple in it: no case could be made, said instead of an empty run.
        ({"min_m": 5, "max_m": 7, "m_multiple": 8}, "kernels[0].m_multiple", "no M from 5 to max_m 7"),
        ({"max_m": 4, "m_multiple": 8}, "kernels[0].m_multiple", "no M from 1 to max_m 4"),
    ],
)
def test_bad_limit_declarations_are_matrix_errors(declared, key, message):
    from pytest_scaledmm.matrix.spec import MatrixError, parse_spec

    with pytest.raises(MatrixError) as info:
        parse_spec(Path("m.yaml"), matrix_text([planted("correct", **declared)]))
    assert info.value.key == key and message in info.value.message


# -- the documented refusals of the built-in ops -------------------------------------------------


def _error(type_, message):
    return ErrorInfo(type=type_, message=message, root_type=type_)


# Messages as the ops raise them: Blas.cpp / ScaledBlas.cpp, and eager calls of the default and
# full profiles' cases on an H200 with torch 2.11 (scaled_mm_v2 raises ValueError where
# _scaled_mm raises RuntimeError).
GPU_REFUSALS = [
    (
        "scaled_mm_v2",
        "builtins.ValueError",
        "Expected trailing dimension of mat1 to be divisible by 16 but got mat1 shape: (64x24).",
    ),
    ("scaled_mm_v2", "builtins.ValueError", "Bias is not supported when out_dtype is set to Float32"),
    ("scaled_mm_v2", "builtins.ValueError", "scale_a must have strides (1, 127); got [0, 0]"),
    ("scaled_mm_v2", "builtins.ValueError", "scale_b must have shape 4 x 1 Float elements, got [1, 1]"),
    ("aten_scaled_mm", "builtins.RuntimeError", "scaled_gemm doesn't support fast accum with 1x128 blockwise scaling"),
    (
        "aten_scaled_mm",
        "builtins.RuntimeError",
        "Expected trailing dimension of mat1 to be divisible by 16 but got mat1 shape: (16x24).",
    ),
    ("aten_scaled_mm", "builtins.RuntimeError", "mat2 shape (32x40) must be divisible by 16"),
    ("fp8_linear", "builtins.ValueError", "Multiplication of two Float8_e5m2 matrices is not supported"),
    ("aten_scaled_mm", "builtins.RuntimeError", "Bias is not supported when out_dtype is set to Float32"),
    ("int8_w8a8", "builtins.RuntimeError", "self.size(0) needs to be greater than 16, but got 1"),
    (
        "aten_scaled_mm",
        "builtins.NotImplementedError",
        "Could not run 'aten::_scaled_mm' with arguments from the 'CPU' backend. This could be because the operator doesn't exist",
    ),
    (
        "aten_scaled_mm",
        "builtins.RuntimeError",
        "torch._scaled_mm is only supported on CUDA devices with compute capability >= 9.0 or 8.9, or ROCm MI300+",
    ),
    (
        "scaled_mm_v2",
        "builtins.ValueError",
        "Invalid scaling configuration.\n- For TensorWise scaling, a and b should be float8",
    ),
    (
        "aten_scaled_mm",
        "builtins.RuntimeError",
        "CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmulAlgoGetHeuristic( ltHandle, ...)`",
    ),
]


@pytest.mark.parametrize(
    "kernel,type_,message", GPU_REFUSALS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(GPU_REFUSALS)]
)
def test_documented_refusals_of_the_builtin_ops(kernel, type_, message):
    from pytest_scaledmm.verdict.refusals import documented_refusal, internal_error

    error = _error(type_, message)
    assert documented_refusal(kernel, error) is not None
    assert internal_error(error, error) is None


def test_refusals_that_are_not_documented():
    from pytest_scaledmm.verdict.refusals import documented_refusal, internal_error

    # The int8 op's constraint does not document a refusal of the fp8 op, nor the other way round.
    assert (
        documented_refusal(
            "aten_scaled_mm", _error("builtins.RuntimeError", "self.size(0) needs to be greater than 16")
        )
        is None
    )
    assert (
        documented_refusal(
            "int8_w8a8", _error("builtins.ValueError", "Multiplication of two Float8_e5m2 matrices is not supported")
        )
        is None
    )
    # The right message under the wrong exception type is not the documented refusal.
    assert documented_refusal("aten_scaled_mm", _error("builtins.TypeError", "Invalid scaling configuration.")) is None
    assert documented_refusal("aten_scaled_mm", _error("builtins.RuntimeError", "something else went wrong")) is None
    assert documented_refusal("my_kernel", _error("builtins.ValueError", "Invalid scaling configuration.")) is None
    failed = _error(
        "builtins.RuntimeError", "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasLtMatmul(...)`"
    )
    assert internal_error(failed, failed)
    asserted = _error(
        "builtins.RuntimeError", 'false INTERNAL ASSERT FAILED at "Blas.cpp":10, please report a bug to PyTorch.'
    )
    assert internal_error(asserted, _error("builtins.RuntimeError", "x"))
    bare = _error(
        "builtins.RuntimeError", "Expected cond to be True, but got False. (Could this error message be improved?"
    )
    assert internal_error(_error("builtins.RuntimeError", "x"), bare)


def test_recorded_refusals_of_builtins_are_documented():
    """Every refusal a stored report of torch 2.3 on a CPU recorded as UNSUPPORTED (no CPU
    kernel for _scaled_mm or _int_mm) is in the table."""
    import json

    from pytest_scaledmm.verdict.refusals import documented_refusal

    data = json.loads((Path(__file__).parent / "data" / "cpu-torch23.json").read_text())
    recorded = [c for c in data["cases"] if c["outcome"] == oc.UNSUPPORTED]
    assert recorded
    for case in recorded:
        assert documented_refusal(case["params"]["kernel"], ErrorInfo(**case["eager_error"])), case["id"]


@pytest.mark.skipif(not hasattr(torch, "_scaled_mm"), reason="needs torch._scaled_mm")
def test_builtin_refusal_is_unsupported_and_a_user_wrapper_of_it_is_refused():
    """On this CPU a rowwise scale with a [1,1] one is refused alike, eager and compiled. The
    built-in earns UNSUPPORTED (a documented refusal); a user wrapper of the same op is REFUSED
    and told which declaration would make the case unsupported."""
    text = matrix_text(
        ["aten_scaled_mm", planted("wraps_scaled_mm")], {"scale_a": ["rowwise"], "scale_b": ["tensor_1x1"], "m": [17]}
    )
    (builtin, builtin_result), (wrapper, wrapper_result) = run_matrix(text)
    if builtin_result.outcome == oc.PASS:
        pytest.skip("this torch accepts the pair")
    assert builtin.params.kernel == "aten_scaled_mm" and builtin_result.outcome == oc.UNSUPPORTED, builtin_result.detail
    assert "documented" in builtin_result.detail and "Invalid scaling configuration" in builtin_result.signature
    assert wrapper_result.outcome == oc.REFUSED, wrapper_result.detail
    assert "scale_forms" in wrapper_result.detail


def test_user_wrapper_of_a_documented_refusal_is_refused_with_a_hint(monkeypatch):
    import planted_kernels

    def refuses_like_cublas(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
        raise RuntimeError("mat2 shape (32x16) must be divisible by 16")

    monkeypatch.setattr(planted_kernels, "refuses_like_cublas", refuses_like_cublas, raising=False)
    ((case, result),) = run_matrix(matrix_text([planted("refuses_like_cublas")]))
    assert result.outcome == oc.REFUSED
    assert "k_multiple: 16" in result.detail and "n_multiple: 16" in result.detail


# -- keywords the signature accepts --------------------------------------------------------------


def test_kernel_without_use_fast_accum_gets_no_fast_cases_and_passes():
    text = matrix_text(
        [planted("no_fast_accum"), planted("correct")], {"use_fast_accum": [False, True], "m": [4, 5]}, cases=8
    )
    found = by_kernel(run_matrix(text))
    assert {c.params.use_fast_accum for c, _ in found["no_fast_accum"]} == {False}
    assert {c.params.use_fast_accum for c, _ in found["correct"]} == {False, True}
    assert [r.outcome for _, r in found["no_fast_accum"]] == [oc.PASS] * len(found["no_fast_accum"])


def test_fast_accum_case_for_a_kernel_without_the_parameter_is_skipped():
    """A case from a corpus file or a replay can still ask for it: the keyword is not passed."""
    from pytest_scaledmm.execution.run import RunContext, run_case
    from pytest_scaledmm.matrix.kernels import resolve_kernels
    from pytest_scaledmm.matrix.spec import parse_spec

    spec = parse_spec(Path("m.yaml"), matrix_text([planted("no_fast_accum")]))
    ctx = RunContext("cpu", spec.seed, {k.name: k for k in spec.kernels}, resolve_kernels(spec.path, spec.kernels))
    result = run_case(make_case({**PARAMS, "kernel": "no_fast_accum", "use_fast_accum": True}), ctx)
    assert result.outcome == oc.SKIPPED and "use_fast_accum" in result.detail


HOOK_MISSING_OUT_DTYPE = """
import planted_kernels
from pytest_scaledmm.matrix.kernels import Kernel


def pytest_scaledmm_kernels(config):
    return [Kernel("hooked_no_out_dtype", planted_kernels.no_out_dtype)]
"""


@pytest.mark.parametrize("where", ["matrix", "hook"])
def test_kernel_missing_out_dtype_is_one_usage_error(matrix_project, where):
    if where == "matrix":
        matrix_project.write_matrix(matrix_text([planted("correct"), planted("no_out_dtype")]))
        expected = "ERROR: *matrix.yaml: key 'kernels[[]1[]].impl': kernel 'no_out_dtype'*'out_dtype'*"
    else:
        matrix_project.write_matrix(matrix_text([planted("correct")]))
        (matrix_project.path / "conftest.py").write_text(textwrap.dedent(HOOK_MISSING_OUT_DTYPE))
        expected = "ERROR: *key 'hooked_no_out_dtype': kernel 'hooked_no_out_dtype'*'out_dtype'*"
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", *IN_PROCESS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    "source,parameter",
    [
        ("def k(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False): pass", None),
        ("def k(a, b, scale_a, scale_b, bias=None, out_dtype=None, use_fast_accum=False): pass", None),
        ("def k(*args, **kwargs): pass", None),
        ("def k(a, b, scale_a, *, bias=None, out_dtype): pass", "scale_b"),
        ("def k(a, b, scale_a, scale_b, *, out_dtype): pass", "bias"),
        ("def k(a, b, scale_a, scale_b, *, bias=None, out_dtype, block_size): pass", "block_size"),
    ],
)
def test_signature_problems_name_the_parameter(source, parameter):
    from pytest_scaledmm.matrix.kernels import signature_problem

    namespace: dict = {}
    exec(source, namespace)
    problem = signature_problem(namespace["k"])
    if parameter is None:
        assert problem is None
    else:
        assert problem and f"'{parameter}'" in problem


# -- every case ends as one record ----------------------------------------------------------------


def test_what_a_kernel_returns_or_raises_in_process_is_an_outcome():
    kernels = [planted(k) for k in ("exits", "returns_none", "returns_tuple", "returns_meta")]
    outcomes = {c.params.kernel: (r.outcome, r.signature) for c, r in run_matrix(matrix_text(kernels))}
    assert outcomes["exits"][0] == oc.CRASH and "SystemExit" in outcomes["exits"][1]
    assert outcomes["returns_none"] == (oc.MISMATCH, "MISMATCH: eager+compiled returned NoneType, not a Tensor")
    assert outcomes["returns_tuple"] == (oc.MISMATCH, "MISMATCH: eager+compiled returned tuple, not a Tensor")
    assert outcomes["returns_meta"][0] == oc.MISMATCH and "device meta" in outcomes["returns_meta"][1]


def test_keyboard_interrupt_in_process_is_the_users(monkeypatch):
    with pytest.raises(KeyboardInterrupt):
        run_matrix(matrix_text([planted("raises_keyboard_interrupt")]))


def test_an_oracle_that_raises_is_a_failed_check(monkeypatch):
    from pytest_scaledmm.verdict import oracle

    def broken(*args, **kwargs):
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")

    monkeypatch.setattr(oracle, "check_sides", broken)
    ((case, result),) = run_matrix(matrix_text([planted("correct")]))
    assert result.outcome == oc.MISMATCH
    assert "could not be checked" in result.signature and "NotImplementedError" in result.detail


def test_serve_answers_a_harness_failure_with_an_outcome(monkeypatch):
    from pytest_scaledmm.execution import isolate, run
    from pytest_scaledmm.execution.child_messages import RunCase

    def broken(case, ctx, keep=None):
        raise ZeroDivisionError("harness bug")

    monkeypatch.setattr(run, "run_case", broken)
    answer = isolate._serve(RunCase("some-case", case_params(kernel="k")), None)
    assert answer["outcome"] == oc.HARNESS_ERROR
    assert "ZeroDivisionError: harness bug" in answer["signature"] and "Traceback" in answer["detail"]
    result = isolate.InProcessRunner(None).run(make_case(PARAMS))
    assert result.outcome == oc.HARNESS_ERROR and "harness bug" in result.signature


def test_isolated_child_records_every_case(matrix_project):
    """The default isolated child: a kernel that exits, one that raises KeyboardInterrupt, one
    that returns None and one that returns a meta tensor each give one failing record; the run
    goes on and the report lists every case."""
    kernels = [planted(k) for k in ("exits", "raises_keyboard_interrupt", "returns_none", "returns_meta", "correct")]
    matrix_project.write_matrix(matrix_text(kernels))
    result = matrix_project.run(
        "--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", "--no-scaledmm-triage"
    )
    result.assert_outcomes(failed=4, passed=1)
    report = matrix_project.report()
    outcomes = {c["params"]["kernel"]: c["outcome"] for c in report["cases"]}
    assert outcomes == {
        "exits": oc.CRASH,
        "raises_keyboard_interrupt": oc.CRASH,
        "returns_none": oc.MISMATCH,
        "returns_meta": oc.MISMATCH,
        "correct": oc.PASS,
    }
    assert report["matrix"]["cases"] == len(report["cases"]) == 5
    by_kernel = {c["params"]["kernel"]: c for c in report["cases"]}
    assert "isolation" not in by_kernel["exits"]["extra"]  # answered by the child, not in-process
    assert re.search(r"SystemExit", by_kernel["exits"]["signature"])
