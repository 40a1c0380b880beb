"""Isolation: a case that kills or hangs its process is a CRASH / TIMEOUT outcome and the run goes
on; replay by id; the run's own Inductor cache and the user's."""

import os
from pathlib import Path

import pytest

from matrices import SYNTHETIC_YAML
from pytest_scaledmm.execution import isolate
from pytest_scaledmm.verdict.outcome import ErrorInfo, Outcome

# Every other axis at one value and the extreme shapes kept out: the cases the tests count.
PINNED = SYNTHETIC_YAML + "limits: {max_operand_elements: 4096}\n"
CRASH_MATRIX = (
    """\
version: 1
kernels:
  - {name: ok_before, impl: 'planted_crash:correct'}
  - {name: aborts, impl: 'planted_crash:aborts'}
  - {name: hangs, impl: 'planted_crash:hangs'}
  - {name: ok_after, impl: 'planted_crash:correct'}
axes:
  scale_a: [tensor_0d]
  scale_b: [tensor_1d]
  mode: [aot_eager]
  m: [4]
  k: [32]
  n: [16]
"""
    + PINNED
    + """profiles:
  default: {cases: 4}
"""
)


def _by_kernel(report):
    return {case["params"]["kernel"]: case for case in report["cases"]}


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_abort_and_hang_become_crash_and_timeout(matrix_project, pytester, workers):
    # xdist workers take the controller's start-up sys.path (not PYTHONPATH): pytest's own
    # `pythonpath` setting puts the planted kernels on it before the plugin loads them.
    pytester.makeini(f"[pytest]\npythonpath = {Path(__file__).parent}\n")
    matrix_project.write_matrix(CRASH_MATRIX)
    result = matrix_project.run(
        "--scaledmm-matrix",
        "--scaledmm-report",
        "report.json",
        "--scaledmm-timeout",
        "6",
        "--no-scaledmm-triage",
        *workers,
    )
    result.assert_outcomes(passed=2, failed=2)
    cases = _by_kernel(matrix_project.report())
    assert cases["aborts"]["outcome"] == "CRASH"
    assert cases["aborts"]["signature"] == "CRASH: process killed by SIGABRT"
    assert cases["aborts"]["id"] in cases["aborts"]["detail"]
    assert "Fatal Python error: Aborted" in cases["aborts"]["detail"]  # the child's own last words
    assert cases["hangs"]["outcome"] == "TIMEOUT"
    assert cases["hangs"]["signature"] == "TIMEOUT: no result within 6 s"
    assert cases["hangs"]["id"] in cases["hangs"]["detail"]
    assert "planted_crash.py" in cases["hangs"]["detail"]  # where it hung, from the stack dump
    assert cases["hangs"]["layer"] == "eager"
    # Every other case ran, in a replaced child, and is reported.
    assert cases["ok_before"]["outcome"] == cases["ok_after"]["outcome"] == "PASS"
    out = result.stdout.str()
    assert "CRASH: process killed by SIGABRT" in out and "TIMEOUT: no result within 6 s" in out


def test_isolate_no_runs_in_the_pytest_process(matrix_project, monkeypatch):
    def no_child(*args, **kwargs):
        raise AssertionError("a child process was started")

    monkeypatch.setattr(isolate, "ChildRunner", no_child)
    matrix_project.write_matrix(
        CRASH_MATRIX.replace("  - {name: aborts, impl: 'planted_crash:aborts'}\n", "")
        .replace("  - {name: hangs, impl: 'planted_crash:hangs'}\n", "")
        .replace("cases: 4", "cases: 2")
    )
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-isolate=no", "--scaledmm-report", "report.json")
    result.assert_outcomes(passed=2)


def _record_spawns(monkeypatch, tmp_path):
    """Child processes and folders this run's isolation makes, with the folders under tmp_path."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    spawned = []
    real_start = isolate._start_child  # forked by the run's fork server, or spawned

    def start(*args):
        proc, conn = real_start(*args)
        spawned.append(proc)
        return proc, conn

    monkeypatch.setattr(isolate, "_start_child", start)
    return spawned, tmp_path / "tmp"


@pytest.mark.parametrize("selection", [[], ["-k", "no_such_case"]], ids=["cases-run", "all-deselected"])
def test_child_started_at_configure_is_used_or_ended(matrix_project, monkeypatch, tmp_path, selection):
    spawned, temp_root = _record_spawns(monkeypatch, tmp_path)
    matrix_project.write_matrix(
        CRASH_MATRIX.replace("  - {name: aborts, impl: 'planted_crash:aborts'}\n", "")
        .replace("  - {name: hangs, impl: 'planted_crash:hangs'}\n", "")
        .replace("cases: 4", "cases: 2")
    )
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *selection)
    if selection:
        result.assert_outcomes(deselected=2)
    else:
        result.assert_outcomes(passed=2)
        assert [c["outcome"] for c in matrix_project.report()["cases"]] == ["PASS", "PASS"]
    assert len(spawned) == 1  # the early child ran both cases: no second start
    assert all(not proc.is_alive() for proc in spawned)
    assert not list(temp_root.glob("scaledmm-child-*"))


def test_collect_only_starts_no_child(matrix_project, monkeypatch, tmp_path):
    spawned, _ = _record_spawns(monkeypatch, tmp_path)
    matrix_project.write_matrix(CRASH_MATRIX)
    matrix_project.run("--scaledmm-matrix", "--collect-only").assert_outcomes()
    assert spawned == []


def test_hook_callables_that_cannot_be_imported_stay_in_process():
    import planted_kernels

    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS

    def local(a, b, scale_a, scale_b, **kw):
        return None

    refs = isolate.kernel_refs(
        {"aten_scaled_mm": BUILTIN_IMPLS["aten_scaled_mm"], "planted": planted_kernels.correct, "local": local}, {}
    )
    assert refs == {
        "aten_scaled_mm": "builtin:aten_scaled_mm",
        "planted": "impl:planted_kernels:correct",
        "local": None,
    }
    local.__module__ = "conftest"
    local.__qualname__ = "local"
    assert isolate.kernel_refs({"from_conftest": local}, {}) == {"from_conftest": None}


def test_a_cuda_error_that_poisons_the_context_replaces_the_child():
    error = ErrorInfo(
        "torch.AcceleratorError", "CUDA error: an illegal memory access was encountered", "torch.AcceleratorError"
    )
    assert isolate._poisons_context(Outcome("COMPILE_ONLY_ERROR", compiled_error=error))
    harmless = ErrorInfo("builtins.RuntimeError", "expected scale_a to be 2-D", "builtins.RuntimeError")
    assert not isolate._poisons_context(Outcome("COMPILE_ONLY_ERROR", compiled_error=harmless))


def test_layer_of_a_crash_from_the_stack_dump():
    dump = """Fatal Python error: Segmentation fault

Thread 0x00007f00 (most recent call first):
  File "/x/threading.py", line 320 in wait

Current thread 0x00007f01 (most recent call first):
  File "/site-packages/torch/_inductor/select_algorithm.py", line 10 in benchmark
  File "/site-packages/torch/_dynamo/convert_frame.py", line 20 in compile
  File "/work/pytest_scaledmm/run.py", line 183 in run_case
  File "/work/pytest_scaledmm/isolate.py", line 124 in _serve
"""
    assert isolate._layer_from_stack(dump) == "inductor"
    eager = 'Current thread 0x1 (most recent call first):\n  File "/k.py", line 3 in kernel\n  File "/r/run.py", line 9 in run_case\n'
    assert isolate._layer_from_stack(eager) == "eager"
    assert isolate._layer_from_stack("Killed") is None


REPLAY_MATRIX = (
    """\
version: 1
kernels:
  - {name: correct, impl: 'planted_kernels:correct'}
axes:
  scale_a: [tensor_0d, tensor_1d]
  scale_b: [tensor_0d, tensor_1d]
  mode: [eager]
  m: [4]
  k: [32]
  n: [16]
"""
    + PINNED
    + """profiles:
  default: {cases: 4}
  wide: {cases: 5, axes: {m: [4, 8]}}
"""
)


def test_replay_by_id_runs_exactly_that_case(matrix_project):
    matrix_project.write_matrix(REPLAY_MATRIX)
    ids = matrix_project.collect()
    assert len(ids) == 4
    wanted = ids[2]
    result = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-case", wanted, "--scaledmm-report", "report.json", "-v"
    )
    result.assert_outcomes(passed=1, deselected=3)
    assert [case["id"] for case in matrix_project.report()["cases"]] == [wanted]
    both = matrix_project.run("--scaledmm-matrix", "--scaledmm-case", ids[0], "--scaledmm-case", ids[3], "-q")
    both.assert_outcomes(passed=2, deselected=2)


def test_unknown_case_id_is_a_usage_error_with_close_matches(matrix_project):
    matrix_project.write_matrix(REPLAY_MATRIX)
    ids = matrix_project.collect()
    typo = ids[1][:-1] + ("0" if ids[1][-1] != "0" else "1")
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-case", typo)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"unknown case id {typo!r}" in err and "close matches" in err and ids[1] in err
    assert "Traceback" not in err


def test_case_id_of_another_profile_names_that_profile(matrix_project):
    matrix_project.write_matrix(REPLAY_MATRIX)
    wide = matrix_project.collect("--scaledmm-profile", "wide")
    default = set(matrix_project.collect())
    only_wide = next(cid for cid in wide if cid not in default)
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-case", only_wide)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "add --scaledmm-profile wide" in result.stderr.str()


CACHE_MATRIX = """\
version: 1
kernels:
  - {name: records_cache_dir, impl: 'planted_crash:records_cache_dir'}
axes:
  scale_a: [tensor_0d]
  scale_b: [tensor_0d]
  mode: [eager]
  m: [4]
  k: [32]
  n: [16]
  dtype_a: [e4m3fn]
  dtype_b: [e4m3fn]
  out_dtype: [bf16]
  bias: [false]
  use_fast_accum: [false]
  scale_layout: [contiguous]
  activation_rank: [2]
  special_scale: [none]
  value_regime: [standard]
  operand_layout: [dense]
  bias_dtype: [out]
  scale_dtype: [fp32]
limits: {max_operand_elements: 4096}
profiles:
  default: {cases: 1}
"""


def test_a_run_uses_its_own_cache_and_never_deletes_the_users(matrix_project, monkeypatch, tmp_path):
    users = tmp_path / "my-inductor-cache"
    users.mkdir()
    (users / "precious").write_text("compiled last week")
    log = tmp_path / "cache.log"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(users))
    monkeypatch.setenv("SCALEDMM_TEST_CACHE_LOG", str(log))
    monkeypatch.delenv("PYTEST_SCALEDMM_RUN_CACHE", raising=False)
    matrix_project.write_matrix(CACHE_MATRIX)

    matrix_project.run("--scaledmm-matrix").assert_outcomes(passed=1)
    used = log.read_text().split()[-1]
    assert "scaledmm-cache-" in used and not used.startswith(str(users))
    assert not os.path.exists(used)  # the run's own cache is gone with the run ...
    assert (users / "precious").read_text() == "compiled last week"  # ... the user's is untouched
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(users)  # and is the process's again

    matrix_project.run("--scaledmm-matrix", "--scaledmm-reuse-cache").assert_outcomes(passed=1)
    assert log.read_text().split()[-1] == str(users)
    assert (users / "precious").exists()


def test_a_run_keeps_its_temp_dir_in_its_own_cache_and_gives_the_process_back_its_own(monkeypatch):
    import subprocess
    import sys
    import tempfile

    import torch._inductor.codecache  # noqa: F401  imported before the claim, as a conftest may
    import torch._inductor.config as inductor_config

    from pytest_scaledmm.execution.cache import OWNED_CACHE_ENV, FreshCache

    monkeypatch.delenv(OWNED_CACHE_ENV, raising=False)
    temp, temp_env = tempfile.gettempdir(), os.environ.get("TMPDIR")
    headers = {"cpp_cache_precompile_headers": True, "aot_inductor.precompile_headers": True}
    with inductor_config.patch(headers):  # torch's defaults, whatever this process set
        cache = FreshCache()
        cache.claim()
        try:
            run = Path(cache.path)
            assert Path(tempfile.gettempdir()) == Path(os.environ["TMPDIR"]) == run / "tmp"
            # A process the run starts (a worker, the child, a compiler) takes its temp dir, and
            # torch its default cache dir (where it precompiles headers) from there.
            script = "from torch._inductor.runtime.cache_dir_utils import default_cache_dir; print(default_cache_dir())"
            done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True)
            assert Path(done.stdout.strip().splitlines()[-1]).parent == run / "tmp", done.stderr[-2000:]
            # This process chose its headers' directory before the claim: it precompiles none meanwhile.
            assert inductor_config.cpp_cache_precompile_headers is False
            assert inductor_config.aot_inductor.precompile_headers is False
        finally:
            cache.release()
        assert not run.exists()
        assert tempfile.gettempdir() == temp and os.environ.get("TMPDIR") == temp_env
        assert inductor_config.cpp_cache_precompile_headers is True
        assert inductor_config.aot_inductor.precompile_headers is True


@pytest.mark.slow
def test_the_main_job_leaves_nothing_in_the_temp_dir(matrix_project, pytester, monkeypatch, tmp_path):
    """The README's main job (xdist workers, each with its isolated child) on C++ kernels and an
    AOTInductor package, in a fresh process whose temp dir and Inductor cache are torch's defaults."""
    from matrices import matrix_text

    fresh = tmp_path / "tmp"
    fresh.mkdir()
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "PYTEST_SCALEDMM_RUN_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(fresh))
    matrix_project.write_matrix(matrix_text(["int8_w8a8"], {"mode": ["inductor", "aoti"], "m": [16]}))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--scaledmm-matrix", "--scaledmm-report", "report.json", "-n", "2"
    )
    result.assert_outcomes(passed=2)
    assert all(case["timing"].get("compile_s") for case in matrix_project.report()["cases"])
    assert sorted(path.name for path in fresh.iterdir()) == []


class _ExitedChild:
    """A child process that has already exited (status 0), as one that failed to warm up does."""

    pid = 2**22 + 12345  # no such process group: killing it is a no-op
    exitcode = 0

    def is_alive(self):
        return False

    def join(self, timeout=None):
        pass

    def kill(self):
        pass


def test_a_child_that_failed_to_warm_up_is_one_clear_harness_error():
    import multiprocessing

    from pytest_scaledmm.execution.run import RunContext
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS

    parent, child = multiprocessing.Pipe()
    child.send(("error", "Traceback (most recent call last):\nImportError: libcudart.so.13: cannot open shared object"))
    child.close()
    spare = isolate.SpareChild.__new__(isolate.SpareChild)
    spare.dir = str(Path(isolate.tempfile.mkdtemp(prefix="scaledmm-child-")))
    spare.log = os.path.join(spare.dir, "child.log")
    spare.proc, spare.conn = _ExitedChild(), parent
    ctx = RunContext("cpu", 1, {}, {"aten_scaled_mm": BUILTIN_IMPLS["aten_scaled_mm"]})
    runner = isolate.ChildRunner(ctx, timeout=5, spare=spare)
    from case_factory import case_params

    from pytest_scaledmm.matrix.case_params import Case

    case = Case("aten_scaled_mm-s0d_x_s0d", case_params())
    with pytest.raises(isolate.HarnessError, match=r"could not start:\n(?s:.*)ImportError: libcudart"):
        runner.run(case)
    runner.close()
    assert not os.path.exists(spare.dir)
