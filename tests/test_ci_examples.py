"""examples/github-actions.yml and examples/gitlab-ci.yml, run here: each job's shell commands in
order, on the CPU, with two shards of a tiny matrix, the matrix variables substituted. Install
steps, artifact transfers and the baseline download are skipped: the shard and merge steps share
one directory here, and the baseline is an unsharded run of the same matrix."""

import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from matrices import matrix_text, planted

EXAMPLES = Path(__file__).parent.parent / "examples"
TINY = matrix_text([planted("correct")], {"mode": ["eager", "aot_eager"], "out_dtype": ["bf16", "fp16"]})
RUNNER = "cpu"


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _commands(directory: Path) -> Path:
    """`python`, `pytest` and `scaledmm` of this interpreter, whatever else is on PATH."""
    directory.mkdir(exist_ok=True)
    for name, run in (("python", ""), ("pytest", " -m pytest"), ("scaledmm", " -m pytest_scaledmm")):
        path = directory / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}"{run} "$@"\n')
        path.chmod(0o755)
    return directory


def _environment(root: Path) -> dict:
    tests = str(Path(__file__).parent)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(_commands(root / ".bin")), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])),
        # The examples' own options plus what keeps this test short: cases in the pytest process.
        "PYTEST_ADDOPTS": "-p no:cacheprovider -W ignore --scaledmm-isolate=no --no-scaledmm-triage",
        "GITHUB_STEP_SUMMARY": str(root / "step-summary.md"),
    }
    return env


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A checkout with the tiny matrix and the baseline an earlier run on main would have left."""
    root = tmp_path_factory.mktemp("ci")
    (root / "matrix.yaml").write_text(TINY)
    (root / "baseline").mkdir()
    env = {k: v for k, v in _environment(root).items() if k != "GITHUB_STEP_SUMMARY"}
    command = [sys.executable, "-m", "pytest", "--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", f"baseline/{RUNNER}.json"]
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return root


def _fresh(workspace: Path, name: str) -> Path:
    root = workspace / name
    root.mkdir()
    (root / "matrix.yaml").write_text(TINY)
    (root / "baseline").mkdir()
    (root / "baseline" / f"{RUNNER}.json").write_bytes((workspace / "baseline" / f"{RUNNER}.json").read_bytes())
    return root


def _bash(script: str, root: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=root, env=env,
                          capture_output=True, text=True)


# -- GitHub Actions ------------------------------------------------------------------------------

_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def _substitute(text: str, values: dict) -> str:
    def one(match):
        key = match.group(1)
        assert key in values, f"the test does not know the expression {key!r}"
        return str(values[key])

    return _EXPRESSION.sub(one, text)


def _github_steps(job: dict, values: dict):
    """(name, script) of each run step, substituted; install steps and `uses:` steps left out."""
    for step in job["steps"]:
        if "uses" in step or step.get("name", "").startswith("Install"):
            continue
        assert step.get("if") in (None, "always()"), step  # a condition the test would have to evaluate
        yield step.get("name", ""), _substitute(step["run"], values)


def _github_run(root: Path, workflow: dict, job_name: str, matrix: dict, env: dict) -> list:
    job = workflow["jobs"][job_name]
    values = {f"matrix.{k}": v for k, v in matrix.items()}
    values.update({f"env.{k}": v for k, v in env.items()})
    results = []
    for name, script in _github_steps(job, values):
        proc = _bash(script, root, env)
        results.append((name, proc))
        if proc.returncode != 0:
            break
    return results


def _github_env(workflow: dict, root: Path) -> dict:
    env = _environment(root)
    env.update({k: str(v) for k, v in workflow["env"].items()})
    env.update({"SHARDS": "2", "PINNED_TORCH": _torch_version()})
    return env


def test_the_github_workflow_runs_two_shards_merges_compares_and_gates(workspace):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    assert list(workflow["jobs"]) == ["shard", "gate", "summary"]
    strategy = workflow["jobs"]["shard"]["strategy"]["matrix"]
    assert len(strategy["shard"]) == int(workflow["env"]["SHARDS"])  # kept in step
    root = _fresh(workspace, "github")
    env = _github_env(workflow, root)
    torch = _torch_version()
    for shard in (1, 2):
        results = _github_run(root, workflow, "shard", {"runner": RUNNER, "torch": torch, "shard": shard}, env)
        assert all(proc.returncode == 0 for _, proc in results), results[-1][1].stdout[-3000:] + results[-1][1].stderr[-3000:]
    results = _github_run(root, workflow, "gate", {"runner": RUNNER, "torch": torch}, env)
    failed = [(name, proc.stdout[-2000:] + proc.stderr[-2000:]) for name, proc in results if proc.returncode]
    assert not failed and [name for name, _ in results] == [
        "Merge the shards", "Compare with the baseline", "Gate", "Prepare the next baseline"]
    assert "gate passed: no new failure" in results[2][1].stdout
    results = _github_run(root, workflow, "summary", {}, env)
    assert all(proc.returncode == 0 for _, proc in results)

    merged = json.loads((root / "merged" / f"{RUNNER}-torch{torch}.json").read_text())
    baseline = json.loads((root / "baseline" / f"{RUNNER}.json").read_text())
    assert merged["session"]["complete"] is True and merged["shard"]["count"] == 2
    assert {c["id"]: c["outcome"] for c in merged["cases"]} == {c["id"]: c["outcome"] for c in baseline["cases"]}
    assert (root / "publish" / f"{RUNNER}.json").is_file()  # the next baseline, on main
    assert (root / "matrix.html").is_file()
    summary = (root / "step-summary.md").read_text()
    assert summary.count("## scaled-mm compatibility matrix") >= 3  # two shards, the compare, the grid
    assert "merged 2 shard(s) into" in summary and "**gate passed: no new failure" in summary
    for shard in (1, 2):
        junit = ET.parse(root / "shards" / f"{RUNNER}-torch{torch}-shard{shard}.xml")
        for prop in junit.getroot().iter("property"):
            json.loads(prop.get("value"))


def test_the_github_workflow_fails_the_gate_job_on_a_missing_shard(workspace):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    root = _fresh(workspace, "github-missing")
    env = _github_env(workflow, root)
    torch = _torch_version()
    results = _github_run(root, workflow, "shard", {"runner": RUNNER, "torch": torch, "shard": 1}, env)
    assert all(proc.returncode == 0 for _, proc in results)
    results = _github_run(root, workflow, "gate", {"runner": RUNNER, "torch": torch}, env)
    name, proc = results[-1]
    assert name == "Merge the shards" and proc.returncode == 1
    assert proc.stderr.strip().endswith("is INCOMPLETE: shard(s) 2/2 missing: 1 of 2 not given")


# -- GitLab CI -----------------------------------------------------------------------------------


def _gitlab_run(root: Path, pipeline: dict, job_name: str, variables: dict, env: dict) -> subprocess.CompletedProcess:
    job = pipeline[job_name]
    # before_script installs packages and fetches the baseline: skipped here.
    script = "\n".join(job["script"])
    return _bash(script, root, {**env, **variables})


def test_the_gitlab_pipeline_runs_two_shards_merges_compares_and_gates(workspace):
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    assert pipeline["stages"] == ["matrix", "gate", "report"]
    matrix = pipeline["scaledmm-shard"]["parallel"]["matrix"][0]
    assert len(matrix["SHARD"]) == int(pipeline["variables"]["SHARDS"])
    root = _fresh(workspace, "gitlab")
    env = _environment(root)
    env.pop("GITHUB_STEP_SUMMARY")
    env.update({k: str(v) for k, v in pipeline["variables"].items()})
    torch = _torch_version()
    env.update({"SHARDS": "2", "PINNED_TORCH": torch})
    for shard in ("1", "2"):
        proc = _gitlab_run(root, pipeline, "scaledmm-shard", {"RUNNER": RUNNER, "TORCH": torch, "SHARD": shard}, env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc = _gitlab_run(root, pipeline, "scaledmm-gate", {"RUNNER": RUNNER, "TORCH": torch}, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "merged 2 shard(s) into" in proc.stdout and "gate passed: no new failure" in proc.stdout
    proc = _gitlab_run(root, pipeline, "scaledmm-report", {}, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (root / "summary.md").is_file() and (root / "matrix.html").is_file()
    assert (root / "publish" / f"{RUNNER}.json").is_file()
    markdown = (root / "merged" / f"{RUNNER}-torch{torch}.md").read_text()
    assert "## scaled-mm compatibility matrix" in markdown and "**gate passed" in markdown


# -- installing the package ----------------------------------------------------------------------


def _pip_installs(script: str) -> list:
    """The arguments of each `pip install` in a shell line."""
    installs = []
    for command in re.split(r"&&|;|\n", script):
        words = shlex.split(command)
        if words[:2] == ["pip", "install"]:
            installs.append(words[2:])
    return installs


def _check_install(script: str) -> None:
    """The package comes from $SCALEDMM_SPEC, never by name from the package index, where it is not."""
    installs = _pip_installs(script)
    assert any("$SCALEDMM_SPEC" in words for words in installs), script
    assert not any(word.startswith("pytest-scaledmm") for words in installs for word in words), script


def test_the_github_workflow_installs_the_package_from_scaledmm_spec():
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    assert workflow["env"]["SCALEDMM_SPEC"] == "."  # this repository's checkout
    for name, job in workflow["jobs"].items():
        steps = job["steps"]
        install = next(i for i, step in enumerate(steps) if step.get("name", "").startswith("Install"))
        _check_install(steps[install]["run"])
        # "." is the checkout: it must be there before the install.
        assert any(step.get("uses", "").startswith("actions/checkout@") for step in steps[:install]), name


def test_the_gitlab_pipeline_installs_the_package_from_scaledmm_spec():
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    assert pipeline["variables"]["SCALEDMM_SPEC"] == "."  # GitLab checks the repository out for every job
    jobs = [name for name in pipeline if name.startswith("scaledmm-")]
    assert jobs == ["scaledmm-shard", "scaledmm-gate", "scaledmm-report"]
    for name in jobs:
        _check_install("\n".join(line for line in pipeline[name]["before_script"] if "pip install" in line))
