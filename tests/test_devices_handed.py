"""The run's GPUs are asked of torch once, by the controller, and handed to each xdist worker
(plugin/devices_handed.py): a worker answers its device, its GPU and the arch it generates for
from them, without initialising CUDA."""

import json

import pytest

from matrices import matrix_text
from pytest_scaledmm.execution import device
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
        "        block = config.workerinput.get('scaledmm_devices')\n"
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
