"""The test command writes no compile cache outside a temporary directory of its own: not the
user's default Inductor cache (/tmp/torchinductor_<user>) nor Triton's (~/.triton); what it
writes in the temp dir (precompiled headers, a killed compiler's files, AOTInductor packages,
tmp_path) is in that directory too, removed at the end."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import SESSION_CACHES_ENV

from pytest_scaledmm.execution.cache import OWNED_CACHE_ENV

ROOT = Path(__file__).parent.parent


def test_the_session_points_inductor_triton_and_the_temp_dir_at_its_own_temporary_directory():
    import torch._inductor.runtime.cache_dir_utils as cache_dir_utils

    root = Path(os.environ[SESSION_CACHES_ENV])
    assert root.name.startswith("scaledmm-test-caches-")
    assert Path(cache_dir_utils.cache_dir()) == root / "inductor"
    assert Path(os.environ["TRITON_CACHE_DIR"]) == root / "triton"
    assert Path(tempfile.gettempdir()) == Path(os.environ["TMPDIR"]) == root / "tmp"
    # torch's default cache dir, where it precompiles its C++ headers, is in the session's too.
    assert Path(cache_dir_utils.default_cache_dir()).parent == root / "tmp"


def test_a_child_process_compiles_into_the_session_caches():
    """What a subprocess of a test (a repro script, the doctor's probe, pytest in a tox env) does."""
    inductor = Path(os.environ[SESSION_CACHES_ENV]) / "inductor"
    script = (
        "import torch, torch._inductor.runtime.cache_dir_utils as c\n"
        "f = torch.compile(lambda x: (x * 3).sin(), backend='inductor')\n"
        "f(torch.randn(8))\n"
        "print(c.cache_dir())\n"
    )
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == str(inductor)
    assert any(path.is_file() for path in inductor.rglob("*")), "the compile wrote nothing into the session's cache"


# Tests that compile C++ in a subprocess (precompiled headers), build an AOTInductor package in
# the isolated child, and kill a child that holds one.
SLICE = (
    "tests/test_session_caches.py::test_a_child_process_compiles_into_the_session_caches",
    "tests/test_compile_paths.py::test_aoti_in_the_isolated_child_records_its_outcome_and_compile_time",
    "tests/test_aoti_control.py::test_when_no_package_loads_here_an_aoti_crash_is_skipped_and_the_gate_calls_it_not_proven",
)
# What this session set, that a test command started afresh does not have.
SESSION_ENV = (SESSION_CACHES_ENV, OWNED_CACHE_ENV, "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TMPDIR")


@pytest.mark.slow
def test_the_test_command_leaves_nothing_in_the_temp_dir(tmp_path):
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in SESSION_ENV and not name.startswith(("PYTEST_", "HYPOTHESIS_"))
    }
    env["TMPDIR"] = str(fresh)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *SLICE, "-n", "0", "-q", "-W", "ignore"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout, done.stdout[-3000:]
    assert sorted(path.name for path in fresh.iterdir()) == []
