import importlib
import json
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

# Modules an in-process run loads lazily, loaded once here: pytester's in-process runs drop what
# a run imported from sys.modules afterwards, so the next run imported them afresh. A test that
# patched the plugin's reporter (`from pytest_scaledmm.plugin import reporter` still gives the old
# one) patched a module the run no longer used; and once, after such runs, Inductor's
# cpp_extension found "module 'setuptools' has no attribute 'Command'". No torch here: see the
# caches below.
try:
    import setuptools  # noqa: F401
except ImportError:  # Python 3.12 venvs come without it; torch then brings it or needs none
    pass

import pytest_scaledmm.execution.isolate  # noqa: F401  its messages' classes must stay the ones tests import
import pytest_scaledmm.plugin.baseline_gate  # noqa: F401
import pytest_scaledmm.plugin.reporter  # noqa: F401

# The test session's compile caches live in a temporary directory, never in the user's default
# Inductor cache (/tmp/torchinductor_<user>), Triton cache (~/.triton) or the checkout: set
# before torch is imported, inherited by xdist workers, isolated children and every subprocess a
# test starts.
# (Inductor itself writes its default into TORCHINDUCTOR_CACHE_DIR on first use, so a variable
# left unset here would hand the default on to every child.)
# The session's temp dir (TMPDIR) is in there too, removed with it: torch precompiles its C++
# headers under its default cache dir in the temp dir whatever TORCHINDUCTOR_CACHE_DIR says, a
# killed compiler leaves its cc*.s files there, and so does a child killed while it built an
# AOTInductor package; pytest's tmp_path folders go with it (`--basetemp DIR` keeps them).
SESSION_CACHES_ENV = "PYTEST_SCALEDMM_TEST_CACHES"
_OWN_CACHES = None


def _use_session_caches() -> None:
    global _OWN_CACHES
    if not os.environ.get(SESSION_CACHES_ENV):  # an xdist worker uses its controller's
        _OWN_CACHES = tempfile.mkdtemp(prefix="scaledmm-test-caches-")
        os.mkdir(os.path.join(_OWN_CACHES, "tmp"))
        os.environ[SESSION_CACHES_ENV] = _OWN_CACHES
    root = os.environ[SESSION_CACHES_ENV]
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    # Hypothesis keeps its examples and its cache of constants in ./.hypothesis otherwise: the checkout.
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(root, "hypothesis")
    # pytest's capture has asked for the temp dir already: tempfile keeps its first answer.
    os.environ["TMPDIR"] = tempfile.tempdir = os.path.join(root, "tmp")


def pytest_unconfigure(config):
    if _OWN_CACHES:
        shutil.rmtree(_OWN_CACHES, ignore_errors=True)


# pytester's in-process runs drop the modules a run imported; these register global caches and
# op libraries and refuse a second import, so load them before any run.
PRELOADED = (
    "torch",
    "torch._dynamo",
    "torch._functorch.aot_autograd",
    "torch._inductor.codecache",
    "torch._inductor.compile_fx",
    "torch._inductor.runtime.autotune_cache",
    "torch._functorch._aot_autograd.autograd_cache",
    "torch._dynamo.pgo",
    "torch._dynamo.package",
    "torch._dynamo.repro.after_dynamo",
    "torch._dynamo.repro.after_aot",
    # torchao registers its op library on import (the torchao pack, tests/test_contracts.py).
    "torchao",
    "torchao.float8.inference",
    "torchao.float8.float8_training_tensor",
    "torchao.quantization.quantize_.workflows.float8.float8_tensor",
    "torchao.quantization.quantize_.workflows.int8.int8_tensor",
)
TESTS_DIR = Path(__file__).parent


def pytest_configure(config):
    # `pytest --scaledmm-matrix` from this checkout loads this file too; it runs no pytester test.
    if config.getoption("scaledmm_matrix", None) is not None:
        return  # a matrix run: its caches are the plugin's (--scaledmm-reuse-cache: the user's)
    _use_session_caches()
    from pytest_scaledmm.execution.quiet import quiet_torch_imports
    from pytest_scaledmm.matrix.packs.torchao import import_torchao, load_note

    with quiet_torch_imports():  # torch's import-time noise, once per xdist worker otherwise
        try:  # torchao's, held back and said in one line of the header (TORCHAO_NOTE)
            _TORCHAO_NOTE.append(import_torchao() and load_note())
        except ImportError:
            pass
        for module in PRELOADED:
            try:
                importlib.import_module(module)
            except ImportError:  # older torch: not there, nothing to protect
                pass
        import torch

        torch._dynamo.list_backends(exclude_tags=())  # imports every registered backend's module
        _warm_torch(torch)


_TORCHAO_NOTE: list = []  # load_note() of the preload's torchao import


def pytest_report_header(config):
    return [note for note in _TORCHAO_NOTE if note]


@pytest.fixture(autouse=True)
def _no_scaledmm_environment(monkeypatch):
    """The plugin reads SCALEDMM_* variables (a CI job's SCALEDMM_PROFILE): the runs in these
    tests see only the ones a test sets."""
    for name in [name for name in os.environ if name.startswith("SCALEDMM_")]:
        monkeypatch.delenv(name)


def _warm_torch(torch):
    """Compile and opcheck a custom op once, as the cases will: what torch imports lazily on the
    way (torch._inductor.test_operators registers an op library on import) stays loaded."""
    import planted_kernels  # defines the planted:: custom ops, which cannot be defined twice

    a = torch.randn(4, 32).to(torch.float8_e4m3fn)
    b = torch.randn(16, 32).to(torch.float8_e4m3fn).t()
    scale = torch.ones(())
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        fn = torch.compile(planted_kernels.correct_custom_op, backend=backend, fullgraph=True)
        fn(a, b, scale, scale, None, torch.bfloat16, False)
    torch._dynamo.reset()
    # float32 operands: test_schema cannot compare fp8 tensors on the CPU.
    args = (a.float(), b.float(), scale, scale)
    torch.library.opcheck(planted_kernels.correct_custom_op, args, {"out_dtype": torch.float32})


@pytest.fixture
def matrix_project(pytester, monkeypatch):
    """A pytester directory that can import the planted kernels: write a matrix, run pytest on
    it, list the case ids it collects, read the report back."""
    pytester.syspathinsert(TESTS_DIR)
    # xdist workers are fresh processes: they find the planted kernels through PYTHONPATH.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))

    class Project:
        path = pytester.path

        @staticmethod
        def write_matrix(text: str, name: str = "matrix.yaml") -> Path:
            return pytester.makefile(Path(name).suffix, **{Path(name).stem: textwrap.dedent(text)})

        @staticmethod
        def run(*args):
            return pytester.runpytest("-p", "no:cacheprovider", "-W", "ignore", *args)

        @staticmethod
        def collect(*args) -> list[str]:
            """The case ids `pytest --scaledmm-matrix --collect-only` lists, in its order."""
            result = Project.run("--scaledmm-matrix", "--collect-only", "-q", *args)
            return [line.split("::", 1)[1].strip() for line in result.outlines if "::" in line]

        @staticmethod
        def report(path="report.json") -> dict:
            return json.loads((pytester.path / path).read_text())

    return Project()


@pytest.fixture
def plant_aoti_load(monkeypatch):
    """plant_aoti_load(how) sets $PLANTED_AOTI_LOAD for tests/planted_aoti_kernels.py (a run, its
    isolated child and a repro script import it); a run imports it in this process too, so the
    torch functions it replaces are put back afterwards."""
    import torch

    for name in ("aoti_compile_and_package", "aoti_load_package"):
        monkeypatch.setattr(torch._inductor, name, getattr(torch._inductor, name))

    def plant(how):
        monkeypatch.setenv("PLANTED_AOTI_LOAD", how)

    return plant


@pytest.fixture
def cpu_fp8_mm():
    """Skips the test where this torch has no fp8 torch._scaled_mm on the CPU, as older releases have not."""
    import torch

    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no torch._scaled_mm or no float8_e4m3fn")
    fp8 = torch.zeros(16, 16, dtype=torch.float8_e4m3fn)
    try:
        torch._scaled_mm(fp8, fp8.t(), scale_a=torch.ones(()), scale_b=torch.ones(()), out_dtype=torch.bfloat16)
    except (NotImplementedError, RuntimeError) as exc:
        pytest.skip(f"torch {torch.__version__} has no CPU fp8 _scaled_mm: {type(exc).__name__}")
