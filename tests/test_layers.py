"""The package's layering holds, and the checks that say so can fail.

The contracts live in pyproject.toml ([tool.importlinter]): cli > doctor | plugin > reports >
execution > matrix > verdict, the verdict a leaf of stdlib and torch, no cycles between sibling
modules or packages. import-linter checks them here on this checkout and on a copy of the
package with a violation planted, which must break the right contract. Two checks of our own,
over the AST: no module imports another module's private name, and no module imports itself
through others (a cycle is named, module by module).
"""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pytest_scaledmm"
CONTRACTS = ["layers", "verdict-leaf", "verdict-stdlib-torch", "acyclic"]


# -- import-linter -------------------------------------------------------------------------------


def lint_imports(root: Path) -> tuple[int, str]:
    """Run import-linter with root/pyproject.toml on the package under root (not the installed one)."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            str(root / "pyproject.toml"),
            "--no-cache",
            "--no-logo",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


def contract_lines(output: str) -> dict[str, str]:
    """KEPT or BROKEN per contract name, from import-linter's summary."""
    return dict(re.findall(r"^(.+?) (KEPT|BROKEN)$", output, re.M))


@pytest.fixture(scope="module")
def names() -> dict[str, str]:
    """Contract id -> name, read from pyproject.toml."""
    from importlinter.api import read_configuration

    contracts = read_configuration(str(ROOT / "pyproject.toml"))["contracts_options"]
    return {c["id"]: c["name"] for c in contracts}


def test_the_contracts_are_the_ones_this_file_checks(names):
    assert sorted(names) == sorted(CONTRACTS)


def test_the_package_keeps_every_contract(names):
    code, output = lint_imports(ROOT)
    assert code == 0, output
    assert contract_lines(output) == {names[c]: "KEPT" for c in CONTRACTS}, output


@pytest.fixture
def package_copy(tmp_path):
    """A copy of the package and its pyproject.toml to plant violations in."""
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def plant(root: Path, module: str, line: str) -> None:
    """Append an import to a module of the copy (it is parsed, never run)."""
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n\n{line}\n")


@pytest.mark.parametrize(
    "module, line, broken, shown",
    [
        # doctor and plugin share a layer and stay independent of each other.
        (
            "doctor",
            "from .plugin import options",
            {"layers"},
            "pytest_scaledmm.doctor -> pytest_scaledmm.plugin.options",
        ),
        # An upward import: execution reaching into reports, which imports execution: a cycle too.
        (
            "execution.isolate",
            "from ..reports import report",
            {"layers", "acyclic"},
            "pytest_scaledmm.execution.isolate -> pytest_scaledmm.reports.report",
        ),
        # The leaf importing the matrix: upward, out of the verdict, and a cycle.
        (
            "verdict.outcome",
            "from ..matrix import schema",
            {"layers", "verdict-leaf", "acyclic"},
            "pytest_scaledmm.verdict.outcome -> pytest_scaledmm.matrix.schema",
        ),
        # The leaf needing a package a repro script's machine may not have.
        ("verdict.draw", "import yaml", {"verdict-stdlib-torch"}, "pytest_scaledmm.verdict.draw -> yaml"),
        # A cycle inside one layer (cases imports schema): only the acyclic contract sees it.
        ("matrix.schema", "from . import cases", {"acyclic"}, "No cycles are allowed in pytest_scaledmm.matrix."),
        # A cycle between two modules of the plugin, through a function-level import.
        (
            "plugin.explore",
            "def f():\n    from .entry import STATE_KEY",
            {"acyclic"},
            "No cycles are allowed in pytest_scaledmm.plugin.",
        ),
    ],
    ids=["independent", "upward", "verdict-upward", "verdict-third-party", "cycle-in-matrix", "cycle-in-plugin"],
)
def test_a_planted_violation_breaks_its_contract(package_copy, names, module, line, broken, shown):
    plant(package_copy, f"{PACKAGE}.{module}", line)
    code, output = lint_imports(package_copy)
    assert code == 1, output
    expected = {names[c]: ("BROKEN" if c in broken else "KEPT") for c in CONTRACTS}
    assert contract_lines(output) == expected, output
    assert shown in output


# -- our own AST checks --------------------------------------------------------------------------


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under root."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(root: Path):
    """(importer, imported module, name or None) for every import of the package's own modules,
    at any depth (in functions too). `from X import y` names module X.y when there is one."""
    known = modules(root)
    for importer, path in known.items():
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        yield importer, alias.name, None
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != PACKAGE:
                    continue
                for alias in node.names:
                    if f"{target}.{alias.name}" in known:
                        yield importer, f"{target}.{alias.name}", None
                    else:
                        yield importer, target, alias.name


def private_imports(root: Path) -> list[str]:
    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    found = []
    for importer, imported, name in imports(root):
        if imported == importer:
            continue
        if name is not None and private(name):
            found.append(f"{importer} imports {imported}.{name}")
        elif any(private(part) for part in imported.split(".")):
            found.append(f"{importer} imports the private module {imported}")
    return found


def find_cycle(root: Path) -> list[str]:
    """One import cycle between modules of the package (A -> B -> ... -> A), or []."""
    graph: dict[str, set] = {m: set() for m in modules(root)}
    for importer, imported, _ in imports(root):
        if imported in graph and imported != importer:
            graph[importer].add(imported)
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return []


def test_no_module_imports_a_private_name_of_another():
    assert private_imports(ROOT) == []


def test_no_import_cycle_between_modules():
    assert find_cycle(ROOT) == []


def test_the_ast_checks_find_a_planted_private_import_and_cycle(package_copy):
    plant(package_copy, f"{PACKAGE}.plugin.speed", "from ..execution.isolate import _tail")
    plant(package_copy, f"{PACKAGE}.matrix.bounded_yaml", "def f():\n    from .spec import parse_spec")
    assert private_imports(package_copy) == [
        "pytest_scaledmm.plugin.speed imports pytest_scaledmm.execution.isolate._tail"
    ]
    cycle = find_cycle(package_copy)
    assert cycle[0] == cycle[-1]
    assert "pytest_scaledmm.matrix.bounded_yaml" in cycle and "pytest_scaledmm.matrix.spec" in cycle


# -- settings read once, plugin objects registered in one place ------------------------------------


def option_reads(root: Path) -> set[str]:
    """Modules of the plugin that read a pytest option: config.getoption(...) or option.scaledmm_*."""
    found = set()
    for name, path in modules(root).items():
        if not name.startswith(f"{PACKAGE}.plugin"):
            continue  # the console script has argparse namespaces of the same names
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and (node.attr == "getoption" or node.attr.startswith("scaledmm_")):
                found.add(name)
    return found


def plugin_registrations(root: Path) -> set[str]:
    """Modules that register a plugin object with pytest (`.register(obj, "scaledmm-...")`)."""
    found = set()
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("scaledmm-")
            ):
                found.add(name)
    return found


def test_only_settings_reads_the_options_and_only_entry_registers_plugins():
    assert option_reads(ROOT) == {f"{PACKAGE}.plugin.settings"}
    assert plugin_registrations(ROOT) == {f"{PACKAGE}.plugin.entry"}


def test_the_settings_and_registration_checks_find_a_planted_read_and_registration(package_copy):
    plant(package_copy, f"{PACKAGE}.plugin.speed", "def f(config):\n    return config.getoption('scaledmm_seed')")
    plant(
        package_copy,
        f"{PACKAGE}.plugin.reproduce",
        "def g(config):\n    config.pluginmanager.register(object(), 'scaledmm-extra')",
    )
    assert option_reads(package_copy) == {f"{PACKAGE}.plugin.settings", f"{PACKAGE}.plugin.speed"}
    assert plugin_registrations(package_copy) == {f"{PACKAGE}.plugin.entry", f"{PACKAGE}.plugin.reproduce"}
