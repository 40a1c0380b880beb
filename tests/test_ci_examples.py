"""examples/github-actions.yml and examples/gitlab-ci.yml, run here: each job's shell steps in
order, on the CPU, with two shards of a tiny matrix, the matrix variables substituted, across three
pipeline runs: the first on main with no baseline (it publishes one and skips the gate with a
notice; on GitLab, asked to with SCALEDMM_PUBLISH_BASELINE=1), a second that gates and passes, a
third whose kernel regressed, which the gate fails. Quicker, the gate job alone on shard reports
made here, under the variables each service sets for a pull request, a push to the default branch
or to another branch: without a baseline only the default branch publishes one, and only the
first ever or when asked; any other run fails in one line.

Install steps are skipped (this interpreter has the package). Every job starts in a fresh copy of
the checkout; artifacts move between jobs through a directory per run, the way the examples name
them: GitHub's upload/download actions and the baseline download from main are played by
`GithubRun._action`, the list of artifacts ever uploaded (`gh api .../actions/artifacts`) by a `gh`
on PATH (`_FAKE_GH`), GitLab's job-artifacts API by a `curl` on PATH that serves the files a
successful pipeline on main left (`_FAKE_CURL`)."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from reports_factory import case, report, whole_shard, write

from matrices import matrix_text, planted

EXAMPLES = Path(__file__).parent.parent / "examples"
# The user's kernel lives in the checkout; the third run's checkout has a broken one.
TINY = matrix_text(
    [planted("my_fp8", "scaled_mm", module="mykernel")], {"mode": ["eager", "aot_eager"], "out_dtype": ["bf16", "fp16"]}
)
KERNEL = {
    "correct": "from planted_kernels import correct as scaled_mm\n",
    "regressed": "from planted_kernels import ignores_scale_b as scaled_mm\n",
}
RUNNER = "cpu"
NOTICE = "no baseline for cpu yet"
PUBLISH_NOTICE = "SCALEDMM_PUBLISH_BASELINE=1 on main: gate skipped"

# A stand-in for GitLab's job-artifacts API: `.../jobs/artifacts/<default branch>/raw/<path>?job=<name>`
# answers with $MAIN_ARTIFACTS/<job name>/<path> (what the last successful pipeline on the default
# branch left), else 404; it writes --output and prints --write-out's %{http_code} as curl does.
_FAKE_CURL = r"""
import os, pathlib, sys, urllib.parse
args = sys.argv[1:]
output = args[args.index("--output") + 1]
url = urllib.parse.urlsplit(args[-1])
branch = urllib.parse.quote(os.environ["CI_DEFAULT_BRANCH"], safe="")
prefix = f"{os.environ['CI_API_V4_URL']}/projects/{os.environ['CI_PROJECT_ID']}/jobs/artifacts/{branch}/raw/"
full = f"{url.scheme}://{url.netloc}{url.path}"
assert full.startswith(prefix), full
job = urllib.parse.parse_qs(url.query)["job"][0]
source = pathlib.Path(os.environ["MAIN_ARTIFACTS"], job, full[len(prefix):])
found = source.is_file()
pathlib.Path(output).write_bytes(source.read_bytes() if found else b'{"message":"404 Not Found"}')
sys.stdout.write("200" if found else "404")
"""

# A stand-in for `gh api "repos/<repo>/actions/artifacts?name=<name>" --jq .total_count`: the
# artifacts of that name ever uploaded, expired ones too, from $GH_ARTIFACTS (a JSON list of
# {"name", "expired"}, missing: none).
_FAKE_GH = r"""
import json, os, pathlib, sys, urllib.parse
args = sys.argv[1:]
assert args[0] == "api" and args[2:] == ["--jq", ".total_count"], args
url = urllib.parse.urlsplit(args[1])
assert url.path == f"repos/{os.environ['GITHUB_REPOSITORY']}/actions/artifacts", url
assert os.environ.get("GH_TOKEN"), "gh needs a token"
name = urllib.parse.parse_qs(url.query)["name"][0]
listed = pathlib.Path(os.environ["GH_ARTIFACTS"])
artifacts = json.loads(listed.read_text()) if listed.is_file() else []
print(sum(a["name"] == name for a in artifacts))
"""


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _commands(directory: Path) -> Path:
    """`python`, `pytest`, `scaledmm` of this interpreter (whatever else is on PATH), `curl` and `gh`."""
    directory.mkdir(exist_ok=True)
    for name, run in (
        ("python", ""),
        ("pytest", " -m pytest"),
        ("scaledmm", " -m pytest_scaledmm"),
        ("curl", f" {directory / 'curl.py'}"),
        ("gh", f" {directory / 'gh.py'}"),
    ):
        path = directory / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}"{run} "$@"\n')
        path.chmod(0o755)
    (directory / "curl.py").write_text(_FAKE_CURL)
    (directory / "gh.py").write_text(_FAKE_GH)
    return directory


def _environment(root: Path) -> dict:
    tests = str(Path(__file__).parent)
    return {
        **os.environ,
        "PATH": os.pathsep.join([str(_commands(root / ".bin")), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])),
        # What keeps this test short: cases in the pytest process.
        "PYTEST_ADDOPTS": "-p no:cacheprovider -W ignore --scaledmm-isolate=no --no-scaledmm-triage",
    }


def _checkout(root: Path, kernel: str, matrix: str = TINY) -> Path:
    """A fresh clone of the user's project, as every CI job starts with."""
    root.mkdir(parents=True)
    (root / "matrix.yaml").write_text(matrix)
    (root / "mykernel.py").write_text(KERNEL[kernel])
    return root


def _bash(script: str, root: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


# The gate job alone: one shard (1/1) of a run made here, and a baseline of the same cases.
TORCH = "2.13.0"
SHARD_CASES = [case(f"k-{i}", "PASS") for i in range(2)]


def _shard_report(cases=None) -> dict:
    cases = SHARD_CASES if cases is None else cases
    shard = report(cases, torch=TORCH)
    shard["shard"] = whole_shard(cases)
    return shard


def _place(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write(path, data)


def _copy_tree(source: Path, target: Path) -> None:
    """The files under `source` (or the file `source`) into `target`, as an artifact holds them."""
    target.mkdir(parents=True, exist_ok=True)
    if source.is_file():
        shutil.copy2(source, target / source.name)
    for path in source.rglob("*"):
        if path.is_file():
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / path.relative_to(source))


# -- GitHub Actions ------------------------------------------------------------------------------

_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def _github_event(ref: str) -> tuple:
    """(GITHUB_EVENT_NAME, GITHUB_REF_NAME) that GitHub sets for a run on `ref`: a pull request's
    merge ref, else a push."""
    if ref.startswith("refs/pull/"):
        return "pull_request", ref[len("refs/pull/") :]
    return "push", ref.rpartition("refs/heads/")[2]


class GithubRun:
    """One workflow run: its ref, event and inputs, its artifacts, and what earlier runs on the
    default branch left (`main`, shared by the runs of a test): `main/<event>/<artifact>`, the
    artifacts of the last green run of that event that uploaded any, and `main/listed.json`,
    every baseline artifact ever uploaded (expired ones too)."""

    def __init__(
        self,
        tmp: Path,
        name: str,
        workflow: dict,
        *,
        ref: str,
        kernel: str,
        main: Path,
        event: str | None = None,
        default_branch: str = "main",
        inputs: dict | None = None,
        matrix: str = TINY,
    ):
        self.tmp, self.name, self.workflow, self.ref, self.kernel, self.main = tmp, name, workflow, ref, kernel, main
        self.matrix = matrix
        self.event, self.ref_name = _github_event(ref)
        self.event = event or self.event
        self.default_branch = default_branch
        self.inputs = inputs or {}
        self.run_id = name
        self.artifacts = tmp / name / "artifacts"
        self.artifacts.mkdir(parents=True)

    def publishes(self) -> bool:
        """Whether this run's baseline artifact, when green, is what later runs download. The
        download takes the last successful run on the branch that uploaded the artifact, of any
        event unless told one (a pull request from a fork's main is on branch main too): the
        workflow names `push` and `workflow_dispatch`, and uploads from no other run."""
        return self.event in ("push", "workflow_dispatch") and self.ref == f"refs/heads/{self.default_branch}"

    def _value(self, term: str, context: dict):
        term = term.strip()
        if term[:1] == "'" and term[-1:] == "'":
            return term[1:-1]
        if term.startswith("steps."):  # a step that did not run has no outputs: ''
            return context.get(term, "")
        assert term in context, f"the test does not know the expression {term!r}"
        return str(context[term])

    def _condition(self, condition: str, context: dict, status: str) -> bool:
        """The few GitHub expressions the examples use: always(), success(), `a == b` and `&&`."""
        result = True
        for term in condition.split("&&"):
            term = term.strip()
            if term == "always()":
                continue
            if term == "success()":
                result = result and status == "success"
            else:
                left, equals, right = term.partition("==")
                assert equals, f"the test does not know the condition {term!r}"
                result = result and self._value(left, context) == self._value(right, context)
        # Without always(), a step runs only while the job has not failed.
        return result and ("always()" in condition or status == "success")

    def _action(self, step: dict, root: Path, context: dict) -> tuple:
        """(exit status, output) of a `uses:` step."""
        uses, given = (
            step["uses"],
            {
                k: _EXPRESSION.sub(lambda m: self._value(m.group(1), context), str(v))
                for k, v in step.get("with", {}).items()
            },
        )
        if uses.startswith(("actions/checkout@", "actions/setup-python@")):
            return 0, ""
        if uses.startswith("actions/upload-artifact@"):
            source = root / given["path"]
            if not source.exists():
                return 0, "no files found"
            _copy_tree(source, self.artifacts / given["name"])
            return 0, f"uploaded {given['name']}"
        if uses.startswith("actions/download-artifact@"):
            assert given.get("merge-multiple") == "True"
            names = [p for p in self.artifacts.iterdir() if Path(p.name).match(given["pattern"])]
            for artifact in names:
                _copy_tree(artifact, root / given["path"])
            return 0, f"downloaded {len(names)}"
        if uses.startswith("dawidd6/action-download-artifact@"):
            assert given["branch"] == self.default_branch
            # Without search_artifacts it takes the last green run whatever it uploaded, and
            # without an event a pull request's run too: the test knows only the searching form.
            assert given.get("search_artifacts") == "True", given
            assert given.get("event") in ("push", "workflow_dispatch"), given
            artifact = self.main / given["event"] / given["name"]
            if artifact.is_dir():
                _copy_tree(artifact, root / given["path"])
                return 0, f"downloaded {given['name']}"
            if given["if_no_artifact_found"] == "fail":
                return 1, "no artifact found"
            return 0, "no artifact found"
        if uses.startswith("actions/cache@"):
            # Restores the exact key or the newest entry a restore-key prefixes; saves at the end
            # of a job that succeeded, under its key (entries are immutable, as on GitHub).
            found = restore_cache(self.tmp / "gh-cache", given["key"], [given["restore-keys"]], root / given["path"])
            self.post_saves.append((given["key"], root / given["path"]))
            return 0, f"cache restored from {found}" if found else "cache not found"
        raise AssertionError(f"the test does not know the action {uses}")

    def job(self, job_name: str, matrix: dict, env: dict) -> list:
        """(step name, exit status or None when skipped, output) of each step of one job."""
        job = self.workflow["jobs"][job_name]
        label = "-".join(str(v) for v in matrix.values()) or "all"
        root = _checkout(self.tmp / self.name / f"{job_name}-{label}", self.kernel, self.matrix)
        outputs = root / ".github-output"
        env = {
            **env,
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(self.tmp / self.name / "summary.md"),
            # What the runner sets for every step (the default branch is in the event payload only).
            "GITHUB_REF": self.ref,
            "GITHUB_REF_NAME": self.ref_name,
            "GITHUB_EVENT_NAME": self.event,
            "GITHUB_REPOSITORY": "me/project",
            "GH_ARTIFACTS": str(self.main / "listed.json"),
        }
        context = {f"matrix.{k}": v for k, v in matrix.items()}
        context.update({f"env.{k}": v for k, v in env.items()})
        self.post_saves: list = []
        context.update(
            {
                "github.workspace": str(root),
                "github.run_id": str(self.run_id),
                "github.ref": self.ref,
                "github.ref_name": self.ref_name,
                "github.event_name": self.event,
                "github.event.repository.default_branch": self.default_branch,
                "github.token": "token",
                # A boolean input reads `true`; outside workflow_dispatch there is none: ''.
                "inputs.publish_baseline": str(self.inputs.get("publish_baseline", "")).lower(),
            }
        )
        status, results = "success", []
        for step in job["steps"]:
            name = step.get("name", step.get("uses", ""))
            if name.startswith("Install") or not self._condition(step.get("if", "success()"), context, status):
                results.append((name, None, ""))
                continue
            if "uses" in step:
                code, output = self._action(step, root, context)
            else:
                outputs.write_text("")
                script = _EXPRESSION.sub(lambda m: self._value(m.group(1), context), step["run"])
                step_env = {
                    k: _EXPRESSION.sub(lambda m: self._value(m.group(1), context), str(v))
                    for k, v in step.get("env", {}).items()
                }
                proc = _bash(script, root, {**env, **step_env})
                code, output = proc.returncode, proc.stdout + proc.stderr
                for line in outputs.read_text().splitlines():
                    key, _, value = line.partition("=")
                    context[f"steps.{step['id']}.outputs.{key}"] = value
            results.append((name, code, output))
            if code:
                status = "failure"
        for key, path in self.post_saves if status == "success" else ():
            save_cache(self.tmp / "gh-cache", key, path)
        return results

    def pipeline(self, env: dict) -> dict:
        """Every job of the run, for one runner and this torch: {job: steps}."""
        torch = _torch_version()
        jobs = {}
        for shard in (1, 2):
            jobs[f"shard{shard}"] = self.job("shard", {"runner": RUNNER, "torch": torch, "shard": shard}, env)
            assert all(not code for _, code, _ in jobs[f"shard{shard}"]), jobs[f"shard{shard}"]
        jobs["gate"] = self.job("gate", {"runner": RUNNER, "torch": torch}, env)
        jobs["summary"] = self.job("summary", {}, env)
        # dawidd6/action-download-artifact takes the last *successful* run that uploaded it.
        if self.publishes() and not any(code for steps in jobs.values() for _, code, _ in steps):
            publish(self.main, self.event, self.artifacts)
        return jobs


def _gitlab_expand(text: str, variables: dict) -> str:
    """GitLab's $NAME expansion in a job's variables and cache key."""
    return re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), ""), text)


def restore_cache(store: Path, key: str, prefixes: list, path: Path) -> str | None:
    """A CI cache's restore: the entry named `key`, else the newest one a prefix starts."""
    entries = sorted(store.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True) if store.is_dir() else []
    found = next((e for e in entries if e.name == key), None)
    found = found or next((e for e in entries if any(e.name.startswith(p) for p in prefixes)), None)
    if found is not None:
        _copy_tree(found, path)
    return found.name if found is not None else None


def save_cache(store: Path, key: str, path: Path) -> None:
    if path.is_dir() and not (store / key).exists():
        _copy_tree(path, store / key)


def publish(main: Path, event: str, artifacts: Path) -> None:
    """The baseline artifacts of a green run of `event` on main: what later runs download, and
    listed for good."""
    baselines = [p for p in artifacts.iterdir() if p.name.startswith("scaledmm-baseline-")]
    if not baselines:
        return
    shutil.rmtree(main / event, ignore_errors=True)
    for artifact in baselines:
        _copy_tree(artifact, main / event / artifact.name)
    listed = main / "listed.json"
    names = json.loads(listed.read_text()) if listed.is_file() else []
    names += [{"name": p.name, "expired": False} for p in baselines]
    listed.write_text(json.dumps(names))


def expire(main: Path) -> None:
    """90 days on: the artifacts are gone, listed still, as expired."""
    for event in ("push", "workflow_dispatch"):
        shutil.rmtree(main / event, ignore_errors=True)
    listed = main / "listed.json"
    listed.write_text(json.dumps([{**a, "expired": True} for a in json.loads(listed.read_text())]))


def _ran(steps: list) -> dict:
    return {name: (code, output) for name, code, output in steps if code is not None}


def _github_env(workflow: dict, root: Path) -> dict:
    env = _environment(root)
    env.update({k: str(v) for k, v in workflow["env"].items()})
    env.update({"SHARDS": "2", "PINNED_TORCH": _torch_version()})
    return env


@pytest.mark.slow
def test_the_github_workflow_bootstraps_its_baseline_then_gates(tmp_path):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    assert list(workflow["jobs"]) == ["shard", "gate", "summary"]
    strategy = workflow["jobs"]["shard"]["strategy"]["matrix"]
    assert len(strategy["shard"]) == int(workflow["env"]["SHARDS"])  # kept in step
    env = _github_env(workflow, tmp_path)
    torch = _torch_version()
    main = tmp_path / "main-artifacts"

    # 1. The first run on main: no baseline anywhere.
    first = GithubRun(tmp_path, "first", workflow, ref="refs/heads/main", kernel="correct", main=main)
    gate = _ran(first.pipeline(env)["gate"])
    assert "Compare with the baseline" not in gate and "Gate" not in gate
    assert all(not code for code, _ in gate.values()), gate
    assert f"::notice title=scaled-mm gate skipped::{NOTICE}" in gate["Look for the baseline"][1]
    assert f"**scaled-mm gate skipped:** {NOTICE}" in (tmp_path / "first" / "summary.md").read_text()
    published = main / "push" / f"scaledmm-baseline-{RUNNER}" / f"{RUNNER}.json"
    assert json.loads(published.read_text())["session"]["complete"] is True
    assert (first.artifacts / "scaledmm-matrix-html" / "matrix.html").is_file()

    # 2. A pull request: the baseline from main, the same kernel; the gate passes.
    second = GithubRun(tmp_path, "second", workflow, ref="refs/pull/1/merge", kernel="correct", main=main)
    jobs = second.pipeline(env)
    gate = _ran(jobs["gate"])
    assert all(not code for code, _ in gate.values()), gate
    assert list(gate)[3:] == [
        "Download the baseline",
        "Download the baseline published by Run workflow",
        "Merge the shards",
        "Look for the baseline",
        "Compare with the baseline",
        "Gate",
        "Prepare the next baseline",
        "actions/upload-artifact@v4",
    ]
    assert "gate passed: no new failure" in gate["Gate"][1]
    assert NOTICE not in gate["Look for the baseline"][1]
    assert not (second.artifacts / f"scaledmm-baseline-{RUNNER}").exists()  # only main publishes
    merged = json.loads(
        (second.artifacts / f"scaledmm-merged-{RUNNER}-torch{torch}" / f"{RUNNER}-torch{torch}.json").read_text()
    )
    assert merged["session"]["complete"] is True and merged["shard"]["count"] == 2
    summary = (tmp_path / "second" / "summary.md").read_text()
    assert "merged 2 shard(s) into" in summary and "**gate passed: no new failure" in summary
    for shard in (1, 2):
        xml = (
            second.artifacts
            / f"scaledmm-{RUNNER}-torch{torch}-shard{shard}"
            / f"{RUNNER}-torch{torch}-shard{shard}.xml"
        )
        for prop in ET.parse(xml).getroot().iter("property"):
            json.loads(prop.get("value"))

    # 3. A push to main whose kernel regressed: the gate fails, the baseline stays as it was.
    third = GithubRun(tmp_path, "third", workflow, ref="refs/heads/main", kernel="regressed", main=main)
    before = published.read_bytes()
    gate = _ran(third.pipeline(env)["gate"])
    assert gate["Gate"][0] == 1 and "gate FAILED" in gate["Gate"][1], gate["Gate"]
    assert "Prepare the next baseline" not in gate
    assert published.read_bytes() == before  # the failed run on main keeps the old baseline
    assert (third.artifacts / f"scaledmm-merged-{RUNNER}-torch{torch}").is_dir()  # uploaded always


def test_the_github_workflow_fails_the_gate_job_on_a_missing_shard(tmp_path):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    env = _github_env(workflow, tmp_path)
    torch = _torch_version()
    run = GithubRun(tmp_path, "missing", workflow, ref="refs/pull/1/merge", kernel="correct", main=tmp_path / "main")
    assert all(not code for _, code, _ in run.job("shard", {"runner": RUNNER, "torch": torch, "shard": 1}, env))
    steps = [step for step in run.job("gate", {"runner": RUNNER, "torch": torch}, env) if step[1] is not None]
    name, code, output = steps[-2]  # the merged report is uploaded whatever happened
    assert name == "Merge the shards" and code == 1
    assert output.strip().endswith("is INCOMPLETE: shard(s) 2/2 missing: 1 of 2 not given")
    assert steps[-1][0] == "actions/upload-artifact@v4"


def _github_gate_job(
    tmp_path, *, ref, event=None, default_branch="main", baseline=False, expired=False, inputs=None, cases=None
) -> tuple:
    """The gate job of `examples/github-actions.yml` for a run on `ref`, on a shard made here
    (of `cases`): (its steps, the run). `baseline`: a push on main published one; `expired`:
    one was published and has expired since."""
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    env = {**_github_env(workflow, tmp_path), "PINNED_TORCH": TORCH}
    main = tmp_path / "main-artifacts"
    if baseline or expired:
        earlier = tmp_path / "earlier"
        _place(earlier / f"scaledmm-baseline-{RUNNER}" / f"{RUNNER}.json", report(SHARD_CASES, torch=TORCH))
        publish(main, "push", earlier)
    if expired:
        expire(main)
    run = GithubRun(
        tmp_path,
        "run",
        workflow,
        ref=ref,
        kernel="correct",
        main=main,
        event=event,
        default_branch=default_branch,
        inputs=inputs,
    )
    name = f"{RUNNER}-torch{TORCH}-shard1"
    _place(run.artifacts / f"scaledmm-{name}" / f"{name}.json", _shard_report(cases))
    return run.job("gate", {"runner": RUNNER, "torch": TORCH}, env), run


def _step(steps: list, name: str) -> tuple:
    return next((code, output) for step, code, output in steps if step == name)


@pytest.mark.parametrize(
    "ref, event, default_branch",
    [
        ("refs/pull/7/merge", None, "main"),  # a pull request
        ("refs/heads/feature", None, "main"),  # a push to another branch
        ("refs/heads/main", "pull_request_target", "main"),  # runs on the base branch's ref, for a pull request
        ("refs/heads/main", None, "trunk"),  # main is not this repository's default branch
    ],
)
def test_the_github_gate_job_without_a_baseline_fails_off_the_default_branch(tmp_path, ref, event, default_branch):
    """The baseline expires 90 days after the last green run on the default branch: a pull
    request then must not pass ungated."""
    steps, run = _github_gate_job(tmp_path, ref=ref, event=event, default_branch=default_branch)
    code, output = _step(steps, "Look for the baseline")
    assert code == 1
    assert output.splitlines() == [
        f"::error title=scaled-mm gate::no baseline for {RUNNER} (none published on {default_branch} yet, or it"
        f" expired): {ref} cannot be gated; run this workflow on {default_branch} (a push, or Run workflow) to"
        " publish one"
    ]
    assert _step(steps, "Gate")[0] is None and _step(steps, "Prepare the next baseline")[0] is None
    assert not (run.artifacts / f"scaledmm-baseline-{RUNNER}").exists()  # nothing published
    assert (run.artifacts / f"scaledmm-merged-{RUNNER}-torch{TORCH}").is_dir()  # the merged report, always


@pytest.mark.parametrize("default_branch, event", [("main", "push"), ("trunk", "push"), ("main", "workflow_dispatch")])
def test_the_github_gate_job_on_the_default_branch_publishes_the_first_baseline(tmp_path, default_branch, event):
    steps, run = _github_gate_job(
        tmp_path, ref=f"refs/heads/{default_branch}", event=event, default_branch=default_branch
    )
    assert all(not code for _, code, _ in steps), steps
    code, output = _step(steps, "Look for the baseline")
    assert output.splitlines() == [
        f"::notice title=scaled-mm gate skipped::{NOTICE} (first run on {default_branch}): gate skipped; this run"
        f" publishes the merged report of torch {TORCH} as the baseline"
    ]
    assert _step(steps, "Gate")[0] is None
    published = run.artifacts / f"scaledmm-baseline-{RUNNER}" / f"{RUNNER}.json"
    assert json.loads(published.read_text())["session"]["complete"] is True


# A run whose merged report holds a regression: never published as a baseline unless asked.
REGRESSED = [case("k-0", "PASS"), case("k-1", "MISMATCH", "values off the reference")]


@pytest.mark.parametrize("event", ["push", "workflow_dispatch"])
def test_the_github_gate_job_on_main_fails_when_the_baseline_expired(tmp_path, event):
    """A baseline published once and expired since: main's run is no first run; it fails in one
    line rather than publish its (here regressed) reports ungated."""
    steps, run = _github_gate_job(tmp_path, ref="refs/heads/main", event=event, expired=True, cases=REGRESSED)
    code, output = _step(steps, "Look for the baseline")
    assert code == 1
    assert output.splitlines() == [
        f"::error title=scaled-mm gate::the baseline of {RUNNER} expired or is missing (scaledmm-baseline-{RUNNER}"
        " was published before): refs/heads/main is not published ungated; to publish this run's reports as the"
        " baseline deliberately, Run workflow on main with publish_baseline"
    ]
    assert "first run" not in output
    assert _step(steps, "Gate")[0] is None and _step(steps, "Prepare the next baseline")[0] is None
    assert not (run.artifacts / f"scaledmm-baseline-{RUNNER}").exists()


def test_the_github_gate_job_fails_when_the_artifacts_cannot_be_listed(tmp_path, monkeypatch):
    """Only a list that holds none is a first run: a failed `gh api` fails the job."""
    monkeypatch.setattr(sys.modules[__name__], "_FAKE_GH", "import sys; sys.exit(1)\n")
    steps, run = _github_gate_job(tmp_path, ref="refs/heads/main")
    code, output = _step(steps, "Look for the baseline")
    assert code == 1
    assert output.splitlines() == [
        f"::error title=scaled-mm gate::cannot list the artifacts scaledmm-baseline-{RUNNER}: the gate cannot judge"
    ]
    assert not (run.artifacts / f"scaledmm-baseline-{RUNNER}").exists()


@pytest.mark.parametrize("expired, baseline", [(True, False), (False, True)])
def test_the_github_gate_job_publishes_ungated_when_run_workflow_asks(tmp_path, expired, baseline):
    """Run workflow with publish_baseline on main: the merged reports become the baseline as they
    are (a deliberate reset, after expiry or over a baseline found), gate skipped with a notice."""
    steps, run = _github_gate_job(
        tmp_path,
        ref="refs/heads/main",
        event="workflow_dispatch",
        expired=expired,
        baseline=baseline,
        inputs={"publish_baseline": True},
        cases=REGRESSED,
    )
    assert all(not code for _, code, _ in steps), steps
    assert _step(steps, "Look for the baseline")[1].splitlines() == [
        "::notice title=scaled-mm gate skipped::publish_baseline asked for on main: gate skipped; this run"
        f" publishes the merged report of torch {TORCH} as the baseline of {RUNNER}"
    ]
    assert _step(steps, "Gate")[0] is None
    published = json.loads((run.artifacts / f"scaledmm-baseline-{RUNNER}" / f"{RUNNER}.json").read_text())
    assert [c["outcome"] for c in published["cases"]] == ["PASS", "MISMATCH"]


def test_the_github_gate_job_ignores_publish_baseline_off_the_default_branch(tmp_path):
    steps, run = _github_gate_job(
        tmp_path, ref="refs/heads/feature", event="workflow_dispatch", inputs={"publish_baseline": True}
    )
    assert _step(steps, "Look for the baseline")[0] == 1
    assert not (run.artifacts / f"scaledmm-baseline-{RUNNER}").exists()


def test_the_github_gate_job_gates_against_the_newer_baseline(tmp_path):
    """A baseline published by Run workflow after the last push's: the gate judges against it."""
    old = report([case("k-0", "PASS"), case("k-1", "MISMATCH", "values off the reference")], torch=TORCH)
    new = report(SHARD_CASES, torch=TORCH)
    old["session"]["started"], new["session"]["started"] = "2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00"
    main = tmp_path / "main-artifacts"
    for event, data in (("push", old), ("workflow_dispatch", new)):
        _place(main / event / f"scaledmm-baseline-{RUNNER}" / f"{RUNNER}.json", data)
    steps, _ = _github_gate_job(tmp_path, ref="refs/pull/3/merge", cases=REGRESSED)
    code, output = _step(steps, "Gate")
    assert code == 1 and "gate FAILED: 1 case(s) newly fail" in output, output


@pytest.mark.parametrize("ref", ["refs/pull/7/merge", "refs/heads/main"])
def test_the_github_gate_job_with_a_baseline_gates(tmp_path, ref):
    steps, run = _github_gate_job(tmp_path, ref=ref, baseline=True)
    assert all(not code for _, code, _ in steps), steps
    assert "gate passed: no new failure" in _step(steps, "Gate")[1]
    assert NOTICE not in _step(steps, "Look for the baseline")[1]
    # A green run on the default branch publishes the next baseline; a pull request never does.
    assert (run.artifacts / f"scaledmm-baseline-{RUNNER}").is_dir() == (ref == "refs/heads/main")


# -- GitLab CI -----------------------------------------------------------------------------------


class GitlabPipeline:
    """One pipeline: its jobs' artifacts, by job name as GitLab names a parallel:matrix job, and
    the predefined variables of its ref and source (a push, or a merge request's pipeline)."""

    def __init__(
        self,
        tmp: Path,
        name: str,
        pipeline: dict,
        *,
        ref: str,
        kernel: str,
        main: Path,
        source: str = "push",
        default_branch: str = "main",
        matrix: str = TINY,
    ):
        self.tmp, self.name, self.pipeline, self.ref, self.kernel, self.main = tmp, name, pipeline, ref, kernel, main
        self.matrix = matrix
        self.source, self.default_branch = source, default_branch
        self.artifacts = tmp / name / "artifacts"
        self.results = {}

    def variables(self) -> dict:
        merge_request = {"CI_MERGE_REQUEST_IID": "5"} if self.source == "merge_request_event" else {}
        return {
            "CI_COMMIT_REF_NAME": self.ref,
            "CI_DEFAULT_BRANCH": self.default_branch,
            "CI_PIPELINE_SOURCE": self.source,
            **merge_request,
        }

    def publishes(self) -> bool:
        """The job-artifacts API serves the last successful pipeline of the default branch."""
        return self.ref == self.default_branch and self.source == "push"

    def job(self, job_name: str, variables: dict, env: dict, needs=()) -> subprocess.CompletedProcess:
        job = self.pipeline[job_name]
        label = f"{job_name}: [{', '.join(variables.values())}]" if variables else job_name
        # pytest refuses a path with brackets: the checkout's directory is named without them.
        root = _checkout(self.tmp / self.name / re.sub(r"[^\w.+-]", "_", label), self.kernel, self.matrix)
        for need in needs:  # `needs:` brings the artifacts of those jobs
            _copy_tree(self.artifacts / need, root)
        # before_script installs packages: skipped here.
        env = {k: v for k, v in env.items() if not k.startswith("CI_MERGE_REQUEST_")}
        env.update({**self.variables(), **variables, "MAIN_ARTIFACTS": str(self.main), "CI_PROJECT_DIR": str(root)})
        env.update({k: _gitlab_expand(str(v), env) for k, v in job.get("variables", {}).items()})
        cache = job.get("cache")
        if cache:  # restored before the job, saved after it when it succeeds
            key = _gitlab_expand(cache["key"], env)
            for path in cache["paths"]:
                restore_cache(self.tmp / "gl-cache", key, [], root / path)
        proc = _bash("\n".join(job["script"]), root, env)
        if cache and proc.returncode == 0:
            for path in cache["paths"]:
                shutil.rmtree(self.tmp / "gl-cache" / key, ignore_errors=True)  # mutable per key
                save_cache(self.tmp / "gl-cache", key, root / path)
        if proc.returncode == 0 or job["artifacts"].get("when") == "always":
            for path in job["artifacts"]["paths"]:
                if (root / path).exists():
                    _copy_tree(
                        root / path,
                        (self.artifacts / label / path).parent
                        if (root / path).is_file()
                        else self.artifacts / label / path,
                    )
        self.results[label] = proc
        return proc

    def run(self, env: dict) -> subprocess.CompletedProcess:
        """Every job for one runner and this torch; the gate job's result."""
        torch = _torch_version()
        shards = []
        for shard in ("1", "2"):
            proc = self.job("scaledmm-shard", {"RUNNER": RUNNER, "TORCH": torch, "SHARD": shard}, env)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            shards.append(f"scaledmm-shard: [{RUNNER}, {torch}, {shard}]")
        gate = self.job("scaledmm-gate", {"RUNNER": RUNNER, "TORCH": torch}, env, needs=shards)
        report = self.job("scaledmm-report", {}, env, needs=[f"scaledmm-gate: [{RUNNER}, {torch}]"])
        assert report.returncode == 0, report.stderr[-3000:]
        # The job-artifacts API serves the last *successful* pipeline on the default branch.
        if self.publishes() and all(proc.returncode == 0 for proc in self.results.values()):
            shutil.rmtree(self.main, ignore_errors=True)
            _copy_tree(self.artifacts, self.main)
        return gate


@pytest.mark.slow
def test_the_gitlab_pipeline_bootstraps_its_baseline_then_gates(tmp_path):
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    assert pipeline["stages"] == ["matrix", "gate", "report"]
    matrix = pipeline["scaledmm-shard"]["parallel"]["matrix"][0]
    assert len(matrix["SHARD"]) == int(pipeline["variables"]["SHARDS"])
    env = _environment(tmp_path)
    env.update({k: str(v) for k, v in pipeline["variables"].items()})
    torch = _torch_version()
    env.update(
        {
            "SHARDS": "2",
            "PINNED_TORCH": torch,
            "CI_API_V4_URL": "https://gitlab.example.com/api/v4",
            "CI_PROJECT_ID": "7",
            "CI_JOB_TOKEN": "token",
        }
    )
    main = tmp_path / "main-artifacts"
    gate_job = f"scaledmm-gate: [{RUNNER}, {torch}]"

    # The first pipeline on main, run with SCALEDMM_PUBLISH_BASELINE=1 (Run pipeline).
    first = GitlabPipeline(tmp_path, "first", pipeline, ref="main", kernel="correct", main=main)
    proc = first.run({**env, "SCALEDMM_PUBLISH_BASELINE": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"NOTICE: {PUBLISH_NOTICE}" in proc.stdout and "gate passed" not in proc.stdout
    # What the next pipelines fetch, under the name the URL in the example asks for.
    assert json.loads((main / gate_job / "publish" / f"{RUNNER}.json").read_text())["session"]["complete"] is True
    assert PUBLISH_NOTICE in (main / gate_job / "merged" / f"{RUNNER}-torch{torch}.md").read_text()

    second = GitlabPipeline(
        tmp_path, "second", pipeline, ref="feature", kernel="correct", main=main, source="merge_request_event"
    )
    proc = second.run(env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "merged 2 shard(s) into" in proc.stdout and "gate passed: no new failure" in proc.stdout
    assert NOTICE not in proc.stdout
    markdown = (second.artifacts / gate_job / "merged" / f"{RUNNER}-torch{torch}.md").read_text()
    assert "## scaled-mm compatibility matrix" in markdown and "**gate passed" in markdown
    report = second.artifacts / "scaledmm-report"
    assert (report / "summary.md").is_file() and (report / "matrix.html").is_file()

    third = GitlabPipeline(tmp_path, "third", pipeline, ref="main", kernel="regressed", main=main)
    before = (main / gate_job / "publish" / f"{RUNNER}.json").read_bytes()
    proc = third.run(env)
    assert proc.returncode == 1 and "gate FAILED" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (main / gate_job / "publish" / f"{RUNNER}.json").read_bytes() == before


def _gitlab_gate_job(tmp_path, *, ref, source, default_branch="main", baseline=False, cases=None, variables=None):
    """The scaledmm-gate job of `examples/gitlab-ci.yml` in a pipeline on `ref`, on a shard made
    here (of `cases`), with more CI/CD `variables`: its process and the pipeline."""
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    env = _environment(tmp_path)
    env.update({k: str(v) for k, v in pipeline["variables"].items()})
    env.update(
        {
            "PINNED_TORCH": TORCH,
            "CI_API_V4_URL": "https://gitlab.example.com/api/v4",
            "CI_PROJECT_ID": "7",
            "CI_JOB_TOKEN": "token",
            **(variables or {}),
        }
    )
    main = tmp_path / "main-artifacts"
    gate_job = f"scaledmm-gate: [{RUNNER}, {TORCH}]"
    if baseline:
        _place(main / gate_job / "publish" / f"{RUNNER}.json", report(SHARD_CASES, torch=TORCH))
    run = GitlabPipeline(
        tmp_path, "run", pipeline, ref=ref, kernel="correct", main=main, source=source, default_branch=default_branch
    )
    shard_job = f"scaledmm-shard: [{RUNNER}, {TORCH}, 1]"
    _place(run.artifacts / shard_job / "shards" / f"{RUNNER}-torch{TORCH}-shard1.json", _shard_report(cases))
    proc = run.job("scaledmm-gate", {"RUNNER": RUNNER, "TORCH": TORCH}, env, needs=[shard_job])
    return proc, run.artifacts / gate_job


@pytest.mark.parametrize(
    "ref, source, default_branch",
    [
        ("feature", "merge_request_event", "main"),  # a merge request's pipeline
        ("main", "merge_request_event", "main"),  # a merge request from a fork's main
        ("feature", "push", "main"),  # a push to another branch
        ("main", "push", "trunk"),  # main is not this project's default branch
    ],
)
def test_the_gitlab_gate_job_without_a_baseline_fails_off_the_default_branch(tmp_path, ref, source, default_branch):
    # Asking to publish changes nothing off the default branch.
    variables = {"SCALEDMM_PUBLISH_BASELINE": "1"}
    proc, artifacts = _gitlab_gate_job(
        tmp_path, ref=ref, source=source, default_branch=default_branch, variables=variables
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = (
        f"ERROR: no baseline for {RUNNER} (none published on {default_branch} yet, or it expired: {ref} cannot be"
        f" gated); run a pipeline on {default_branch} with SCALEDMM_PUBLISH_BASELINE=1 (Build > Pipelines > Run"
        " pipeline, variable) to publish one deliberately"
    )
    assert proc.stderr.splitlines() == [line]
    assert "gate passed" not in proc.stdout and "NOTICE" not in proc.stdout
    assert (artifacts / "merged" / f"{RUNNER}-torch{TORCH}.md").read_text() == line + "\n"


@pytest.mark.parametrize("default_branch", ["main", "trunk"])
def test_the_gitlab_gate_job_on_the_default_branch_without_a_baseline_fails_unless_asked(tmp_path, default_branch):
    """The job-artifacts API answers 404 for a first pipeline and for an expired baseline alike:
    a pipeline on the default branch never publishes its (here regressed) reports ungated."""
    proc, artifacts = _gitlab_gate_job(
        tmp_path, ref=default_branch, source="push", default_branch=default_branch, cases=REGRESSED
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"ERROR: no baseline for {RUNNER} (none published on {default_branch} yet, or it expired or is missing:"
        f" not published ungated); run a pipeline on {default_branch} with SCALEDMM_PUBLISH_BASELINE=1 (Build >"
        " Pipelines > Run pipeline, variable) to publish one deliberately"
    ]
    assert "NOTICE" not in proc.stdout and "first" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("default_branch, baseline", [("main", False), ("trunk", False), ("main", True)])
def test_the_gitlab_gate_job_on_the_default_branch_publishes_when_asked(tmp_path, default_branch, baseline):
    proc, artifacts = _gitlab_gate_job(
        tmp_path,
        ref=default_branch,
        source="push",
        default_branch=default_branch,
        baseline=baseline,
        cases=REGRESSED,
        variables={"SCALEDMM_PUBLISH_BASELINE": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notice = (
        f"NOTICE: SCALEDMM_PUBLISH_BASELINE=1 on {default_branch}: gate skipped; this pipeline publishes the merged"
        f" report of torch {TORCH} as the baseline of {RUNNER}"
    )
    assert proc.stdout.splitlines()[-1] == notice and "gate passed" not in proc.stdout
    published = json.loads((artifacts / "publish" / f"{RUNNER}.json").read_text())
    assert [c["outcome"] for c in published["cases"]] == ["PASS", "MISMATCH"]


def test_the_gitlab_gate_job_with_a_baseline_gates(tmp_path):
    proc, _ = _gitlab_gate_job(tmp_path, ref="feature", source="merge_request_event", baseline=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gate passed: no new failure" in proc.stdout and NOTICE not in proc.stdout


def test_the_gitlab_gate_job_fails_when_the_baseline_cannot_be_fetched(tmp_path):
    """Only "not found" is a first run: any other answer fails the job rather than skip the gate."""
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    env = _environment(tmp_path)
    env.update({k: str(v) for k, v in pipeline["variables"].items()})
    env.update(
        {
            "PINNED_TORCH": "2.11.0",
            "CI_API_V4_URL": "https://elsewhere.example.com/api/v4",
            "CI_PROJECT_ID": "7",
            "CI_JOB_TOKEN": "token",
        }
    )
    fetch = next(line for line in pipeline["scaledmm-gate"]["script"] if "curl" in line)
    root = _checkout(tmp_path / "job", "correct")
    (root / "baseline").mkdir()
    # A curl that cannot connect, as curl exits then (7), before any HTTP status.
    (tmp_path / ".bin" / "curl").write_text("#!/bin/sh\nprintf 000\nexit 7\n")
    proc = _bash(fetch, root, {**env, "RUNNER": RUNNER, "MAIN_ARTIFACTS": str(tmp_path)})
    assert proc.returncode == 1
    assert proc.stderr.strip() == "cannot fetch the baseline (curl exit 7): the gate cannot judge"


# -- the files themselves ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "example, schema", [("github-actions.yml", "vendor.github-workflows"), ("gitlab-ci.yml", "vendor.gitlab-ci")]
)
def test_the_examples_validate_against_their_ci_services_schemas(example, schema):
    """check-jsonschema's vendored copies of the schemas (SchemaStore's), offline."""
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(EXAMPLES / example)]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok -- validation done" in proc.stdout


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    """The check above can fail: a step with both `run` and `uses` is refused."""
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    workflow["jobs"]["gate"]["steps"][0]["run"] = "true"
    broken = tmp_path / "broken.yml"
    broken.write_text(yaml.safe_dump(workflow))
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(broken)]
    assert subprocess.run(command, capture_output=True, text=True).returncode == 1


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


# One Inductor case: what the compile cache the shard jobs keep between runs holds.
COMPILED = matrix_text([planted("my_fp8", "scaled_mm", module="mykernel")], {"mode": ["inductor"]})


def _compile_cache(report_path: Path) -> dict:
    return json.loads(report_path.read_text())["session"]["compile_cache"]


@pytest.mark.slow
def test_the_github_shard_job_compiles_warm_from_the_last_runs_cache(tmp_path):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    env = _github_env(workflow, tmp_path)
    env["SHARDS"] = "1"
    torch = _torch_version()
    counts = []
    for name in ("first", "second"):
        run = GithubRun(
            tmp_path, name, workflow, ref="refs/heads/main", kernel="correct", main=tmp_path / "m", matrix=COMPILED
        )
        steps = _ran(run.job("shard", {"runner": RUNNER, "torch": torch, "shard": 1}, env))
        assert all(not code for code, _ in steps.values()), steps
        counts.append(
            _compile_cache(
                tmp_path / name / f"shard-{RUNNER}-{torch}-1" / "shards" / f"{RUNNER}-torch{torch}-shard1.json"
            )
        )
    assert counts[0]["hit"] == 0 and counts[0]["miss"] >= 1  # cold: nothing restored
    assert counts[1]["hit"] >= 1 and counts[1]["miss"] == 0  # warm: the first run's cache


@pytest.mark.slow
def test_the_gitlab_shard_job_compiles_warm_from_the_last_runs_cache(tmp_path):
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    env = _environment(tmp_path)
    env.update({k: str(v) for k, v in pipeline["variables"].items()})
    env["SHARDS"] = "1"
    torch = _torch_version()
    counts = []
    for name in ("first", "second"):
        run = GitlabPipeline(
            tmp_path, name, pipeline, ref="main", kernel="correct", main=tmp_path / "m", matrix=COMPILED
        )
        proc = run.job("scaledmm-shard", {"RUNNER": RUNNER, "TORCH": torch, "SHARD": "1"}, env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        label = re.sub(r"[^\w.+-]", "_", f"scaledmm-shard: [{RUNNER}, {torch}, 1]")
        counts.append(_compile_cache(tmp_path / name / label / "shards" / f"{RUNNER}-torch{torch}-shard1.json"))
    assert counts[0]["hit"] == 0 and counts[0]["miss"] >= 1
    assert counts[1]["hit"] >= 1 and counts[1]["miss"] == 0
