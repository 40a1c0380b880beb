"""The verdict subpackage is a leaf: the standard library, torch and its own modules only, so that
every layer can use it and a repro script can embed it whole (reports/repro.py)."""

import ast
import sys
from pathlib import Path

import pytest

import pytest_scaledmm.verdict as verdict
from pytest_scaledmm.reports import repro
from pytest_scaledmm.verdict.outcome import ErrorInfo, Outcome
from pytest_scaledmm.verdict.reproduced import FAILS_DIFFERENTLY, NOT_REPRODUCED, REPRODUCED, replay_verdict, reproduces

VERDICT = Path(verdict.__file__).parent
MODULES = sorted(p.stem for p in VERDICT.glob("*.py") if p.stem != "__init__")
THIRD_PARTY = {"torch"}


def foreign_imports(source: str, siblings) -> list:
    """What a verdict module imports that is neither the standard library, torch, nor a module of
    verdict/ (imports inside functions included)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            inside = node.level == 1 and (
                node.module in siblings if node.module else all(alias.name in siblings for alias in node.names)
            )
            if not inside:
                found.append("." * node.level + (node.module or ""))
            continue
        elif isinstance(node, ast.ImportFrom):
            names = [node.module]
        else:
            continue
        found += [n for n in names if n.split(".")[0] not in sys.stdlib_module_names | THIRD_PARTY]
    return found


@pytest.mark.parametrize("name", MODULES)
def test_a_verdict_module_imports_nothing_of_the_plugin_outside_verdict(name):
    assert foreign_imports((VERDICT / f"{name}.py").read_text(), MODULES) == []


@pytest.mark.parametrize(
    "source",
    [
        "from ..matrix.spec import KernelSpec",
        "import pytest_scaledmm.matrix.cases",
        "from pytest_scaledmm.verdict import inputs",
        "from . import nowhere",
        "from .nowhere import x",
        "import yaml",
        "def f():\n    from ..execution.run import run_case",
    ],
)
def test_the_import_check_catches_a_foreign_import(source):
    assert foreign_imports(source, MODULES)


def test_the_import_check_lets_the_standard_library_torch_and_siblings_pass():
    source = "import re\nfrom typing import Any\nimport torch._dynamo\nfrom . import outcome\ndef f():\n    from .reference import compare\n"
    assert foreign_imports(source, MODULES) == []


@pytest.mark.parametrize("name", MODULES)
def test_every_verdict_module_can_be_embedded_in_a_script(name):
    (module,) = [m for m in repro.verdict_modules((name,)) if m.__name__.endswith(f".{name}")]
    body = repro._module_body(module)
    compile(body, name, "exec")
    assert repro._rebound("\n".join(repro._module_body(m) for m in repro.verdict_modules((name,)))) == []


# -- whether a rerun reproduces the recorded failure -------------------------------------------


def _error(type_, root=None):
    return ErrorInfo(type_, "message", root or type_, "dynamo")


def _expected(outcome, eager=None, compiled=None, side=None):
    return {
        "outcome": outcome,
        "signature": "s",
        "eager_error": eager,
        "compiled_error": compiled,
        "mismatch_side": side,
    }


def test_the_same_error_under_dynamo_wrapping_reproduces():
    observed = Outcome(
        "COMPILE_ONLY_ERROR",
        compiled_error=_error("torch._dynamo.exc.Unsupported", "torch._dynamo.exc.ObservedValueErrorError"),
    )
    assert (
        replay_verdict(_expected("COMPILE_ONLY_ERROR", compiled=["Unsupported", "ValueError"]), observed) == REPRODUCED
    )
    assert (
        replay_verdict(_expected("COMPILE_ONLY_ERROR", compiled=["TypeError", "TypeError"]), observed)
        == FAILS_DIFFERENTLY
    )


def test_alike_refusals_reproduce_each_other_and_a_pass_is_not_reproduced():
    refused = Outcome(
        "REFUSED", eager_error=_error("builtins.ValueError"), compiled_error=_error("builtins.ValueError")
    )
    assert reproduces(_expected("UNSUPPORTED", eager=["ValueError", "ValueError"]), refused)
    assert not reproduces(_expected("ERROR_PARITY"), refused)
    assert replay_verdict(_expected("REFUSED"), Outcome("PASS")) == NOT_REPRODUCED
    assert replay_verdict(_expected("REFUSED"), Outcome("UNSUPPORTED")) == REPRODUCED


def test_a_mismatch_reproduces_only_on_the_same_side():
    observed = Outcome("MISMATCH", layer="eager+compiled")
    assert reproduces(_expected("MISMATCH", side="eager+compiled"), observed)
    assert replay_verdict(_expected("MISMATCH", side="compiled"), observed) == FAILS_DIFFERENTLY
