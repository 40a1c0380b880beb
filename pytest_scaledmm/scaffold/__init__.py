"""`scaledmm init`: a tox.ini and a CI workflow for a user's own project and torch releases.

The CI templates beside this file are examples/github-actions.yml and examples/gitlab-ci.yml
(tests/test_init.py keeps them identical); init changes only the values the user chose.

With two or more releases, tox.ini has one env per release and gates the last against the
first (a torch upgrade). With one, it gates a kernel change under that release: the env
`baseline` runs the matrix and kernels as committed on a git ref (base_ref.py), the env of the
release runs the working tree's, and the gate judges the second against the first, where a pass
that now fails is the kernel's doing (reports/gate.py, the same-release rule).

Every env and CI shard job that runs the matrix installs what its kernels import besides torch
and the project (kernel_deps.py); a kernel whose needs cannot be told is refused, nothing written.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from ..errors import ScaledmmError
from .kernel_deps import kernel_requirements

TEMPLATES = Path(__file__).parent
CI_TARGETS = {"github": ".github/workflows/scaledmm.yml", "gitlab": "scaledmm.gitlab-ci.yml"}


class InitError(ScaledmmError, ValueError):
    """One line for the user: which option or file, and why."""


BASELINE_ENV = "baseline"  # the env of a one-release flow that runs the base ref's kernels


@dataclass(frozen=True)
class Plan:
    torch: tuple  # releases, the pinned one (the baseline) first
    matrix: str  # relative to the project directory
    profile: str
    spec: str  # what pip installs for pytest-scaledmm
    runners: tuple
    shards: int
    hypothesis: str  # pinned in every env so that case ids line up
    base: str = "main"  # one release: the git ref whose committed kernels are the baseline
    package: bool = False  # the project is a package to install (pyproject.toml or setup.py)
    kernel_deps: tuple = ()  # what the matrix's kernels import besides torch and the project (kernel_deps.py)

    @staticmethod
    def env(version: str) -> str:
        """The tox env of a torch release: one per minor release."""
        major, minor = version.split(".")[:2]
        return f"torch{major}{minor}"

    @property
    def one_release(self) -> bool:
        return len(self.torch) == 1

    def envs(self) -> list:
        """The envs that run the matrix, the gate's baseline first."""
        runs = [self.env(v) for v in self.torch]
        return [BASELINE_ENV, *runs] if self.one_release else runs


def _version(text: str) -> str:

    try:
        version = Version(text)
    except InvalidVersion:
        raise InitError(f"--torch {text}: not a version (e.g. 2.11.0)") from None
    if len(version.release) < 2 or version.local:
        raise InitError(f"--torch {text}: give a release such as 2.11.0 (no local build tag)")
    return text


def installed_spec() -> str | None:
    """A pip requirement for the pytest-scaledmm this command runs from: the URL pip recorded,
    or the source checkout it is imported from."""
    try:
        direct = importlib.metadata.distribution("pytest-scaledmm").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        direct = None
    if direct:
        info = json.loads(direct)
        url = info.get("url", "")
        vcs = info.get("vcs_info")
        if vcs:
            return f"pytest-scaledmm @ {vcs['vcs']}+{url}@{vcs.get('commit_id', '')}".rstrip("@")
        if url:
            return f"pytest-scaledmm @ {url}"
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and 'name = "pytest-scaledmm"' in (
        checkout / "pyproject.toml"
    ).read_text():
        return f"pytest-scaledmm @ {checkout.as_uri()}"
    return None


def make_plan(
    torch: Sequence[str],
    matrix: str,
    profile: str,
    spec: str | None,
    runners: Sequence[str],
    shards: int,
    directory: Path,
    base: str = "main",
) -> Plan:
    versions = tuple(_version(v) for v in torch)
    if not versions:
        raise InitError("--torch: name a release (e.g. --torch 2.13.0), or two, the pinned one first")
    if not base or base.startswith("-") or any(c.isspace() or c in "{}" for c in base):
        raise InitError(f"--base {base!r}: a git ref (a branch, a tag or a commit) without spaces or braces")
    plan_envs: dict[str, str] = {}
    for version in versions:
        name = Plan.env(version)
        if name in plan_envs:
            raise InitError(f"--torch {plan_envs[name]} and {version}: one env per minor release ({name})")
        plan_envs[name] = version
    if not (directory / matrix).is_file():
        raise InitError(f"--matrix {matrix}: no such file in {directory} (write your matrix.yaml first)")
    # Envs without these would skip or fail those kernels' cases under every release alike.
    kernel_deps = kernel_requirements(directory / matrix, directory)
    if shards < 1:
        raise InitError(f"--shards {shards}: must be 1 or more")
    for runner in runners:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", runner):
            raise InitError(f"--runners {runner}: a runner label is letters, digits, '.', '_' and '-'")
    spec = spec or installed_spec()
    if not spec:
        raise InitError(
            "--spec: pytest-scaledmm is not on the package index: say what pip installs "
            "(a git URL of your fork, a wheel, a path)"
        )
    try:
        hypothesis = importlib.metadata.version("hypothesis")
    except importlib.metadata.PackageNotFoundError:
        hypothesis = "6.170.17"
    return Plan(
        versions, matrix, profile, spec, tuple(runners), shards, hypothesis, base, is_package(directory), kernel_deps
    )


def is_package(directory: Path) -> bool:
    """Whether pip can install the project: a setup.py, or a pyproject.toml that says how to build."""
    if (directory / "setup.py").is_file():
        return True
    pyproject = directory / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return False
    return bool(re.search(r"^\[(project|build-system)\]", text, re.M))


def _pytest_command(plan: Plan, matrix: str, report: str, rootdir: str = "") -> str:
    """The env's command: pytest on the matrix, its exit 1 (cases failed) taken as data."""
    return f"""\
    python -c 'import sys, pytest; rc = int(pytest.main(sys.argv[1:])); sys.exit(0 if rc == 1 else rc)' \\
        -p no:cacheprovider -q {rootdir}--scaledmm-matrix {matrix} \\
        --scaledmm-profile {{env:SCALEDMM_PROFILE:{plan.profile}}} -n {{env:SCALEDMM_WORKERS:auto}} \\
        --scaledmm-strict-coverage --scaledmm-report {report} {{posargs}}"""


def _head(plan: Plan) -> str:
    envs = plan.envs()
    if plan.one_release:
        return f"""\
# Written by `scaledmm init`: the scaled-mm matrix of this project under torch {plan.torch[0]}, the
# kernels as committed on {plan.base} (the baseline) against those of this working tree.
#
#   tox -e {",".join(envs)},report   reports/{envs[0]}.json ({plan.base}), reports/{envs[1]}.json (this tree), compared
#   tox -e gate                       exit 1 on a new failure of {envs[1]} against {envs[0]}
#   SCALEDMM_BASE=v1.2 tox -e {envs[0]}    the baseline from another git ref (a branch, a tag, a commit)
#   SCALEDMM_PROFILE=smoke tox -e {envs[1]}   another profile
#   SCALEDMM_WORKERS=0 tox -e {envs[1]}       no xdist (default: one worker per core)
[tox]
requires = tox>=4.11
env_list =
    {envs[0]}
    {envs[1]}
    report
"""
    factors = ",".join(e[len("torch") :] for e in envs)
    return f"""\
# Written by `scaledmm init`: the scaled-mm matrix of this project on each torch release.
#
#   tox -e {",".join(envs)},report     one report per release in reports/, then the comparison
#   tox -e gate                        exit 1 on a new failure of {envs[-1]} against {envs[0]}
#   SCALEDMM_PROFILE=smoke tox -e {envs[0]}   another profile
#   SCALEDMM_WORKERS=0 tox -e {envs[0]}       no xdist (default: one worker per core)
[tox]
requires = tox>=4.11
env_list =
    torch{{{factors}}}
    report
"""


def _baseline_env(plan: Plan) -> str:
    base = "{envtmpdir}{/}base"
    matrix = base + "".join("{/}" + part for part in Path(plan.matrix).parts)
    install = f"\n    python -m pip install --quiet {base}" if plan.package else ""
    return f"""
[testenv:{BASELINE_ENV}]
description = run the scaled-mm matrix as committed on {{env:SCALEDMM_BASE:{{[scaledmm]base}}}}, under the same torch
# This directory as committed on that ref, in the env's tmp dir: its matrix and kernels run
# there, with it as the rootdir, so that nothing imports from the working tree. Never the working
# tree installed: a package is the copy installed (the matrix refuses a kernel module from
# anywhere else).
skip_install = true
change_dir = {base}
commands_pre =
    python -m pytest_scaledmm.scaffold.base_ref {{toxinidir}} {{env:SCALEDMM_BASE:{{[scaledmm]base}}}} {base}{install}
commands =
{_pytest_command(plan, matrix, "{toxinidir}{/}reports{/}" + BASELINE_ENV + ".json", f"--rootdir {base} ")}
"""


def render_tox(plan: Plan) -> str:
    envs = plan.envs()
    if plan.one_release:
        deps = f"    torch=={plan.torch[0]}"
        description = f"run the scaled-mm matrix of this working tree under torch {plan.torch[0]}"
        base = (
            "# The git ref whose committed kernels are the baseline (SCALEDMM_BASE overrides it).\n"
            f"base = {plan.base}\n"
        )
    else:
        deps = "\n".join(f"    {plan.env(v)}: torch=={v}" for v in plan.torch)
        description = "run the scaled-mm matrix on the torch release named by the env"
        base = ""
    matrix = "{toxinidir}" + "".join("{/}" + part for part in Path(plan.matrix).parts)
    kernel_deps = ""
    if plan.kernel_deps:
        deps += "\n    {[scaledmm]kernel_deps}"
        kernel_deps = (
            f"# What the kernels of {plan.matrix} import besides torch and this project (their `requires:`,\n"
            "# pytest-scaledmm's extra for a packed kernel, the package of a module installed where init ran).\n"
            "kernel_deps =\n" + "".join(f"    {dep}\n" for dep in plan.kernel_deps)
        )
    return f"""\
{_head(plan)}
[scaledmm]
# pytest-scaledmm is not on the package index: this is where pip gets it.
spec = {plan.spec}
# The same hypothesis everywhere, so that case ids line up across envs.
hypothesis = hypothesis=={plan.hypothesis}
{kernel_deps}{base}
[testenv]
description = {description}
# Your kernels are imported from this checkout (the matrix's directory and the rootdir are on
# sys.path). If your project is a package that must be installed, remove skip_install here
# (the baseline env keeps its own and installs the committed copy instead).
skip_install = true
deps =
    {{[scaledmm]spec}}
    {{[scaledmm]hypothesis}}
{deps}
pass_env =
    CUDA_VISIBLE_DEVICES
    HIP_VISIBLE_DEVICES
    SCALEDMM_*
    TORCHINDUCTOR_*
# pytest exits 1 when cases fail: that is data for the report, not a broken env.
commands =
{_pytest_command(plan, matrix, "{toxinidir}{/}reports{/}{envname}.json")}
{_baseline_env(plan) if plan.one_release else ""}
[testenv:report]
description = compare every report in reports/ (terminal table, Markdown and HTML)
# Reading reports needs no torch: the package alone, without its dependencies, and what it reads with.
skip_install = true
deps =
    {{[scaledmm]hypothesis}}
    jinja2>=3.1
    packaging>=23
    pyyaml>=6
    jsonschema>=4.17
commands_pre =
    python -m pip install --quiet --no-deps "{{[scaledmm]spec}}"
commands =
    scaledmm compare {{toxinidir}}{{/}}reports \\
        --markdown {{toxinidir}}{{/}}reports{{/}}summary.md --html {{toxinidir}}{{/}}reports{{/}}matrix.html {{posargs}}

[testenv:gate]
description = exit 1 when {envs[-1]} has a new failure against {envs[0]}
skip_install = true
deps = {{[testenv:report]deps}}
commands_pre = {{[testenv:report]commands_pre}}
commands =
    scaledmm gate --baseline {{toxinidir}}{{/}}reports{{/}}{envs[0]}.json \\
        --candidate {{toxinidir}}{{/}}reports{{/}}{envs[-1]}.json {{posargs}}
"""


def _yaml_list(values) -> str:
    return "[" + ", ".join(json.dumps(v) if re.fullmatch(r"[0-9.]+", v) else v for v in values) + "]"


def _replace(text: str, old: str, new: str, count: int) -> str:
    if text.count(old) != count:  # the template changed: a test would say so first
        raise AssertionError(f"template line {old!r} found {text.count(old)} times, expected {count}")
    return text.replace(old, new)


def render_ci(kind: str, plan: Plan) -> str:
    text = (TEMPLATES / Path(kind + ("-actions.yml" if kind == "github" else "-ci.yml")).name).read_text()
    spec = json.dumps(plan.spec)
    text = _replace(text, 'SCALEDMM_SPEC: "."', f"SCALEDMM_SPEC: {spec}", 1)
    text = _replace(text, "MATRIX_FILE: matrix.yaml", f"MATRIX_FILE: {json.dumps(plan.matrix)}", 1)
    text = _replace(text, "PROFILE: default", f"PROFILE: {json.dumps(plan.profile)}", 1)
    text = _replace(text, 'PINNED_TORCH: "2.11.0"', f"PINNED_TORCH: {json.dumps(plan.torch[0])}", 1)
    text = _replace(text, 'KERNEL_DEPS: ""', f"KERNEL_DEPS: {json.dumps(' '.join(plan.kernel_deps))}", 1)
    shards = [str(i) for i in range(1, plan.shards + 1)]
    if kind == "github":
        text = _replace(text, "SHARDS: 4 ", f"SHARDS: {plan.shards} ", 1)
        text = _replace(text, 'torch: ["2.11.0", "2.13.0"]', f"torch: {_yaml_list(plan.torch)}", 2)
        text = _replace(text, "runner: [h200, l40s]", f"runner: {_yaml_list(plan.runners)}", 2)
        text = _replace(text, "shard: [1, 2, 3, 4]", f"shard: [{', '.join(shards)}]", 1)
    else:
        text = _replace(text, 'SHARDS: "4" ', f'SHARDS: "{plan.shards}" ', 1)
        text = _replace(text, 'TORCH: ["2.11.0", "2.13.0"]', f"TORCH: {_yaml_list(plan.torch)}", 2)
        text = _replace(text, "RUNNER: [h200, l40s]", f"RUNNER: {_yaml_list(plan.runners)}", 2)
        text = _replace(text, 'SHARD: ["1", "2", "3", "4"]', f"SHARD: [{', '.join(json.dumps(s) for s in shards)}]", 1)
    return text


def write_project(directory: Path, plan: Plan, ci: Sequence[str]) -> list:
    """Every file, or none: an existing one is never overwritten."""
    files = {"tox.ini": render_tox(plan)}
    for kind in ci:
        files[CI_TARGETS[kind]] = render_ci(kind, plan)
    for name in files:
        if (directory / name).exists():
            raise InitError(
                f"{directory / name} exists: not overwritten (move it away, or run init with another --dir)"
            )
    written = []
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
