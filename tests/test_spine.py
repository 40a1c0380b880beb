"""The spine: matrix.yaml -> cases -> eager vs compiled vs float64 reference -> classified report."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrices import matrix_text, planted
from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.spec import load_spec
from pytest_scaledmm.verdict.outcome import ErrorInfo, normalise_message, signature_of

REPO = Path(__file__).resolve().parents[1]


def torch_has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


EXPECTED_CLASS = {
    "correct": "PASS",
    "ignores_scale_b": "MISMATCH",
    "asserts_rank_under_compile": "COMPILE_ONLY_ERROR",
    "refuses_only_in_eager": "ERROR_PARITY",
    "refuses_everywhere": "REFUSED",  # a user kernel refusing what it declares to support
    "declares_m_at_least_8": "UNSUPPORTED",  # the same kernel declaring min_m: 8, at M = 4
    "forces_eager": "FALLBACK",
}
# Kernels of EXPECTED_CLASS that run another planted function, with their declarations.
DECLARED = {"declares_m_at_least_8": planted("declares_m_at_least_8", "refuses_everywhere", min_m=8)}
SPINE_MATRIX = matrix_text([DECLARED.get(name) or planted(name) for name in EXPECTED_CLASS])


def test_inert_without_the_flag(matrix_project, pytester):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = matrix_project.run()
    result.assert_outcomes(passed=1)
    assert "scaled-mm matrix" not in result.stdout.str()
    assert not (pytester.path / ".scaledmm").exists()


def test_plugin_import_does_not_import_torch():
    code = "import sys, pytest_scaledmm.plugin.entry; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_each_outcome_class_from_a_planted_kernel(matrix_project):
    matrix_project.write_matrix(SPINE_MATRIX)
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    # UNSUPPORTED is a skip; PASS a pass; the five others fail.
    result.assert_outcomes(passed=1, skipped=1, failed=5)
    report = matrix_project.report()
    found = {case["params"]["kernel"]: case["outcome"] for case in report["cases"]}
    assert found == EXPECTED_CLASS
    by_kernel = {case["params"]["kernel"]: case for case in report["cases"]}
    assert by_kernel["ignores_scale_b"]["layer"] == "eager+compiled"
    assert by_kernel["forces_eager"]["extra"]["compiled_graph_calls"] == 0
    assert by_kernel["correct"]["extra"]["compiled_graph_calls"] >= 1
    assert by_kernel["refuses_only_in_eager"]["eager_error"]["type"] == "builtins.ValueError"
    summary = result.stdout.str()
    assert "PASS 1, UNSUPPORTED 1, MISMATCH 1, COMPILE_ONLY_ERROR 1, ERROR_PARITY 1, FALLBACK 1, REFUSED 1" in summary
    assert "min_m: 8" in by_kernel["declares_m_at_least_8"]["detail"]


def test_mismatch_names_the_side_off_the_reference(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("wrong_only_compiled")]))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=1)
    (case,) = matrix_project.report()["cases"]
    assert case["outcome"] == "MISMATCH"
    assert case["layer"] == "compiled"
    assert case["errors"]["eager"]["ok"] is True
    assert case["errors"]["compiled"]["ratio"] > 1


def test_failures_grouped_by_signature(matrix_project):
    axes = {"scale_a": ["tensor_0d", "tensor_1d"], "scale_b": ["tensor_1x1", "rowwise"]}
    matrix_project.write_matrix(matrix_text([planted("asserts_rank_under_compile")], axes))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=4)
    report = matrix_project.report()
    (group,) = report["signatures"]
    assert group["count"] == 4 and group["outcome"] == "COMPILE_ONLY_ERROR"
    assert group["example"] in {c["id"] for c in report["cases"]}
    assert "1 failing root cause(s), by tier:" in result.stdout.str()
    result.stdout.fnmatch_lines(["*4 x COMPILE_ONLY_ERROR*scale ranks differ*"])


@pytest.mark.slow
def test_ids_identical_over_two_runs_and_under_xdist(matrix_project):
    # Built-in kernels: xdist workers rebuild sys.path from the controller's start-up copy, so
    # they would not see the planted kernels' directory.
    matrix_project.write_matrix(
        """
        version: 1
        kernels: [aten_scaled_mm, int8_w8a8]
        axes: {scale_a: [tensor_0d, tensor_1d, rowwise], scale_b: [tensor_0d, rowwise], mode: [eager, aot_eager], m: [32], k: [32], n: [32]}
        profiles: {default: {cases: 8}}
        """
    )
    first = matrix_project.collect()
    second = matrix_project.collect()
    assert len(first) == 8 and first == second
    result = matrix_project.run("--scaledmm-matrix", "-n", "2", "--scaledmm-report", "report.json")
    result.stdout.fnmatch_lines(["*2 workers*"])
    report = matrix_project.report()
    assert sorted(c["id"] for c in report["cases"]) == sorted(first)
    assert report["matrix"]["cases"] == 8  # the controller never collects: it still says how many
    outcomes = result.parseoutcomes()
    # A boundary case whose sides raise differently is tolerated (it passes, shown apart).
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "skipped", "tolerated", "lenient")) == 8
    assert report["environment"]["torch"]
    assert report["session"]["complete"] is True


def test_generation_is_independent_of_the_hash_seed(tmp_path):
    code = (
        "from pytest_scaledmm.matrix.spec import load_spec; from pytest_scaledmm.matrix.cases import generate_cases;"
        f"s = load_spec({str(REPO / 'matrix.yaml')!r}); print('\\n'.join(c.id for c in generate_cases(s, s.profile('default'))[0]))"
    )
    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        runs.append(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
        )
    assert runs[0] == runs[1]
    assert len(runs[0].split()) == load_spec(REPO / "matrix.yaml").profile("default").cases


def test_default_profile_covers_every_valid_scale_pairing_in_every_mode_on_the_cpu():
    """On the CPU the default profile has room for every scale pairing the model accepts under
    every mode that runs there; sizes eager refuses still come as boundary cases."""
    spec = load_spec(REPO / "matrix.yaml")
    cases, notes = generate_cases(spec, spec.profile("default"), "cpu")
    assert len({c.id for c in cases}) == len(cases) == spec.profile("default").cases
    assert notes["truncated"] == 0 and notes["left_out_modes"] == ["triton-gemm"]
    valid = [c for c in cases if c["purpose"] == "valid"]
    fp8 = {(c["scale_a"], c["scale_b"], c["mode"]) for c in valid if c["kernel"] == "aten_scaled_mm"}
    possible = {tuple(t) for t in notes["possible"]["aten_scaled_mm"]["scale_pair_mode"]}
    assert possible and not possible - fp8
    # Pairings without a recipe are possible only where a scale degenerates to one element.
    assert ("tensor_0d", "rowwise", "inductor") not in possible and ("rowwise", "rowwise", "inductor") in possible
    assert any(c["m"] == 1 for c in valid) and any(c["k"] % 16 for c in valid)


def test_profile_bounds_the_number_of_cases(matrix_project):
    axes = {"scale_a": ["tensor_0d", "tensor_1d"], "scale_b": ["tensor_0d", "tensor_1d"]}
    matrix_project.write_matrix(
        matrix_text([planted("correct")], axes, profiles={"default": {"cases": 3}, "small": {"cases": 2}})
    )
    assert len(matrix_project.collect()) == 3
    assert len(matrix_project.collect("--scaledmm-profile", "small")) == 2


@pytest.mark.parametrize(
    "text, key",
    [
        (
            "version: 1\nkernels: [aten_scaled_mm]\naxes: {mode: [warp-speed]}\nprofiles: {default: {cases: 1}}\n",
            "axes.mode[0]",
        ),
        (
            "version: 1\nkernels: [aten_scaled_mm]\naxes: {}\nprofiles: {default: {cases: 1}}\nshapes: []\n",
            "(top level)",
        ),
        ("version: 1\nkernels: [nope]\naxes: {}\nprofiles: {default: {cases: 1}}\n", "kernels[0]"),
        (
            "version: 1\nkernels: [aten_scaled_mm]\naxes: {m: {min: 9, max: 2}}\nprofiles: {default: {cases: 1}}\n",
            "axes.m",
        ),
        (
            "version: 1\nkernels: [{name: k, impl: 'no_such_module:fn'}]\naxes: {}\nprofiles: {default: {cases: 1}}\n",
            "kernels[0].impl",
        ),
        ("version: 1\nkernels: [aten_scaled_mm\naxes: {}\n", ""),
    ],
)
def test_malformed_matrix_is_one_clear_usage_error(matrix_project, text, key):
    matrix_project.write_matrix(text)
    result = matrix_project.run("--scaledmm-matrix")
    assert result.ret == 4
    err = result.stderr.str()
    assert "matrix.yaml" in err and f"key '{key}'" in err if key else "not valid YAML" in err
    assert "Traceback" not in err + result.stdout.str()


def test_unknown_profile_and_device_are_usage_errors(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-profile", "huge")
    assert result.ret == 4 and "key 'profiles.huge'" in result.stderr.str()
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-device", "tpu")
    assert result.ret == 4 and "--scaledmm-device" in result.stderr.str()
    if not torch_has_gpu():
        result = matrix_project.run("--scaledmm-matrix", "--scaledmm-device", "cuda")
        assert result.ret == 4 and "torch.cuda.is_available() is False" in result.stderr.str()
        assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_report_contents_and_default_location(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct"), planted("ignores_scale_b")]))
    matrix_project.run("--scaledmm-matrix").assert_outcomes(passed=1, failed=1)
    matrix_project.run("--scaledmm-matrix").assert_outcomes(passed=1, failed=1)
    reports = sorted((matrix_project.path / ".scaledmm" / "reports").glob("*.json"))
    assert len(reports) == 2  # each run its own file: the earlier report is still there
    report = json.loads(reports[-1].read_text())
    assert report["schema"] == "pytest-scaledmm/report" and report["schema_version"] == 2
    for key in ("torch", "python", "device_name", "arch", "hypothesis", "plugin", "tox_env"):
        assert key in report["environment"]
    assert report["matrix"]["hash"] and report["matrix"]["seed"] == 20240501
    assert report["summary"] == {"MISMATCH": 1, "PASS": 1}
    case = next(c for c in report["cases"] if c["outcome"] == "MISMATCH")
    assert set(case) >= {"id", "params", "outcome", "signature", "errors", "timing"}
    assert case["timing"]["eager_s"] > 0 and case["timing"]["compile_s"] > 0
    assert case["errors"]["eager"]["ratio"] > 1


def test_earlier_report_is_kept_and_writes_are_atomic(tmp_path, monkeypatch):
    from pytest_scaledmm.reports import report as report_module

    target = tmp_path / "r.json"
    report_module.write_atomic(target, {"old": True})

    def broken_dump(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report_module, "dumps_strict", broken_dump)
    with pytest.raises(RuntimeError):
        report_module.write_atomic(target, {"new": True})
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_signature_strips_sizes_addresses_and_paths():
    one = normalise_message(
        "mat1 and mat2 shapes cannot be multiplied (4x32 and 31x16) at 0x7f3a in /usr/lib/x.py line 12"
    )
    two = normalise_message("mat1 and mat2 shapes cannot be multiplied (8x64 and 63x8) at 0x1 in /opt/y/z.py line 99")
    assert one == two
    error = ErrorInfo(
        "torch._dynamo.exc.TorchRuntimeError", "wrapped", "builtins.RuntimeError", "dynamo", "size s0 vs s1"
    )
    assert signature_of(error) == "TorchRuntimeError <- RuntimeError: size s? vs s?"


@pytest.mark.slow
def test_fp8_scaled_mm_rank_pair_runs_on_this_cpu(matrix_project, cpu_fp8_mm):
    matrix_project.write_matrix(
        """
        version: 1
        kernels: [aten_scaled_mm]
        axes: {scale_a: [tensor_0d], scale_b: [tensor_1d], mode: [inductor], m: [17], k: [32], n: [16]}
        profiles: {default: {cases: 1}}
        """
    )
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    (case,) = matrix_project.report()["cases"]
    assert case["id"].startswith("fp8e4m3-s0d_x_s1d-m17k32n16-bf16-inductor-")
    # Measured on torch 2.13 CPU: both paths agree with the reference for this pairing.
    assert case["outcome"] == "PASS", case
    result.assert_outcomes(passed=1)


def test_wrong_eager_result_outranks_a_compile_error():
    from pytest_scaledmm.verdict.classify import classify
    from pytest_scaledmm.verdict.outcome import ErrorInfo

    compiled = ErrorInfo(
        "torch._inductor.exc.InductorError",
        "LoweringException: AssertionError:",
        "torch._inductor.exc.LoweringException",
        "inductor",
    )
    wrong = {"ok": False, "ratio": 9.0, "max_abs": 3.0}
    right = {"ok": True, "ratio": 0.1, "max_abs": 0.0}
    masked = classify(None, compiled, 0, wrong, None)
    assert (masked.outcome, masked.layer) == ("MISMATCH", "eager")
    assert "compiled raised InductorError" in masked.detail
    assert classify(None, compiled, 0, right, None).outcome == "COMPILE_ONLY_ERROR"


def test_case_ids_do_not_depend_on_loaded_modules(tmp_path):
    # Hypothesis can mix integer constants from the user's loaded modules into its draws.
    (tmp_path / "many_constants.py").write_text("A = [37, 101, 513, 7, 999, 4097, 333, 29, 61, 257, 1023]\n")
    (tmp_path / "m.yaml").write_text(
        "version: 1\nkernels: [aten_scaled_mm]\n"
        "axes: {mode: [eager, inductor], m: {min: 1, max: 4096}, k: {min: 16, max: 1024}, n: {min: 16, max: 1024}}\n"
        "profiles: {default: {cases: 30}}\n"
    )
    code = (
        "{extra}from pytest_scaledmm.matrix.spec import load_spec; from pytest_scaledmm.matrix.cases import generate_cases;"
        "s = load_spec('m.yaml'); print(' '.join(c.id for c in generate_cases(s, s.profile('default'))[0]))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code.format(extra=extra)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for extra in ("", "import many_constants; ")
    ]
    assert runs[0] == runs[1] and len(runs[0].split()) == 30
    assert not (tmp_path / ".hypothesis").exists()


def test_doctor_refuses_an_unknown_or_absent_device():
    for device in ("tpu", "cuda:7"):
        out = subprocess.run(
            [sys.executable, "-m", "pytest_scaledmm", "doctor", "--device", device], capture_output=True, text=True
        )
        if device == "cuda:7" and torch_has_gpu():
            continue
        assert out.returncode == 2, out
        assert "scaledmm doctor: error:" in out.stderr and "Traceback" not in out.stderr
