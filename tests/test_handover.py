"""What the controller hands each xdist worker (plugin/handover.py): the GPUs, asked of torch once
(a worker answers its device, its GPU and the arch it generates for without initialising CUDA),
and the cases it generated while the workers booted (plugin/generated_cases.py)."""

import json
import pickle

import pytest

from matrices import matrix_text
from pytest_scaledmm.execution import device
from pytest_scaledmm.plugin import generated_cases, handover
from pytest_scaledmm.plugin.session import target_arch

H100 = {"device": "cuda:1", "arch": "sm90", "name": "NVIDIA H100", "capability": "9.0", "sm_count": 132}
TWO_GPUS = {"gpus": 2, "devices": [{**H100, "device": "cuda:0"}, H100]}


@pytest.fixture
def handed(monkeypatch):
    """Module state as a worker's, put back afterwards."""
    monkeypatch.setattr(device, "_handed_gpus", None)
    monkeypatch.setattr(device, "_handed_info", {})


def test_a_worker_answers_from_what_the_controller_handed_over(handed, monkeypatch):
    import torch

    # This machine's torch sees no GPU: every answer below can only come from the hand-over.
    assert not torch.cuda.is_available()
    device.take_described_devices(TWO_GPUS)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert device.gpu_count() == 2
    assert device.resolve_device("auto") == "cuda:1"
    assert device.resolve_device("cuda") == "cuda:1"
    assert device.device_info("cuda:1").name == "NVIDIA H100"
    assert target_arch("auto") == "sm90"
    assert device.environment("cuda:1")["capability"] == "9.0"
    with pytest.raises(RuntimeError, match="torch sees 2 GPU"):
        device.resolve_device("cuda:2")


def test_without_a_hand_over_torch_is_asked(handed):
    device.take_described_devices(None)
    assert device.gpu_count() == 0  # this machine's torch: no GPU
    assert device.resolve_device("auto") == "cpu"
    assert target_arch("auto") == "cpu"
    assert device.described_devices("auto") is None


def test_every_xdist_worker_receives_the_controllers_description(matrix_project, monkeypatch):
    # The controller runs in this process: what it describes is what the workers must receive.
    monkeypatch.setattr(device, "described_devices", lambda requested: TWO_GPUS)
    received = matrix_project.path / "received"
    received.mkdir()
    matrix_project.path.joinpath("conftest.py").write_text(
        "import json, os\n"
        "def pytest_configure(config):\n"
        "    if hasattr(config, 'workerinput'):\n"
        f"        block = config.workerinput.get({handover.DEVICES_KEY!r})\n"
        f"        path = os.path.join({str(received)!r}, os.environ['PYTEST_XDIST_WORKER'])\n"
        "        open(path, 'w').write(json.dumps(block))\n",
        encoding="utf-8",
    )
    matrix_project.write_matrix(
        matrix_text(["aten_scaled_mm"], {"mode": ["eager"], "m": [16], "k": [32], "n": [16]}, cases=2)
    )
    result = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-device", "cpu", "-n", "2", "--scaledmm-report", "report.json"
    )
    assert result.ret in (0, 1), result.stdout.str()
    got = {path.name: json.loads(path.read_text()) for path in received.iterdir()}
    assert got == {"gw0": TWO_GPUS, "gw1": TWO_GPUS}
    # The cases ran on the device the run asked for, not on a described GPU.
    assert {case["extra"].get("device", "cpu") for case in matrix_project.report()["cases"]} <= {"cpu"}


# A worker's collection waits until the controller's cases are there (an event, not a time):
# then every worker must read them rather than generate its own.
WAIT_FOR_THE_CONTROLLERS_CASES = f"""
import os, time
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    directory = getattr(session.config, "workerinput", {{}}).get({handover.CASES_DIR_KEY!r})
    if directory is None:
        return None
    deadline = time.monotonic() + 600  # a backstop only
    while not os.path.exists(os.path.join(directory, {generated_cases.FILE_NAME!r})):
        assert time.monotonic() < deadline, "the controller never left its cases"
        time.sleep(0.05)
"""


def test_workers_read_the_cases_the_controller_generated(matrix_project):
    matrix_project.write_matrix(
        matrix_text(["aten_scaled_mm", "int8_w8a8"], {"mode": ["eager"], "m": [16, 17], "k": [32], "n": [16]}, cases=6)
    )
    alone = matrix_project.collect()
    matrix_project.path.joinpath("conftest.py").write_text(WAIT_FOR_THE_CONTROLLERS_CASES, encoding="utf-8")
    result = matrix_project.run("--scaledmm-matrix", "-n", "2", "--scaledmm-report", "report.json")
    assert result.ret in (0, 1), result.stdout.str()
    report = matrix_project.report()
    assert sorted(case["id"] for case in report["cases"]) == sorted(alone)
    processes = report["session"]["phases"]["processes"]
    assert processes["main"]["cases_from"] == "generated here"
    workers = {name: process for name, process in processes.items() if name != "main"}
    assert workers and {process["cases_from"] for process in workers.values()} == {"controller"}


def test_cases_are_read_only_for_the_same_matrix_profile_seed_and_arch(tmp_path):
    key = generated_cases.generation_key("m.yaml", "digest", "default", 1, "cpu")
    generated_cases.write_generated(str(tmp_path), key, (["case"], {"notes": 1}))
    assert generated_cases.read_generated(str(tmp_path), key) == (["case"], {"notes": 1})
    for other in (
        generated_cases.generation_key("m.yaml", "other digest", "default", 1, "cpu"),
        generated_cases.generation_key("m.yaml", "digest", "smoke", 1, "cpu"),
        generated_cases.generation_key("m.yaml", "digest", "default", 2, "cpu"),
        generated_cases.generation_key("m.yaml", "digest", "default", 1, "sm90"),
    ):
        assert generated_cases.read_generated(str(tmp_path), other) is None
    (tmp_path / generated_cases.FILE_NAME).write_bytes(pickle.dumps(("not", "a key"))[:5])
    assert generated_cases.read_generated(str(tmp_path), key) is None  # a cut file: generate here
    assert generated_cases.read_generated(str(tmp_path / "gone"), key) is None
    assert generated_cases.read_generated(None, key) is None
