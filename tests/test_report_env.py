"""tox's report and gate envs install four light packages and run compare and gate from the source
tree: every command line of theirs runs with nothing importable but the standard library, those
packages (and what they depend on) and this package."""

import configparser
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from reports_factory import DATA, case, report, write

import pytest_scaledmm
from matrices import catalogue_matrix
from pytest_scaledmm.matrix.spec import load_spec

REPO = DATA.parent.parent
SOURCE = Path(pytest_scaledmm.__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(sys.version_info < (3, 10), reason="needs sys.stdlib_module_names")

# Only what tox.ini's report env installs may be imported; anything else fails as it would there.
# Modules imported before the check starts (site hooks) stay.
CHILD = """\
import importlib.abc, runpy, sys
allowed = set(sys.stdlib_module_names) | set(sys.modules) | set({allowed!r})
class NotInTheReportEnv(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in allowed:
            raise ModuleNotFoundError(f"{{name}} is not installed in the report env", name=name)
sys.meta_path.insert(0, NotInTheReportEnv())
try:
    import torch
except ModuleNotFoundError:
    pass
else:
    sys.exit("the check lets torch in")
sys.argv = ["pytest_scaledmm"] + sys.argv[1:]
runpy.run_module("pytest_scaledmm", run_name="__main__")
"""


def _report_env_distributions() -> set[str]:
    """The report env's deps in tox.ini (the gate env reuses them) and, as installed here, what
    they require in turn."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    todo = [Requirement(line).name for line in tox["testenv:report"]["deps"].splitlines() if line.strip()]
    assert todo, "tox.ini's report env lists no deps"
    seen: set[str] = set()
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: nothing of it can be imported anyway
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def _allowed_modules() -> set[str]:
    distributions = _report_env_distributions()
    modules = {"pytest_scaledmm"}
    for module, owners in importlib.metadata.packages_distributions().items():
        if any(owner.lower().replace("_", "-") in distributions for owner in owners):
            modules.add(module)
    return modules


@pytest.fixture(scope="module")
def run_light():
    code = CHILD.format(allowed=sorted(_allowed_modules()))
    env = {**os.environ, "PYTHONPATH": str(SOURCE)}

    def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd)
        assert "Traceback" not in done.stderr and "not installed in the report env" not in done.stderr, done.stderr
        return done

    return run


def test_the_check_refuses_what_the_report_env_lacks():
    allowed = _allowed_modules()
    assert {"jinja2", "yaml", "jsonschema", "packaging"} <= allowed
    assert not {"torch", "pytest", "hypothesis", "allpairspy", "xdist", "pluggy", "sympy"} & allowed


def test_compare_as_the_report_env_runs_it(tmp_path, run_light):
    reports = tmp_path / "reports"
    reports.mkdir()
    for name in ("baseline-torch211.json", "candidate-torch213-regression.json"):
        (reports / name).write_bytes((DATA / "gate" / name).read_bytes())
    done = run_light(tmp_path, "compare", str(reports), "--markdown", "summary.md", "--html", "matrix.html")
    assert done.returncode == 0 and "regression 2" in done.stdout
    assert (tmp_path / "matrix.html").read_text().startswith("<!DOCTYPE html>")
    assert "### regression: 2" in (tmp_path / "summary.md").read_text()
    for matrix in (REPO / "matrix.yaml", *sorted((REPO / "matrices").glob("*.yaml"))):
        done = run_light(
            tmp_path, "compare", str(reports), "--matrix", str(matrix), "--group-by", "kernel,mode", "--markdown", "-"
        )
        assert done.returncode == 0 and "| torch211 → torch213 | 2 |" in done.stdout, (matrix, done.stdout)


# Expects the rowwise case's LoweringException from torch 2.11 on.
CATALOGUE = [
    {
        "match": {"kernel": "aten_scaled_mm", "scale_a": "rowwise"},
        "torch": ">=2.11",
        "signature": "LoweringException: AssertionError",
    }
]


def test_gate_as_the_gate_env_runs_it(tmp_path, run_light):
    matrix = catalogue_matrix(tmp_path / "matrix.yaml", CATALOGUE)
    recorded = {"matrix_path": str(matrix), "matrix_hash": load_spec(matrix).digest}
    baseline = write(
        tmp_path / "torch211.json",
        report(
            [case("c1", "PASS"), case("c2", "PASS"), case("c3", "PASS", scale_a="rowwise")], torch="2.11.0", **recorded
        ),
    )
    cases = [
        case("c1", "PASS"),
        case("c2", "MISMATCH", "MISMATCH: compiled values off the reference"),
        case("c3", "MISMATCH", "MISMATCH: compiled LoweringException: AssertionError", scale_a="rowwise"),
    ]
    candidate = write(tmp_path / "torch213.json", report(cases, torch="2.13.0", **recorded))
    both = ("gate", "--baseline", str(baseline), "--candidate", str(candidate))
    # The catalogue of the matrix both recorded (unchanged), then the same given by name.
    for extra in ((), ("--matrix", str(matrix)), ("--allow-missing", "--markdown", "gate.md")):
        done = run_light(tmp_path, *both, *extra)
        assert done.returncode == 1, done.stdout + done.stderr
        # c3 fails as the catalogue predicts, but it passed in the baseline: a regression all the same.
        assert "regression: 1 case PASS -> MISMATCH" in done.stdout
        assert "regression: 1 case FIXED_UPSTREAM -> XFAIL" in done.stdout and "contradicts the entry" in done.stdout
    assert "regression" in (tmp_path / "gate.md").read_text()
    done = run_light(tmp_path, *both, "--matrix", str(REPO / "matrix.yaml"))  # no catalogue there
    assert done.returncode == 1 and "XFAIL" not in done.stdout and "contradicts the entry" not in done.stdout
    unreadable = write(tmp_path / "other.json", {"schema_version": 999})
    done = run_light(tmp_path, "gate", "--baseline", str(baseline), "--candidate", str(unreadable))
    assert done.returncode == 2 and str(unreadable) in done.stderr
    assert json.loads(baseline.read_text())["cases"]  # the reports read are left as they were


def test_the_package_builds_without_a_setuptools_deprecation(tmp_path):
    """tox builds the package on the way to its envs (its .pkg env): the project's own metadata
    gives setuptools nothing to warn about (a license as a TOML table did, three times a build)."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert isinstance(pyproject["project"]["license"], str)  # an SPDX expression
    (setuptools,) = [Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")]
    assert not setuptools.specifier.contains("76.99")  # SPDX strings came with setuptools 77
    for name in ("pyproject.toml", "README.md"):
        (tmp_path / name).write_text((REPO / name).read_text())
    (tmp_path / "pytest_scaledmm").mkdir()
    (tmp_path / "pytest_scaledmm" / "__init__.py").write_text("")
    script = "import sys\nfrom setuptools import build_meta\nbuild_meta.prepare_metadata_for_build_wheel(sys.argv[1])\n"
    out = tmp_path / "metadata"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", script, str(out)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    (metadata,) = out.glob("*.dist-info/METADATA")
    assert "License-Expression: BSD-3-Clause" in metadata.read_text()
