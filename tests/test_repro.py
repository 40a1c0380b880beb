"""Repro scripts run in a fresh process: exit 10 (repro.EXIT_REPRODUCED) while the failure exists,
0 once fixed; they need nothing from this package; each root cause gets a script name of its own."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from case_factory import case_params

from matrices import SYNTHETIC_YAML
from pytest_scaledmm import cli
from pytest_scaledmm.matrix.case_params import make_case
from pytest_scaledmm.reports import repro

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

REPRO_MATRIX = (
    """\
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
"""
    + SYNTHETIC_YAML
    + """\
profiles:
  default: {cases: 2}
"""
)


def _run_script(path: Path, *args, cwd=None, timeout=120):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PLUGIN, str(path), "--strict-inputs", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.slow
def test_repro_scripts_reproduce_in_a_fresh_process_and_pass_once_fixed(matrix_project, pytester):
    kernel_file = pytester.path / "mykernels.py"
    kernel_file.write_text(BUGGY)
    pytester.syspathinsert()
    matrix_project.write_matrix(REPRO_MATRIX)
    result = matrix_project.run(
        "--scaledmm-matrix",
        "--scaledmm-repro-dir",
        "repros",
        "--scaledmm-report",
        "report.json",
        "--no-scaledmm-triage",
    )
    result.assert_outcomes(failed=2)
    index = json.loads((pytester.path / "repros" / "index.json").read_text())
    by_kernel = {entry["case"].split(".")[0]: name for name, entry in index.items()}
    assert set(by_kernel) == {"mine", "forgets_scale"}
    for name, entry in index.items():
        assert name == repro.script_name(entry["outcome"], entry["cause"], entry["kernel"])
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


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        case_params(
            kernel="fp8_linear",
            scale_b="tensor_1d",
            scale_layout="noncontiguous",
            activation_rank=3,
            m=6,
            mode="aot_eager",
        ),
        case_params(
            kernel="int8_w8a8",
            dtype_a="int8",
            dtype_b="int8",
            scale_a="rowwise",
            scale_b="rowwise",
            bias=True,
            special_scale="negative",
            m=3,
        ),
    ],
    ids=["fp8_linear", "int8_w8a8"],
)
def test_builtin_kernels_are_embedded_and_inputs_regenerate_exactly(tmp_path, params):
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
    from pytest_scaledmm.matrix.spec import AXIS_DEFAULTS

    full = {axis: values[0] for axis, values in AXIS_DEFAULTS.items()}
    full.update(params)
    case = make_case(full)
    record = {
        "id": case.id,
        "params": case.params.to_json(),
        "outcome": "COMPILE_ONLY_ERROR",
        "signature": "RuntimeError: planted",
        "layer": "inductor",
        "compiled_error": {"type": "builtins.RuntimeError", "root_type": "builtins.RuntimeError"},
    }
    code = repro.kernel_code(params["kernel"], BUILTIN_IMPLS[params["kernel"]], None)
    assert "import pytest_scaledmm" not in code and "from pytest_scaledmm" not in code
    # Recorded under this torch: a script replayed under another one warns (checked elsewhere).
    import torch

    path = repro.write_script(
        tmp_path, record, {"device": "cpu", "torch": str(torch.__version__)}, 20240501, code, 60.0
    )
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
    case = make_case(case_params())
    record = {
        "id": case.id,
        "params": case.params.to_json(),
        "outcome": "MISMATCH",
        "signature": 'a """ b \\ c',
        "layer": "compiled",
    }
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS

    code = repro.kernel_code("aten_scaled_mm", BUILTIN_IMPLS["aten_scaled_mm"], None)
    path = repro.write_script(tmp_path, record, {}, 1, code, 10.0)
    tree = ast.parse(path.read_text())
    # The signature stays out of the header docstring it could end, and is whole in the data.
    assert record["signature"] not in ast.get_docstring(tree)
    (expected,) = [
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "EXPECTED"
    ]
    assert expected["signature"] == record["signature"]


# Raises a ValueError on both sides; compiled, Dynamo wraps it as Unsupported <- ObservedValueErrorError
# (torch 2.13), which only the run's refusal matching recognises as the same error.
REFUSING = """\
def kernel(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    raise ValueError("Invalid scaling configuration: this kernel takes M >= 8 only")
"""

REFUSING_MATRIX = (
    """\
version: 1
kernels:
  - {name: declares_min_m, impl: 'refusing:kernel', min_m: 8}
  - {name: declares_nothing, impl: 'refusing:kernel'}
axes:
  scale_a: [tensor_0d]
  scale_b: [tensor_1d]
  mode: [aot_eager]
  m: [4]
  k: [32]
  n: [16]
"""
    + SYNTHETIC_YAML
    + """\
profiles:
  default: {cases: 2}
"""
)


@pytest.mark.slow
def test_a_script_judges_an_alike_refusal_as_the_run_did(matrix_project, pytester):
    """One code for both verdicts: a refusal raised alike but wrapped differently is UNSUPPORTED
    outside the kernel's declared support and REFUSED inside it, in the run and in its script
    (a fresh process without the plugin), with the same signature."""
    (pytester.path / "refusing.py").write_text(REFUSING)
    pytester.syspathinsert()
    matrix_project.write_matrix(REFUSING_MATRIX)
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", "--no-scaledmm-triage")
    result.assert_outcomes(failed=1, skipped=1)
    cases = {c["params"]["kernel"]: c for c in json.loads((pytester.path / "report.json").read_text())["cases"]}
    assert {k: c["outcome"] for k, c in cases.items()} == {
        "declares_min_m": "UNSUPPORTED",
        "declares_nothing": "REFUSED",
    }
    wrapped = cases["declares_nothing"]["compiled_error"]
    assert cases["declares_nothing"]["eager_error"]["type"] != wrapped["type"], wrapped  # differently wrapped
    for kernel, case in cases.items():
        out_dir = pytester.path / kernel
        assert (
            cli.main(
                [
                    "repro",
                    str(pytester.path / "report.json"),
                    "--out",
                    str(out_dir),
                    "--case",
                    case["id"],
                    "--matrix",
                    str(pytester.path / "matrix.yaml"),
                ]
            )
            == 0
        )
        (script,) = out_dir.glob("repro_*.py")
        code, out = _run_script(script, cwd=pytester.path)
        assert f"observed: {case['outcome']}: {case['signature']}\n" in out, out
        assert code == repro.EXIT_REPRODUCED and "REPRODUCED" in out, out


def _verdict_bodies() -> dict:
    return {module.__name__: repro._module_body(module) for module in repro.verdict_modules()}


def test_a_script_embeds_the_verdict_modules_verbatim_and_no_verdict_of_its_own(tmp_path):
    """Every verdict module the pipeline and the template need is in the script as it is in the
    package; the template itself defines no function of a verdict module."""
    import ast

    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS

    case = make_case(case_params())
    record = {
        "id": case.id,
        "params": case.params.to_json(),
        "outcome": "MISMATCH",
        "signature": "x",
        "layer": "compiled",
    }
    code = repro.kernel_code("aten_scaled_mm", BUILTIN_IMPLS["aten_scaled_mm"], None)
    text = repro.write_script(tmp_path, record, {}, 1, code, 10.0).read_text()
    bodies = _verdict_bodies()
    needed = {
        f"pytest_scaledmm.verdict.{name}"
        for name in ("pipeline", "classify", "refusals", "oracle", "draw", "reference", "off_pattern", "outcome")
    }
    assert needed <= set(bodies)
    for name, body in bodies.items():
        assert body in text, name
    template = (Path(repro.__file__).parent / "templates" / "repro_script.py.tmpl").read_text()
    own = {
        n.name for n in ast.parse(template.replace("{{", "{").replace("}}", "}")).body if isinstance(n, ast.FunctionDef)
    }
    verdict_names = {n.name for body in bodies.values() for n in ast.parse(body).body if isinstance(n, ast.FunctionDef)}
    assert own and not own & verdict_names


def test_an_embedded_module_may_import_only_its_siblings_by_name(tmp_path):
    import importlib.util

    def module_from(source):
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        return module

    for source in (
        "from . import outcome as oc\n",
        "from ..matrix.spec import KernelSpec\n",
        "from pytest_scaledmm.verdict.outcome import PASS\n",
        "from .outcome import PASS as OK\n",
    ):
        with pytest.raises(repro.ReproError, match="cannot be embedded"):
            repro._sibling_imports(module_from(source))
    assert repro._sibling_imports(module_from("def f():\n    from .outcome import PASS, FAILURES\n")) == {
        "outcome": {"PASS", "FAILURES"}
    }


def test_a_name_bound_twice_in_a_script_is_refused():
    assert repro._rebound("A = 1\ndef f(): pass\nB, A = 2, 3\nimport os\nimport os\n") == ["A"]
    assert repro._rebound(repro.verdict_code()) == []


# -- compile paths: AOTInductor and M marked dynamic or unbacked --------------------------------

# A script that compiles with Inductor at three M builds C++ on the CPU each time: minutes on a
# busy machine.
INDUCTOR_SCRIPT_S = 400


def _compile_path_repros(matrix_project, pytester, kernels, mode, *options):
    """A run of `kernels` in `mode` with repro scripts: {kernel: (record, script path)}."""
    from matrices import matrix_text

    axes = {"scale_a": ["rowwise"], "scale_b": ["rowwise"], "out_dtype": ["bf16"], "mode": [mode], "m": [16]}
    matrix_project.write_matrix(matrix_text(kernels, axes))
    matrix_project.run(
        "--scaledmm-matrix",
        "matrix.yaml",
        "--scaledmm-report",
        "r.json",
        "--scaledmm-repro-dir",
        "repros",
        "--no-scaledmm-triage",
        *options,
    )
    records = json.loads((pytester.path / "r.json").read_text())["cases"]
    return {r["params"]["kernel"]: (r, pytester.path / "repros" / repro.record_script_name(r)) for r in records}


@pytest.mark.slow
def test_a_repro_of_an_aoti_case_exports_packages_loads_and_calls(
    matrix_project, pytester, plant_aoti_load, cpu_fp8_mm
):
    # Only packages that call _scaled_mm fail to load (planted, no C++ build): torch.compile
    # alone would pass this case.
    from matrices import planted

    plant_aoti_load("fail-scaled")
    found = _compile_path_repros(
        matrix_project, pytester, [planted("scaled_mm", module="planted_aoti_kernels")], "aoti"
    )
    record, script = found["scaled_mm"]
    assert record["outcome"] == "COMPILE_ONLY_ERROR" and record["compiled_error"]["layer"] == "aoti_load", record
    text = script.read_text()
    assert "RUNNER = 'aoti'" in text and "runner=RUNNER" in text
    for call in (
        "torch.export.export(",
        "torch._inductor.aoti_compile_and_package(",
        "torch._inductor.aoti_load_package(",
    ):
        assert call in text
    code, out = _run_script(script, cwd=pytester.path)
    assert code == repro.EXIT_REPRODUCED, out
    assert "cannot load a package that calls _scaled_mm" in out and "compiled: RuntimeError" in out


@pytest.mark.slow
def test_a_repro_of_a_mark_dynamic_case_marks_m_and_runs_the_other_m(matrix_project, pytester):
    from matrices import IN_PROCESS, planted

    kernels = [planted(name, module="planted_compile_kernels") for name in ("branches_on_m", "wrong_beyond_m")]
    found = _compile_path_repros(matrix_project, pytester, kernels, "mark-dynamic", *IN_PROCESS)
    outcomes = {k: r["outcome"] for k, (r, _) in found.items()}
    assert outcomes == {"branches_on_m": "COMPILE_ONLY_ERROR", "wrong_beyond_m": "MISMATCH"}
    said = {}
    for kernel, (record, script) in found.items():
        text = script.read_text()
        assert "RUNNER = 'mark-dynamic'" in text and "runner=RUNNER, other_shapes=other_shapes" in text
        assert "OTHER_M = [{'label': 'm=48', 'm': 48, 'seed': " in text and "'label': 'm=80'" in text
        assert "torch._dynamo.mark_dynamic(" in text
        code, said[kernel] = _run_script(script, cwd=pytester.path, timeout=INDUCTOR_SCRIPT_S)
        assert code == repro.EXIT_REPRODUCED, said[kernel]
        assert f"observed: {record['outcome']}" in said[kernel]
    # The recompile is counted as the run counts it; the other M are checked against their references.
    assert "M marked dynamic: 2 frame(s) compiled; m=48 ok, m=80 ok" in said["branches_on_m"]
    assert "M marked dynamic: 2 frame(s) compiled; m=48 max |err|/tol = " in said["wrong_beyond_m"], said[
        "wrong_beyond_m"
    ]


def test_a_repro_of_a_mark_unbacked_case_marks_m_unbacked(matrix_project, pytester):
    from matrices import IN_PROCESS, planted
    from pytest_scaledmm.matrix.compile_modes import compile_mode

    if compile_mode("mark-unbacked").unavailable():
        pytest.skip(compile_mode("mark-unbacked").unavailable())
    found = _compile_path_repros(
        matrix_project,
        pytester,
        [planted("branches_on_m", module="planted_compile_kernels")],
        "mark-unbacked",
        *IN_PROCESS,
    )
    record, script = found["branches_on_m"]
    # An unbacked M cannot take the kernel's Python branch: the guard on it fails at the first M.
    assert record["outcome"] == "COMPILE_ONLY_ERROR" and "data-dependent" in record["signature"], record
    text = script.read_text()
    assert "RUNNER = 'mark-unbacked'" in text and "'label': 'm=48'" in text
    assert "torch._dynamo.decorators.mark_unbacked(" in text
    code, out = _run_script(script, cwd=pytester.path, timeout=INDUCTOR_SCRIPT_S)
    assert code == repro.EXIT_REPRODUCED, out
    assert "M marked unbacked: 0 frame(s) compiled" in out, out


# -- script names ----------------------------------------------------------------------------------


def _mismatch_record(kernel, cid):
    from test_artifact_safety import BASE_PARAMS

    return {
        "id": cid,
        "params": {**BASE_PARAMS, "kernel": kernel},
        "outcome": "MISMATCH",
        "signature": "MISMATCH: compiled values off the reference",
        "layer": "compiled",
    }


def test_repro_scripts_are_named_per_root_cause_and_never_replace_another(tmp_path):
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
    from pytest_scaledmm.reports import repro

    code = repro.kernel_code("aten_scaled_mm", BUILTIN_IMPLS["aten_scaled_mm"], None)
    one = repro.write_script(tmp_path, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    two = repro.write_script(tmp_path, _mismatch_record("aten_scaled_mm_other", "b-1"), {}, 1, code, 10.0)
    assert one != two and one.exists() and two.exists()
    index = json.loads((tmp_path / "index.json").read_text())
    assert {e["case"] for e in index.values()} == {"a-1", "b-1"}
    # An index that claims the second cause's name for the first: the first gets a name of its own.
    index[one.name] = {**index[one.name], "kernel": "someone_else"}
    (tmp_path / "index.json").write_text(json.dumps(index))
    again = repro.write_script(tmp_path, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    assert again != one and again.name.endswith("_2.py")
    # A file there that pytest-scaledmm did not write, or an index that is not one, is never replaced.
    other = tmp_path / "foreign"
    other.mkdir()
    (other / one.name).write_text("print('mine')\n")
    with pytest.raises(repro.ReproError, match="never replaced"):
        repro.write_script(other, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    assert (other / one.name).read_text() == "print('mine')\n"
    (other / one.name).unlink()
    (other / "index.json").write_text('{"schema": "something else"}')
    with pytest.raises(repro.ReproError, match="never overwritten"):
        repro.write_script(other, _mismatch_record("aten_scaled_mm", "a-1"), {}, 1, code, 10.0)
    assert json.loads((other / "index.json").read_text()) == {"schema": "something else"}


def test_a_repro_of_a_failure_at_another_m_makes_the_eager_call_the_run_made(matrix_project, pytester):
    from matrices import IN_PROCESS, planted

    kernels = [planted(name) for name in ("tile_config_cached_without_m", "correct")]
    found = _compile_path_repros(matrix_project, pytester, kernels, "eager", *IN_PROCESS)
    record, script = found["tile_config_cached_without_m"]
    assert record["outcome"] == "MISMATCH" and "call at another M after the first (m=48)" in record["signature"]
    assert found["correct"][0]["outcome"] == "PASS" and found["correct"][0]["extra"]["other_m"] == 48
    text = script.read_text()
    assert "EAGER_OTHER_M = [{'label': 'm=48', 'm': 48, 'seed': " in text
    code, said = _run_script(script, cwd=pytester.path)
    assert code == repro.EXIT_REPRODUCED, said
    assert "call at another M after the first (m=48)" in said


def test_a_case_whose_process_dies_at_another_m_names_it_and_its_script_makes_the_call(matrix_project, pytester):
    from matrices import planted

    found = _compile_path_repros(matrix_project, pytester, [planted("dies_at_a_second_m")], "eager")
    record, script = found["dies_at_a_second_m"]
    # The child died in the eager call at another M: the parent names the M the call was at.
    assert record["outcome"] == "CRASH" and record["extra"]["other_m"] == 48, record
    assert "EAGER_OTHER_M = [{'label': 'm=48', 'm': 48, 'seed': " in script.read_text()
