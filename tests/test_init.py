"""`scaledmm init`, run as the console script: the files it writes for a project's own matrix and
torch releases, what it refuses, and that its CI templates are the examples the CI test runs."""

import configparser
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from matrices import matrix_text, planted

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def init(directory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm", "init", *args], cwd=directory, capture_output=True, text=True
    )


@pytest.fixture
def project(tmp_path):
    (tmp_path / "matrix.yaml").write_text(matrix_text(["aten_scaled_mm"]))
    return tmp_path


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_the_templates_are_the_examples(name):
    """examples/ is what init writes for the plugin's own matrix: one text, tested by test_ci_examples."""
    assert (ROOT / "pytest_scaledmm" / "scaffold" / name).read_text() == (ROOT / "examples" / name).read_text()


def test_init_writes_tox_and_both_ci_files_for_the_chosen_releases(project):
    proc = init(
        project,
        "--torch",
        "2.10.0",
        "2.12.1",
        "2.13.0",
        "--ci",
        "github",
        "gitlab",
        "--runners",
        "h100",
        "mi300",
        "--shards",
        "3",
        "--spec",
        "pytest-scaledmm @ git+https://example.com/me/fork@v1",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "next: tox -e torch210,torch212,torch213,report  then  tox -e gate"
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(project / "tox.ini")
    assert tox["tox"]["env_list"].split() == ["torch{210,212,213}", "report"]
    assert tox["scaledmm"]["spec"] == "pytest-scaledmm @ git+https://example.com/me/fork@v1"
    deps = tox["testenv"]["deps"].split("\n")
    assert "torch212: torch==2.12.1" in deps and "{[scaledmm]spec}" in deps
    assert "-n {env:SCALEDMM_WORKERS:auto}" in tox["testenv"]["commands"]
    assert "reports{/}torch210.json" in tox["testenv:gate"]["commands"]
    assert "reports{/}torch213.json" in tox["testenv:gate"]["commands"]

    github = yaml.safe_load((project / ".github" / "workflows" / "scaledmm.yml").read_text())
    assert github["env"]["PINNED_TORCH"] == "2.10.0" and github["env"]["SHARDS"] == 3
    assert github["env"]["SCALEDMM_SPEC"] == "pytest-scaledmm @ git+https://example.com/me/fork@v1"
    for job in ("shard", "gate"):
        assert github["jobs"][job]["strategy"]["matrix"]["torch"] == ["2.10.0", "2.12.1", "2.13.0"]
        assert github["jobs"][job]["strategy"]["matrix"]["runner"] == ["h100", "mi300"]
    assert github["jobs"]["shard"]["strategy"]["matrix"]["shard"] == [1, 2, 3]
    gitlab = yaml.safe_load((project / "scaledmm.gitlab-ci.yml").read_text())
    assert gitlab["variables"]["PINNED_TORCH"] == "2.10.0" and gitlab["variables"]["SHARDS"] == "3"
    assert gitlab["scaledmm-shard"]["parallel"]["matrix"][0] == {
        "RUNNER": ["h100", "mi300"],
        "TORCH": ["2.10.0", "2.12.1", "2.13.0"],
        "SHARD": ["1", "2", "3"],
    }
    for path in (project / ".github" / "workflows" / "scaledmm.yml", project / "scaledmm.gitlab-ci.yml"):
        schema = "vendor.github-workflows" if "github" in str(path) else "vendor.gitlab-ci"
        check = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stdout


def test_init_names_where_this_pytest_scaledmm_came_from_and_says_ci_needs_another(project):
    proc = init(project, "--torch", "2.11.0", "2.13.0")
    assert proc.returncode == 0, proc.stderr
    spec = f"pytest-scaledmm @ {ROOT.as_uri()}"  # this checkout, installed editable
    assert f"spec = {spec}" in (project / "tox.ini").read_text()
    assert f"note: SCALEDMM_SPEC in the CI file is a path on this machine ({spec})" in proc.stdout
    assert not (project / "scaledmm.gitlab-ci.yml").exists()  # github only, by default


def test_init_refuses_to_overwrite_and_writes_nothing(project):
    (project / ".github" / "workflows").mkdir(parents=True)
    (project / ".github" / "workflows" / "scaledmm.yml").write_text("mine\n")
    proc = init(project, "--torch", "2.11.0", "2.13.0", "--spec", "x")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"scaledmm init: error: {Path('.github/workflows/scaledmm.yml')} exists: not overwritten"
        " (move it away, or run init with another --dir)\n"
    )
    assert not (project / "tox.ini").exists()
    assert (project / ".github" / "workflows" / "scaledmm.yml").read_text() == "mine\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--torch", "2.13.0", "--base", "my branch"],
            "--base 'my branch': a git ref (a branch, a tag or a commit) without spaces or braces",
        ),
        (["--torch", "2.13.0", "2.13.0"], "--torch 2.13.0 and 2.13.0: one env per minor release (torch213)"),
        (["--torch", "2.11.0", "two"], "--torch two: not a version (e.g. 2.11.0)"),
        (["--torch", "2.11.0", "2.13.0+cpu"], "--torch 2.13.0+cpu: give a release such as 2.11.0 (no local build tag)"),
        (["--torch", "2.11.0", "2.11.1"], "--torch 2.11.0 and 2.11.1: one env per minor release (torch211)"),
        (
            ["--torch", "2.11.0", "2.13.0", "--matrix", "ci/m.yaml"],
            "--matrix ci/m.yaml: no such file in . (write your matrix.yaml first)",
        ),
        (
            ["--torch", "2.11.0", "2.13.0", "--runners", "a b"],
            "--runners a b: a runner label is letters, digits, '.', '_' and '-'",
        ),
        (["--torch", "2.11.0", "2.13.0", "--shards", "0"], "--shards 0: must be 1 or more"),
    ],
)
def test_init_refuses_bad_input_with_one_line(project, args, message):
    proc = init(project, *args, "--spec", "x")
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"scaledmm init: error: {message}\n", "")
    assert not (project / "tox.ini").exists()


# -- what the matrix's kernels import ------------------------------------------------------------


def _written(project: Path) -> tuple:
    """(tox.ini's [scaledmm] kernel_deps lines, the GitHub workflow's KERNEL_DEPS, GitLab's)."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(project / "tox.ini")
    lines = tox["scaledmm"].get("kernel_deps", "").split()
    github = yaml.safe_load((project / ".github" / "workflows" / "scaledmm.yml").read_text())
    gitlab = yaml.safe_load((project / "scaledmm.gitlab-ci.yml").read_text())
    return lines, github["env"]["KERNEL_DEPS"], gitlab["variables"]["KERNEL_DEPS"]


def _init_both(project: Path) -> subprocess.CompletedProcess:
    return init(
        project, "--torch", "2.11.0", "2.13.0", "--ci", "github", "gitlab", "--spec", "pytest-scaledmm @ file:///x"
    )


def test_init_installs_the_extra_of_packed_kernels_in_every_env_that_runs_them(project):
    """A matrix of torchao's kernels: the envs and CI shard jobs install the package's torchao
    extra, else every one of its cases is skipped under both releases and the gate passes."""
    (project / "matrix.yaml").write_text(
        matrix_text(
            ["aten_scaled_mm", {"name": "torchao_int8_weight", "out_dtypes": ["bf16"]}, "torchao_float8_weight_rowwise"]
        )
    )
    proc = _init_both(project)
    assert proc.returncode == 0, proc.stderr
    assert "the envs install for the matrix's kernels: torchao>=0.17" in proc.stdout.splitlines()
    assert _written(project) == (["torchao>=0.17"], "torchao>=0.17", "torchao>=0.17")
    # The same requirement as the package's own extra (pyproject.toml).
    import importlib.metadata

    assert 'torchao>=0.17; extra == "torchao"' in importlib.metadata.requires("pytest-scaledmm")
    # tox resolves the test envs' deps with it, and the report envs without (they run no kernel).
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "tox",
            "-c",
            str(project / "tox.ini"),
            "config",
            "-e",
            "torch211,torch213,report",
            "-k",
            "deps",
        ],
        capture_output=True,
        text=True,
        cwd=project,
    )
    assert shown.returncode == 0, shown.stderr
    envs = dict(zip(["torch211", "torch213", "report"], shown.stdout.split("[testenv:")[1:]))
    assert all("torchao>=0.17" in envs[name] for name in ("torch211", "torch213")), shown.stdout
    assert "torchao" not in envs["report"], shown.stdout
    # The shard jobs pass it to pip; the gate and report jobs, which run no kernel, do not.
    github = yaml.safe_load((project / ".github" / "workflows" / "scaledmm.yml").read_text())
    installs = {
        name: next(s["run"] for s in job["steps"] if s.get("name") == "Install") for name, job in github["jobs"].items()
    }
    assert "$KERNEL_DEPS" in installs["shard"] and "$KERNEL_DEPS" not in installs["gate"] + installs["summary"]
    gitlab = yaml.safe_load((project / "scaledmm.gitlab-ci.yml").read_text())
    assert "$KERNEL_DEPS" in gitlab["scaledmm-shard"]["before_script"][0]
    assert "$KERNEL_DEPS" not in str(
        gitlab["scaledmm-gate"]["before_script"] + gitlab["scaledmm-report"]["before_script"]
    )


def test_init_installs_what_kernel_modules_outside_the_project_come_from(project):
    """A kernel of the project itself, or of torch, adds nothing; one of an installed package adds
    that package (a packed library with the extra's version); one that declares `requires`, what it declares."""
    (project / "mykernels.py").write_text("")
    (project / "src" / "mypkg").mkdir(parents=True)
    (project / "src" / "mypkg" / "__init__.py").write_text("")
    kernels = [
        planted("own", "scaled_mm", module="mykernels"),
        planted("own_package", "scaled_mm", module="mypkg.ops"),
        planted("torch_op", "_scaled_mm", module="torch"),
        planted("tox_based", "main", module="tox.session"),  # an installed package's module: its distribution
        planted("torchao_direct", "addmm_float8_unwrapped_inference", module="torchao.float8.inference"),
        planted("declared", "mm", module="fancylib.ops", requires=["fancylib[cuda]==2.1"]),
        planted("declared_none", "mm", module="installed_by_hand.ops", requires=[]),
    ]
    (project / "matrix.yaml").write_text(matrix_text(kernels))
    proc = _init_both(project)
    assert proc.returncode == 0, proc.stderr
    deps = ["tox", "torchao>=0.17", "fancylib[cuda]==2.1"]
    assert _written(project) == (deps, " ".join(deps), " ".join(deps))
    # The plugin reads the same matrix (`requires` is init's only).
    from pytest_scaledmm.matrix.spec import load_spec

    assert [k.name for k in load_spec(project / "matrix.yaml").kernels][-1] == "declared_none"


def test_init_of_built_in_kernels_adds_no_install(project):
    proc = _init_both(project)
    assert proc.returncode == 0, proc.stderr
    assert "kernel_deps" not in (project / "tox.ini").read_text()
    assert _written(project) == ([], "", "")
    assert not any(line.startswith("the envs install") for line in proc.stdout.splitlines())


@pytest.mark.parametrize(
    "entry, key, message",
    [
        (
            planted("mine", "mm", module="nosuchlib_xyz.ops"),
            "kernels[1].impl",
            "module 'nosuchlib_xyz' is neither in the project nor installed here, so init cannot tell what the envs"
            " must install for it: install it here, or list what pip installs for it under the kernel's `requires:`",
        ),
        (
            {"name": "mine", "module": "nosuchlib_xyz.layers:build"},
            "kernels[1].module",
            "module 'nosuchlib_xyz' is neither in the project nor installed here, so init cannot tell what the envs"
            " must install for it: install it here, or list what pip installs for it under the kernel's `requires:`",
        ),
        (
            planted("mine", "mm", module="fancylib", requires=["fancylib >= 2"]),
            "kernels[1].requires[0]",
            "'fancylib >= 2': one pip requirement without spaces (the CI files pass them to pip as words)",
        ),
        (
            planted("mine", "mm", module="fancylib", requires=["fancy lib!"]),
            "kernels[1].requires[0]",
            "'fancy lib!': one pip requirement without spaces (the CI files pass them to pip as words)",
        ),
        (
            planted("mine", "mm", module="fancylib", requires=["fancylib=2"]),
            "kernels[1].requires[0]",
            "'fancylib=2' is not a pip requirement (",
        ),
        (
            planted("mine", "mm", module="fancylib", requires=["fancylib", "torch==2.5.0"]),
            "kernels[1].requires[1]",
            "'torch==2.5.0': each env installs torch itself (torch per env, the plugin from this checkout);"
            " a kernel cannot pin it",
        ),
        (
            planted("mine", "mm", module="fancylib", requires=["pytest_scaledmm==0.0.1"]),
            "kernels[1].requires[0]",
            "'pytest_scaledmm==0.0.1': each env installs pytest_scaledmm itself",
        ),
    ],
)
def test_init_refuses_a_kernel_whose_needs_it_cannot_tell_and_writes_nothing(project, entry, key, message):
    (project / "matrix.yaml").write_text(matrix_text(["aten_scaled_mm", entry]))
    proc = init(project, "--torch", "2.11.0", "2.13.0", "--ci", "github", "--spec", "x")
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.startswith(f"scaledmm init: error: matrix.yaml: key '{key}': {message}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not (project / "tox.ini").exists() and not (project / ".github").exists()


def test_init_refuses_a_matrix_that_cannot_run_in_one_line(project):
    (project / "matrix.yaml").write_text("version: 1\nkernels: 5\nprofiles: {default: {cases: 1}}\n")
    proc = init(project, "--torch", "2.11.0", "2.13.0", "--spec", "x")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "scaledmm init: error: matrix.yaml: key 'kernels': 5 is not of type 'array'\n"
    assert not (project / "tox.ini").exists()


def test_the_examples_install_what_this_repository_s_matrix_needs():
    """The CI examples run the shipped matrix.yaml: what init would write for it is what they say."""
    from pytest_scaledmm.scaffold.kernel_deps import kernel_requirements

    needed = " ".join(kernel_requirements(ROOT / "matrix.yaml", ROOT))
    github = yaml.safe_load((ROOT / "examples" / "github-actions.yml").read_text())
    gitlab = yaml.safe_load((ROOT / "examples" / "gitlab-ci.yml").read_text())
    assert github["env"]["KERNEL_DEPS"] == gitlab["variables"]["KERNEL_DEPS"] == needed


def test_tox_reads_the_written_tox_ini_as_meant(project):
    """tox itself (no env is created): the envs, each release's pin, -n auto, the gate's reports."""
    assert (
        init(project, "--torch", "2.11.0", "2.13.0", "--ci", "none", "--spec", "pytest-scaledmm @ file:///x").returncode
        == 0
    )
    assert not (project / ".github").exists()
    tox = [sys.executable, "-m", "tox", "-c", str(project / "tox.ini")]
    listed = subprocess.run(tox + ["list", "--no-desc"], capture_output=True, text=True, cwd=project)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["torch211", "torch213", "report", "gate"]
    shown = subprocess.run(
        tox + ["config", "-e", "torch213,gate", "-k", "deps", "commands"], capture_output=True, text=True, cwd=project
    )
    assert shown.returncode == 0, shown.stderr
    torch213, gate = shown.stdout.split("[testenv:gate]")
    assert "pytest-scaledmm @ file:///x" in torch213 and "torch==2.13.0" in torch213 and "torch==2.11.0" not in torch213
    assert f"--scaledmm-matrix {project / 'matrix.yaml'} --scaledmm-profile default -n auto" in torch213
    assert (
        f"--baseline {project / 'reports' / 'torch211.json'} --candidate {project / 'reports' / 'torch213.json'}"
        in gate
    )
    assert "torch" not in gate.split("commands")[0]  # reading reports installs no torch


def test_pytest_xdist_is_a_dependency_of_the_package_not_an_extra():
    """`-n` in the README's commands, tox envs and CI files works wherever the package is installed."""
    import importlib.metadata

    requires = importlib.metadata.requires("pytest-scaledmm") or []
    assert any(r.startswith("pytest-xdist") and "extra ==" not in r for r in requires), requires


# -- one torch release: the working tree's kernels against the committed ones -----------------------


def _git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", *args],
        cwd=project,
        check=True,
        capture_output=True,
    )


def _tox_commands(project: Path, envs: list, env: dict) -> dict:
    """{env: (change_dir, [argv of commands_pre and commands])}, as tox resolves tox.ini (no env
    is created: nothing is installed)."""
    tox = [sys.executable, "-m", "tox", "-c", str(project / "tox.ini"), "config", "-e", ",".join(envs)]
    shown = subprocess.run(
        [*tox, "-k", "change_dir", "commands_pre", "commands"], capture_output=True, text=True, cwd=project, env=env
    )
    assert shown.returncode == 0, shown.stderr
    found, name = {}, None
    for line in shown.stdout.splitlines():
        if line.startswith("[testenv:"):
            name = line[len("[testenv:") : -1]
            found[name] = [None, []]
        elif line.startswith("  ") and line.strip():  # a value of several lines, one command each
            found[name][1].append(shlex.split(line))
        elif " = " in line or line.endswith(" ="):
            key, _, value = line.partition(" = ")
            if key == "change_dir":
                found[name][0] = Path(value)
            elif value.strip():
                found[name][1].append(shlex.split(value))
    return found


def _run_env(project: Path, commands: dict, name: str, env: dict) -> subprocess.CompletedProcess:
    """An env's commands as tox would run them, with this interpreter as the env's python;
    installing (pip) is skipped: this interpreter has the package."""
    change_dir, argvs = commands[name]
    local = {"python": [sys.executable], "scaledmm": [sys.executable, "-m", "pytest_scaledmm"]}
    change_dir.mkdir(parents=True, exist_ok=True)  # as tox does
    proc = None
    for argv in argvs:
        if argv[:3] == ["python", "-m", "pip"]:
            continue
        proc = subprocess.run(
            [*local[argv[0]], *argv[1:]],
            cwd=change_dir,
            env={**env, "TOX_ENV_NAME": name},
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            break
    assert proc is not None
    return proc


@pytest.mark.skipif(shutil.which("git") is None, reason="the one-release flow takes its baseline from git")
def test_one_release_gates_the_working_tree_against_the_committed_kernels(tmp_path):
    """`scaledmm init --torch R` from a clean project: the baseline env runs the kernels as
    committed on main, the release's env those of the working tree, under the same torch; a
    kernel broken in the working tree fails the gate, restored it passes."""
    import torch
    from packaging.version import Version

    release = Version(torch.__version__).base_version
    project = tmp_path / "project"
    project.mkdir()
    matrix = matrix_text(
        [planted("my_fp8", "scaled_mm", module="mykernel")],
        {"mode": ["eager", "aot_eager"], "out_dtype": ["bf16", "fp16"]},
    )
    (project / "matrix.yaml").write_text(matrix)
    (project / "mykernel.py").write_text("from planted_kernels import correct as scaled_mm\n")
    _git(project, "init", "-q")
    _git(project, "add", "matrix.yaml", "mykernel.py")
    _git(project, "commit", "-q", "-m", "kernel")
    # The change under review, not committed: the kernel now drops scale_b.
    (project / "mykernel.py").write_text("from planted_kernels import ignores_scale_b as scaled_mm\n")

    proc = init(project, "--torch", release, "--ci", "github", "--spec", "pytest-scaledmm @ file:///x")
    assert proc.returncode == 0, proc.stderr
    candidate = "torch" + "".join(release.split(".")[:2])
    assert proc.stdout.splitlines()[-1] == f"next: tox -e baseline,{candidate},report  then  tox -e gate"
    github = yaml.safe_load((project / ".github" / "workflows" / "scaledmm.yml").read_text())
    assert github["env"]["PINNED_TORCH"] == release and github["jobs"]["gate"]["strategy"]["matrix"]["torch"] == [
        release
    ]

    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")])),
            "PYTEST_ADDOPTS": "-W ignore --scaledmm-isolate=no --no-scaledmm-triage",  # cases in-process: short
            "SCALEDMM_WORKERS": "0",
        }
    )
    commands = _tox_commands(project, ["baseline", candidate, "gate"], env)
    assert commands["baseline"][1][0][:3] == ["python", "-m", "pytest_scaledmm.scaffold.base_ref"]

    for name in ("baseline", candidate):
        ran = _run_env(project, commands, name, env)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]  # failing cases are data
    reports = {name: json.loads((project / "reports" / f"{name}.json").read_text()) for name in ("baseline", candidate)}
    assert {c["outcome"] for c in reports["baseline"]["cases"]} == {"PASS"}  # main's kernel
    assert {c["outcome"] for c in reports[candidate]["cases"]} == {"MISMATCH"}  # the working tree's
    assert reports["baseline"]["environment"]["torch"] == reports[candidate]["environment"]["torch"]
    assert reports["baseline"]["environment"]["tox_env"] == "baseline"

    gate = _run_env(project, commands, "gate", env)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert gate.stdout.startswith(f"gate FAILED: 4 case(s) newly fail in {candidate} against baseline"), gate.stdout

    # The change undone: the same flow passes (the baseline env takes main again, anew).
    _git(project, "checkout", "--", "mykernel.py")
    for name in ("baseline", candidate, "gate"):
        ran = _run_env(project, commands, name, env)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert ran.stdout.startswith(f"gate passed: no new failure in {candidate} against baseline"), ran.stdout
    assert not (project / "mykernel.py").read_text().startswith("from planted_kernels import ignores")


def test_the_baseline_env_says_in_one_line_when_its_ref_is_missing(tmp_path):
    from pytest_scaledmm.scaffold import base_ref

    proc = subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm.scaffold.base_ref", str(tmp_path), "no-such-ref", str(tmp_path / "b")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"scaledmm baseline: error: {tmp_path} at no-such-ref: ")
    assert "set SCALEDMM_BASE" in proc.stderr
    # A directory of the user's is never emptied for it.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    with pytest.raises(base_ref.BaseRefError, match="holds files of its own"):
        base_ref._clear(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "kept"


def _base_ref(project: Path, ref: str, directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm.scaffold.base_ref", str(project), ref, str(directory)],
        capture_output=True,
        text=True,
    )


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("scaledmm baseline: error: "), proc.stderr
    return proc.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="the one-release flow takes its baseline from git")
def test_the_baseline_holds_every_committed_file_as_committed(tmp_path):
    """Symlinks (one pointing outside the directory) stay symlinks; export-ignore and
    export-subst, which are `git archive`'s, change nothing; a second extraction replaces the first."""
    project = tmp_path / "project"
    (project / "kernels").mkdir(parents=True)
    (project / "kernels" / "fp8.py").write_text("VERSION = '$Format:%H$'\n")
    (project / "matrix.yaml").write_text("version: 1\n")
    (project / ".gitattributes").write_text("kernels/fp8.py export-ignore\nmatrix.yaml export-subst\n")
    os.symlink("../x", project / "zlink")
    os.symlink("kernels/fp8.py", project / "inside")
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "kernels")
    base = tmp_path / "base"
    for _ in range(2):
        proc = _base_ref(project, "main", base)
        assert proc.returncode == 0, proc.stderr
        assert (base / "kernels" / "fp8.py").read_text() == "VERSION = '$Format:%H$'\n"
        assert os.readlink(base / "zlink") == "../x" and os.readlink(base / "inside") == "kernels/fp8.py"
        assert (base / "matrix.yaml").read_text() == "version: 1\n"
    assert (base / ".scaledmm-base-ref").read_text() == "main\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="the one-release flow takes its baseline from git")
def test_the_baseline_refuses_an_option_and_an_empty_repository_in_one_line(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    stderr = _one_line_error(_base_ref(project, "main", tmp_path / "base"))
    assert "the repository has no commits yet: commit the kernels first" in stderr
    assert not (tmp_path / "base").exists()
    (project / "matrix.yaml").write_text("version: 1\n")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "m")
    for ref in (f"--output={tmp_path / 'out.tar'}", "-h"):
        assert "not a git ref" in _one_line_error(_base_ref(project, ref, tmp_path / "base"))
    assert not (tmp_path / "out.tar").exists()
    assert "no such commit, branch or tag" in _one_line_error(_base_ref(project, "main~5", tmp_path / "base"))
    assert not (tmp_path / "base").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="the one-release flow takes its baseline from git")
def test_the_baseline_env_of_a_src_layout_package_runs_the_committed_copy(tmp_path):
    """A package (pyproject.toml, src/ layout): the baseline env never installs the working tree
    and installs the extracted copy; a kernel module found anywhere else (here the working tree's
    regressed one, on PYTHONPATH as an install would put it) is one error line, never run."""
    import torch
    from packaging.version import Version

    release = Version(torch.__version__).base_version
    project = tmp_path / "project"
    (project / "src" / "mypkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "mypkg"\nversion = "0"\n')
    (project / "src" / "mypkg" / "__init__.py").write_text("")
    (project / "src" / "mypkg" / "kernel.py").write_text("from planted_kernels import correct as scaled_mm\n")
    matrix = matrix_text(
        [planted("my_fp8", "scaled_mm", module="mypkg.kernel")], {"mode": ["eager"], "out_dtype": ["bf16"]}
    )
    (project / "matrix.yaml").write_text(matrix)
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "kernel")
    (project / "src" / "mypkg" / "kernel.py").write_text("from planted_kernels import ignores_scale_b as scaled_mm\n")
    proc = init(project, "--torch", release, "--ci", "none", "--spec", "pytest-scaledmm @ file:///x")
    assert proc.returncode == 0, proc.stderr
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(project / "tox.ini")
    assert tox["testenv:baseline"]["skip_install"] == "true"

    installed = os.pathsep.join([str(project / "src"), str(TESTS)])  # the working tree, installed
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [installed, env.get("PYTHONPATH")])),
            "PYTEST_ADDOPTS": "-W ignore --scaledmm-isolate=no --no-scaledmm-triage",
            "SCALEDMM_WORKERS": "0",
        }
    )
    change_dir, argvs = _tox_commands(project, ["baseline"], env)["baseline"]
    base = change_dir
    assert argvs[1] == ["python", "-m", "pip", "install", "--quiet", str(base)]  # the copy, not the tree
    ran = _run_env(project, {"baseline": (change_dir, argvs)}, "baseline", env)
    assert ran.returncode != 0, ran.stdout[-3000:]
    found = str(project / "src" / "mypkg" / "kernel.py")
    line = (
        f"module 'mypkg.kernel' is {found}, not the copy of the git ref in {base.resolve()}: the baseline would"
        " run another tree's kernel"
    )
    assert line in ran.stdout + ran.stderr, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert not (project / "reports" / "baseline.json").exists() or {
        c["outcome"] for c in json.loads((project / "reports" / "baseline.json").read_text())["cases"]
    } != {"MISMATCH"}

    # The copy installed (its src/ first on the path, as pip's install puts it): main's kernel runs.
    env["PYTHONPATH"] = os.pathsep.join([str(base / "src"), env["PYTHONPATH"]])
    ran = _run_env(project, {"baseline": (change_dir, argvs)}, "baseline", env)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    report = json.loads((project / "reports" / "baseline.json").read_text())
    assert {c["outcome"] for c in report["cases"]} == {"PASS"}
