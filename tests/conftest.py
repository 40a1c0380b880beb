import json
import os
import textwrap
from pathlib import Path

import pytest
import importlib

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
)


def pytest_configure(config):
    # `pytest --scaledmm-matrix` from this checkout loads this file too; it runs no pytester test.
    if config.getoption("scaledmm_matrix", None) is not None:
        return
    for module in PRELOADED:
        try:
            importlib.import_module(module)
        except ImportError:  # older torch: not there, nothing to protect
            pass
    import torch

    torch._dynamo.list_backends(exclude_tags=())  # imports every registered backend's module
    torch.compile(lambda x: x * 2, backend="aot_eager", fullgraph=True)(torch.ones(2))
    torch._dynamo.reset()


TESTS_DIR = Path(__file__).parent


@pytest.fixture
def matrix_project(pytester, monkeypatch):
    """A pytester directory that can import the planted kernels, with helpers to write a matrix
    and read the report back."""
    pytester.syspathinsert(TESTS_DIR)
    # xdist workers are fresh processes: they find the planted kernels through PYTHONPATH.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
    import planted_kernels  # noqa: F401  kept loaded across in-process runs, like torch

    class Project:
        path = pytester.path

        @staticmethod
        def write_matrix(text: str, name: str = "matrix.yaml") -> Path:
            return pytester.makefile(Path(name).suffix, **{Path(name).stem: textwrap.dedent(text)})

        @staticmethod
        def run(*args):
            return pytester.runpytest("-p", "no:cacheprovider", "-W", "ignore", *args)

        @staticmethod
        def report(path="report.json") -> dict:
            return json.loads((pytester.path / path).read_text())

    return Project()


def planted_matrix(kernels, *, modes=("aot_eager",), scale_a=("tensor_0d",), scale_b=("tensor_1d",), cases=None, extra=""):
    """matrix.yaml text for planted kernels (names of functions in planted_kernels.py)."""
    kernel_lines = "\n".join(f"  - {{name: {k}, impl: 'planted_kernels:{k}'}}" for k in kernels)
    return f"""\
version: 1
kernels:
{kernel_lines}
axes:
  scale_a: [{', '.join(scale_a)}]
  scale_b: [{', '.join(scale_b)}]
  mode: [{', '.join(modes)}]
  m: [4]
  k: [32]
  n: [16]
profiles:
  default: {{cases: {cases or len(kernels)}}}
{extra}"""
