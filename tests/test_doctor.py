"""`scaledmm doctor`: prints what the machine is and runs; --json parses; set variables are
checked against what the installed torch really reads."""

import json
import os
import subprocess
import sys

from pytest_scaledmm import doctor


def test_doctor_json_and_text(tmp_path):
    env = dict(
        os.environ,
        TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
        TORCHINDUCTOR_NOT_A_REAL_KNOB="1",
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm.doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    data = json.loads(done.stdout)
    assert data["versions"]["torch"] and data["versions"]["python"] == sys.version.split()[0]
    assert data["device"]["arch"]
    ops = {op["op"]: op["status"] for op in data["ops"]}
    assert set(ops) >= {"aten._scaled_mm (tensorwise)", "aten._int_mm", "_C.cutlass_scaled_mm (vendor)"}
    assert ops["_C.cutlass_scaled_mm (vendor)"] == "missing"  # nothing registers it here
    assert ops["aten._int_mm"] in ("ok", "error")  # a result either way, never a crash of the doctor
    assert data["caches"]["inductor"] == {
        "path": str(tmp_path / "inductor"),
        "from": "TORCHINDUCTOR_CACHE_DIR",
        "bytes": None,
    }
    verdicts = {e["name"]: e for e in data["environment"]}
    assert verdicts["TORCHINDUCTOR_FORCE_DISABLE_CACHES"]["verdict"] == "real"
    assert verdicts["TORCHINDUCTOR_FORCE_DISABLE_CACHES"]["set"] is True
    assert verdicts["TORCHINDUCTOR_NOT_A_REAL_KNOB"]["verdict"] == "no effect"
    assert verdicts["TORCH_USE_CUDA_DSA"]["verdict"] == "no effect"  # a build flag, not a variable

    text = doctor.render(data)
    for words in (
        "scaledmm doctor",
        "torch    ",
        "scaled-mm ops on",
        "caches:",
        "no effect TORCHINDUCTOR_NOT_A_REAL_KNOB=1",
    ):
        assert words in text
    assert not (tmp_path / "inductor").exists()  # the doctor looks, it does not create


def test_native_reads_need_a_standalone_string(tmp_path, monkeypatch):
    import torch

    lib = tmp_path / "torch" / "lib"
    lib.mkdir(parents=True)
    (lib / "libfake.so").write_bytes(b"\0REAL_KNOB\0 compile with `MESSAGE_ONLY` to enable\0")
    monkeypatch.setattr(torch, "__file__", str(tmp_path / "torch" / "__init__.py"))
    found = doctor._native_reads(["REAL_KNOB", "MESSAGE_ONLY"])
    assert found == {"REAL_KNOB": ["libfake.so"], "MESSAGE_ONLY": []}


def test_scaledmm_doctor_subcommand(capsys):
    from pytest_scaledmm import cli

    assert cli.main(["doctor", "--no-probe", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ops"] == [] and data["environment"]


def torch_has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_doctor_refuses_an_unknown_or_absent_device():
    for device in ("tpu", "cuda:7"):
        out = subprocess.run(
            [sys.executable, "-m", "pytest_scaledmm", "doctor", "--device", device], capture_output=True, text=True
        )
        if device == "cuda:7" and torch_has_gpu():
            continue
        assert out.returncode == 2, out
        assert "scaledmm doctor: error:" in out.stderr and "Traceback" not in out.stderr
