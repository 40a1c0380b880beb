"""The test command writes no compile cache outside a temporary directory of its own: not the
user's default Inductor cache (/tmp/torchinductor_<user>) nor Triton's (~/.triton)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import SESSION_CACHES_ENV


def test_the_session_points_inductor_and_triton_at_its_own_temporary_directory():
    import torch._inductor.runtime.cache_dir_utils as cache_dir_utils

    root = Path(os.environ[SESSION_CACHES_ENV])
    assert root.name.startswith("scaledmm-test-caches-") and root.parent == Path(tempfile.gettempdir())
    assert Path(cache_dir_utils.cache_dir()) == root / "inductor"
    assert Path(os.environ["TRITON_CACHE_DIR"]) == root / "triton"
    assert Path(cache_dir_utils.default_cache_dir()) != root / "inductor"  # the user's, left alone


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
