"""The public names as a type checker sees them: the package ships py.typed and a stub, so that
`pytest_scaledmm.Kernel` (resolved lazily at run time, Any to a checker without them) is the class."""

import ast
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest_scaledmm

PACKAGE_DIR = Path(pytest_scaledmm.__file__).parent

USER_FILE = textwrap.dedent(
    """
    from pytest_scaledmm import Kernel, MatrixError, ReportError

    reveal_type(Kernel("user_linear", fn=None))
    Kernel("user_linear", fn=None, min_m="four")
    reveal_type(MatrixError)
    reveal_type(ReportError)
    """
)

# The user's checker reads the package, not what it imports: torch and the rest are skipped, so
# that a cold run takes a second or two.
MYPY_CONFIG = """
[mypy]
[mypy-torch.*,hypothesis.*,jinja2.*,jsonschema.*,yaml.*,pytest.*,_pytest.*,packaging.*,allpairspy.*]
follow_imports = skip
"""


def _mypy(tmp_path: Path) -> str:
    # The package as installed: on the path, not in the checked files, so PEP 561 applies
    # (without py.typed mypy would skip it as untyped and every name would be Any).
    site = tmp_path / "site"
    site.mkdir()
    (site / "pytest_scaledmm").symlink_to(PACKAGE_DIR, target_is_directory=True)
    (tmp_path / "user.py").write_text(USER_FILE)
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", "cache", "user.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.stdout + result.stderr


def test_a_type_checker_sees_kernel_and_the_errors_as_classes(tmp_path):
    out = _mypy(tmp_path)
    assert "import-untyped" not in out, out
    assert 'user.py:4: note: Revealed type is "pytest_scaledmm.matrix.kernels.Kernel"' in out, out
    assert 'user.py:5: error: Argument "min_m" to "Kernel" has incompatible type "str"; expected "int | None"' in out
    assert "-> pytest_scaledmm.matrix.errors.MatrixError" in out, out
    assert "-> pytest_scaledmm.reports.report.ReportError" in out, out
    assert 'Revealed type is "Any"' not in out, out


def test_the_stub_names_what_the_package_exports():
    """__init__.pyi and the lazy names of __init__.py agree: each re-export is the runtime object."""
    stub = ast.parse((PACKAGE_DIR / "__init__.pyi").read_text())
    exported = {}
    for node in stub.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, "a stub re-exports with `import X as X`"
                exported[alias.name] = (f"pytest_scaledmm.{node.module}", alias.name)
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__":
            stub_all = ast.literal_eval(node.value)
    assert stub_all == pytest_scaledmm.__all__
    assert set(exported) | {"__version__"} == set(pytest_scaledmm.__all__)
    for name, (module, attribute) in exported.items():
        assert getattr(pytest_scaledmm, name) is getattr(importlib.import_module(module), attribute), name
