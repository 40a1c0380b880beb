"""Replay commands and repro scripts name the environment that recorded the case (torch, device,
tox env), and a replay or a repro run under another torch says so in one line on stderr."""

import json
import subprocess
import sys

import pytest
import torch

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.matrix.replay_command import recorded_on, replay_command

H200 = {"torch": "2.11.0+cu130", "device": "cuda:0", "arch": "sm90", "tox_env": "torch211"}
HERE = f"torch={torch.__version__},device=cpu"


def test_a_replay_command_names_the_recorded_environment_before_the_profile():
    command = replay_command("/p/m.yaml", "c1", "smoke", environment=H200)
    assert command == (
        "pytest /p/m.yaml::c1 --scaledmm-matrix --scaledmm-recorded-on"
        " torch=2.11.0+cu130,device=cuda:0,arch=sm90,tox=torch211 --scaledmm-profile smoke"
    )
    assert (
        recorded_on({"torch": "2.13.0+cpu", "device": "cpu", "arch": "cpu", "tox_env": None})
        == "torch=2.13.0+cpu,device=cpu"
    )
    assert recorded_on({"device": "cpu"}) is None  # no torch: nothing to compare a replay with
    # Report data outside the word grammar never becomes a word of the command.
    hostile = recorded_on({"torch": "2.13.0", "tox_env": "x; rm -rf ~", "device": "cpu,torch=9"})
    assert hostile == "torch=2.13.0"


def _run(matrix_project, monkeypatch, function="ignores_scale_b", tox_env="torch213", report="report.json"):
    """One case of kernel `mine`, run by `function`, under the tox env name `tox_env`."""
    matrix_project.write_matrix(matrix_text([planted("mine", function)], {"mode": ["eager"]}))
    monkeypatch.setenv("TOX_ENV_NAME", tox_env)
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", report, *IN_PROCESS)
    monkeypatch.delenv("TOX_ENV_NAME")
    result.assert_outcomes(**({"failed": 1} if function == "ignores_scale_b" else {"passed": 1}))
    return result


def test_the_run_compare_and_the_html_name_the_environment(matrix_project, monkeypatch, capsys):
    # The baseline passes; the candidate, another release's tox env, regresses.
    _run(matrix_project, monkeypatch, "correct", "torch211", "old.json")
    old = json.loads((matrix_project.path / "old.json").read_text())
    old["environment"].update(H200)
    (matrix_project.path / "old.json").write_text(json.dumps(old))
    result = _run(matrix_project, monkeypatch)
    replays = [line.strip() for line in result.outlines if line.strip().startswith("replay: ")]
    assert replays and all(f"--scaledmm-recorded-on {HERE},tox=torch213 --scaledmm-profile" in r for r in replays), (
        replays
    )
    path = matrix_project.path / "report.json"
    capsys.readouterr()
    html = matrix_project.path / "compare.html"
    assert main(["compare", str(matrix_project.path / "old.json"), str(path), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert f"--scaledmm-recorded-on {HERE},tox=torch213 " in out, out  # the newest report's command
    page = html.read_text()
    assert f"--scaledmm-recorded-on {HERE},tox=torch213 " in page
    assert "--scaledmm-recorded-on torch=2.11.0+cu130,device=cuda:0,arch=sm90,tox=torch211 " in page  # the old column's
    assert main(["compare", str(matrix_project.path / "old.json"), str(path)]) == 0


def test_a_replay_under_another_torch_warns_in_one_line(matrix_project, monkeypatch):
    _run(matrix_project, monkeypatch)
    case = matrix_project.report()["cases"][0]["id"]
    other = matrix_project.run(
        "--scaledmm-matrix",
        "--scaledmm-case",
        case,
        "--scaledmm-report",
        "again.json",
        "--scaledmm-recorded-on",
        "torch=2.11.0+cu130,device=cuda:0,tox=torch211",
        *IN_PROCESS,
    )
    other.assert_outcomes(failed=1)
    warnings = [line for line in other.errlines if "warning" in line]
    assert warnings == [
        f"scaledmm: warning: the case was recorded under torch 2.11.0+cu130 (tox env torch211); this is"
        f" torch {torch.__version__}: its outcome may differ for that reason alone"
    ], other.errlines
    same = matrix_project.run(
        "--scaledmm-matrix",
        "--scaledmm-case",
        case,
        "--scaledmm-report",
        "same.json",
        "--scaledmm-recorded-on",
        HERE,
        *IN_PROCESS,
    )
    same.assert_outcomes(failed=1)
    assert not [line for line in same.errlines if "warning" in line], same.errlines


def test_a_bad_recorded_environment_is_one_usage_error(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-recorded-on", "torch=2.11;x", *IN_PROCESS)
    assert result.ret == 4
    text = result.stdout.str() + result.stderr.str()
    assert "--scaledmm-recorded-on" in text and "Traceback" not in text, text


@pytest.mark.slow
def test_a_repro_script_names_its_environment_and_warns_under_another_torch(matrix_project, monkeypatch):
    _run(matrix_project, monkeypatch)
    report = matrix_project.report()
    report["environment"].update({"torch": "2.11.0+cpu", "tox_env": "torch211"})
    (matrix_project.path / "old.json").write_text(json.dumps(report))
    assert (
        main(
            [
                "repro",
                str(matrix_project.path / "old.json"),
                "--out",
                str(matrix_project.path / "repros"),
                "--matrix",
                str(matrix_project.path / "matrix.yaml"),
            ]
        )
        == 0
    )
    script = next((matrix_project.path / "repros").glob("repro_*.py"))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=matrix_project.path, timeout=300
    )
    assert done.returncode == 10, done.stdout + done.stderr  # still reproduces: the warning changes no verdict
    assert "recorded under torch 2.11.0+cpu on cpu:" in done.stdout and ", tox env torch211" in done.stdout
    assert [line for line in done.stderr.splitlines() if line.startswith("WARNING: ")] == [
        f"WARNING: recorded under torch 2.11.0+cpu, tox env torch211; this is torch {torch.__version__}"
    ]
