"""Repro scripts run in a fresh process: exit 10 (repro.EXIT_REPRODUCED) while the failure exists,
0 once fixed; they need nothing from this package."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_scaledmm import cli
from pytest_scaledmm.reports import repro
from pytest_scaledmm.matrix.cases import make_case

# Runs a script with the plugin made unimportable: a repro needs torch only.
WITHOUT_PLUGIN = (
    "import runpy, sys; sys.modules['pytest_scaledmm'] = None; "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)

BUGGY = '''\
import torch


def kernel(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Asserts equal scale ranks when compiled, as Inductor's lowering does."""
    if torch.compiler.is_compiling():
        torch._check(scale_a.dim() == scale_b.dim(), lambda: "scale ranks differ")
    return ((a.float() * scale_a) @ (b.float() * scale_b)).to(out_dtype)
'''
FIXED = BUGGY.replace("    if torch.compiler.is_compiling():\n", "    if False:\n")

REPRO_MATRIX = """\
version: 1
kernels:
  - {name: mine, impl: 'mykernels:kernel'}
  - {name: forgets_scale, impl: 'planted_kernels:ignores_scale_b'}
axes:
  scale_a: [tensor_0d]
  scale_b: [tensor_1d]
  mode: [eager]
  m: [4]
  k: [32]
  n: [16]
profiles:
  default: {cases: 2}
"""


def _run_script(path: Path, *args, cwd=None):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PLUGIN, str(path), "--strict-inputs", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd,
    )
    return done.returncode, done.stdout + done.stderr


def test_repro_scripts_reproduce_in_a_fresh_process_and_pass_once_fixed(matrix_project, pytester):
    kernel_file = pytester.path / "mykernels.py"
    kernel_file.write_text(BUGGY)
    pytester.syspathinsert()
    matrix_project.write_matrix(REPRO_MATRIX)
    result = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-repro-dir", "repros", "--scaledmm-report", "report.json", "--no-scaledmm-triage"
    )
    result.assert_outcomes(failed=2)
    index = json.loads((pytester.path / "repros" / "index.json").read_text())
    by_kernel = {entry["case"].split(".")[0]: name for name, entry in index.items()}
    assert set(by_kernel) == {"mine", "forgets_scale"}
    for name, entry in index.items():
        assert name == repro.script_name(entry["outcome"], entry["signature"])
    assert "repro scripts: 2 in" in result.stdout.str()

    mine = pytester.path / "repros" / by_kernel["mine"]
    text = mine.read_text()
    assert "'m': 4," in text and "SEED = " in text and "COMPILE = {'backend': 'eager'" in text
    assert "float8_e4m3fn" in text  # the exact tensors: shapes, strides, dtypes, checksums
    code, out = _run_script(mine, cwd=pytester.path)
    assert code == repro.EXIT_REPRODUCED, out
    assert "REPRODUCED" in out and "COMPILE_ONLY_ERROR" in out

    mismatch = pytester.path / "repros" / by_kernel["forgets_scale"]
    code, out = _run_script(mismatch, cwd=pytester.path)
    assert code == repro.EXIT_REPRODUCED and "MISMATCH (eager+compiled)" in out, out

    kernel_file.write_text(FIXED)
    code, out = _run_script(mine, cwd=pytester.path)
    assert code == 0, out
    assert "NOT REPRODUCED" in out

    # After the fact, from the report: the same scripts.
    assert cli.main(["repro", str(pytester.path / "report.json"), "--out", str(pytester.path / "later")]) == 0
    assert sorted(p.name for p in (pytester.path / "later").glob("repro_*.py")) == sorted(index)


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "fp8_linear", "scale_a": "tensor_0d", "scale_b": "tensor_1d", "scale_layout": "noncontiguous",
         "activation_rank": 3, "m": 6, "k": 32, "n": 16, "mode": "aot_eager"},
        {"kernel": "int8_w8a8", "dtype_a": "int8", "dtype_b": "int8", "scale_a": "rowwise", "scale_b": "rowwise",
         "bias": True, "special_scale": "negative", "m": 3, "k": 32, "n": 16, "mode": "eager"},
    ],
    ids=["fp8_linear", "int8_w8a8"],
)
def test_builtin_kernels_are_embedded_and_inputs_regenerate_exactly(tmp_path, params):
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
    from pytest_scaledmm.matrix.spec import AXIS_DEFAULTS

    full = {axis: values[0] for axis, values in AXIS_DEFAULTS.items()}
    full.update(params)
    case = make_case(full)
    record = {"id": case.id, "params": case.params, "outcome": "COMPILE_ONLY_ERROR", "signature": "RuntimeError: planted",
              "layer": "inductor", "compiled_error": {"type": "builtins.RuntimeError", "root_type": "builtins.RuntimeError"}}
    code = repro.kernel_code(params["kernel"], BUILTIN_IMPLS[params["kernel"]], None)
    assert "import pytest_scaledmm" not in code and "from pytest_scaledmm" not in code
    path = repro.write_script(tmp_path, record, {"device": "cpu", "torch": "2.x"}, 20240501, code, 60.0)
    status, out = _run_script(path)
    # This case passes on the CPU: the script runs the embedded kernel on identical inputs.
    assert status == 0, out
    assert "WARNING" not in out and "NOT REPRODUCED" in out


def test_a_script_name_is_a_short_hash_of_the_signature():
    one = repro.script_name("COMPILE_ONLY_ERROR", "InductorError <- AssertionError: x")
    assert one == repro.script_name("COMPILE_ONLY_ERROR", "InductorError <- AssertionError: x")
    assert one != repro.script_name("COMPILE_ONLY_ERROR", "InductorError <- AssertionError: y")
    assert one.startswith("repro_") and len(one) == len("repro_") + 10 + 3


def test_repro_header_has_no_docstring_breakers(tmp_path):
    case = make_case({"kernel": "aten_scaled_mm", "scale_a": "tensor_0d", "scale_b": "tensor_0d", "dtype_a": "e4m3fn",
                      "dtype_b": "e4m3fn", "out_dtype": "bf16", "bias": False, "use_fast_accum": False,
                      "mode": "eager", "m": 16, "k": 32, "n": 16})
    record = {"id": case.id, "params": case.params, "outcome": "MISMATCH", "signature": 'a """ b \\ c', "layer": "compiled"}
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS

    code = repro.kernel_code("aten_scaled_mm", BUILTIN_IMPLS["aten_scaled_mm"], None)
    path = repro.write_script(tmp_path, record, {}, 1, code, 10.0)
    compile(path.read_text(), str(path), "exec")
    assert textwrap.dedent(path.read_text()).startswith("#!/usr/bin/env python3")


def _template_functions(*names: str) -> dict:
    """Functions of the repro template, compiled on their own (they use no template fields)."""
    import ast

    text = (Path(repro.__file__).parent / "templates" / "repro_script.py.tmpl").read_text()
    nodes = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name in names]
    namespace: dict = {}
    exec(compile(ast.Module(nodes, []), "repro_script.py.tmpl", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("eager", ["returns", "off", "raises"])
@pytest.mark.parametrize("compiled", ["returns", "off", "raises alike", "raises otherwise"])
@pytest.mark.parametrize("graphs", [0, 1])
def test_a_script_classifies_as_the_run_does(eager, compiled, graphs):
    """The script's own verdict must match the run's, or a reproduced failure reads as different."""
    from pytest_scaledmm.verdict.outcome import ErrorInfo
    from pytest_scaledmm.execution.run import classify

    script_classify = _template_functions("repro_classify", "_names")["repro_classify"]

    def check(ok):
        return {"ok": ok, "ratio": 0.0 if ok else 9.0, "max_abs": 1.0}

    eager_exc = ValueError("scale_b must be 2-D") if eager == "raises" else None
    compiled_exc = {
        "raises alike": ValueError("scale_b must be 2-D"),
        "raises otherwise": AssertionError("lowering failed"),
    }.get(compiled)
    eager_error = ErrorInfo("builtins.ValueError", str(eager_exc), "builtins.ValueError") if eager_exc else None
    compiled_error = None
    if compiled_exc is not None:
        name = f"builtins.{type(compiled_exc).__name__}"
        compiled_error = ErrorInfo(name, str(compiled_exc), name, "inductor")
    eager_check = None if eager_exc else check(eager == "returns")
    compiled_check = None if compiled_exc else check(compiled == "returns")
    expected = classify(eager_error, compiled_error, graphs, eager_check, compiled_check).outcome
    observed = script_classify(eager_exc, compiled_exc, graphs, eager_check, compiled_check)
    assert observed == expected
