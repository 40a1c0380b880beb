"""The names user code imports: `pytest_scaledmm.Kernel`, `ScaledmmError`, the stable kernel module
`pytest_scaledmm.kernels`; and the order in which plugins' declared kernels join a run."""

import textwrap
import warnings
from pathlib import Path

import pytest

from matrices import IN_PROCESS, matrix_text
from pytest_scaledmm.plugin.declared import declared_kernels
from pytest_scaledmm.verdict import outcome as oc

TESTS_DIR = repr(str(Path(__file__).parent))

USER_CONFTEST = f"""
import sys

sys.path.insert(0, {TESTS_DIR})  # xdist workers do not inherit pytester's sys.path

import planted_kernels
from pytest_scaledmm import Kernel, ScaledmmError
from pytest_scaledmm.kernels import Kernel as StableKernel, aten_scaled_mm

assert Kernel is StableKernel and callable(aten_scaled_mm) and issubclass(ScaledmmError, Exception)


def pytest_scaledmm_kernels(config):
    return [Kernel("user_linear", planted_kernels.correct, scale_forms=["tensor_0d", "tensor_1d"])]
"""


def test_a_user_project_imports_the_public_names(matrix_project):
    (matrix_project.path / "conftest.py").write_text(USER_CONFTEST)
    matrix_project.write_matrix(
        matrix_text(
            ["user_linear"],
            {"scale_a": ["tensor_0d", "tensor_1d"], "scale_b": ["tensor_0d"]},
            cases=4,
            base={"mode": ["aot_eager"], "m": [4], "k": [32], "n": [16]},
        )
    )
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "report.json", *IN_PROCESS)
    cases = matrix_project.report()["cases"]
    assert result.ret == 0, result.stdout.str()
    assert cases and {c["params"]["kernel"] for c in cases} == {"user_linear"}
    assert {c["outcome"] for c in cases} == {oc.PASS}


def test_the_old_kernel_path_works_and_warns_only_off_the_public_names():
    import importlib

    import pytest_scaledmm

    # By module name: pytester's in-process runs leave stale submodule attributes on packages.
    stable = importlib.import_module("pytest_scaledmm.kernels")
    implementation = importlib.import_module("pytest_scaledmm.matrix.kernels")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in stable.__all__:
            assert getattr(stable, name) is getattr(implementation, name)
        assert pytest_scaledmm.Kernel is implementation.Kernel
    with pytest.deprecated_call(match="pytest_scaledmm.kernels.load_impl is internal"):
        assert stable.load_impl is implementation.load_impl
    with pytest.raises(AttributeError):
        stable.no_such_kernel  # noqa: B018


def test_every_user_facing_error_is_a_scaledmm_error():
    from pytest_scaledmm import MatrixError, ReportError, ScaledmmError
    from pytest_scaledmm.reports.gate import GateFailure
    from pytest_scaledmm.reports.repro import ReproError

    for error in (MatrixError, ReportError, GateFailure, ReproError):
        assert issubclass(error, ScaledmmError), error


def _plugin(name: str) -> str:
    return textwrap.dedent(
        f"""
        from pytest_scaledmm import Kernel

        def pytest_scaledmm_kernels(config):
            return [Kernel("{name}", print)]
        """
    )


def test_two_plugins_kernels_come_in_pluggys_order(pytester):
    """As every pytest hook: the latest registered first (conftest, then -p plugins last to first)."""
    pytester.makepyfile(plugin_early=_plugin("from_early"), plugin_late=_plugin("from_late"))
    pytester.makeconftest(_plugin("from_conftest"))
    pytester.syspathinsert()
    config = pytester.parseconfigure("-p", "plugin_early", "-p", "plugin_late")
    hook = config.hook.pytest_scaledmm_kernels
    assert [k.name for k in declared_kernels(config)] == [k.name for answer in hook(config=config) for k in answer]
    assert [k.name for k in declared_kernels(config)] == ["from_conftest", "from_late", "from_early"]


def test_a_bad_declaration_names_its_plugin_even_beside_a_silent_one(pytester):
    pytester.makepyfile(
        plugin_silent="def pytest_scaledmm_kernels(config):\n    return None\n",
        plugin_bad="def pytest_scaledmm_kernels(config):\n    return {'name': 'k'}\n",
    )
    pytester.syspathinsert()
    config = pytester.parseconfigure("-p", "plugin_bad")
    with pytest.raises(Exception, match=r"pytest_scaledmm_kernels in plugin_bad.*must return a list"):
        declared_kernels(config)
    config = pytester.parseconfigure("-p", "plugin_bad", "-p", "plugin_silent")
    with pytest.raises(Exception, match=r"pytest_scaledmm_kernels in plugin_bad.*must return a list"):
        declared_kernels(config)


def test_every_built_in_kernel_is_in_the_stable_module():
    import importlib

    stable = importlib.import_module("pytest_scaledmm.kernels")
    implementation = importlib.import_module("pytest_scaledmm.matrix.kernels")
    assert set(implementation.BUILTIN_IMPLS) <= set(stable.__all__)
    for name, fn in implementation.BUILTIN_IMPLS.items():
        assert getattr(stable, name) is fn
