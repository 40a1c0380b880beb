"""Inductor's CPU vector-ISA check made once per run and shared (execution/vec_isa.py): a process
that takes the shared answer picks the ISA Inductor's own check picked, and takes nothing from a
file that is not for it."""

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 ISAs only")

CHECK = """
import json, sys
from torch._inductor import cpu_vec_isa
from pytest_scaledmm.execution import vec_isa
if sys.argv[1] == "check":
    cpu_vec_isa.pick_vec_isa()
    vec_isa.share_check_result()
    taken = False
else:
    taken = vec_isa.take_shared_result()
print(json.dumps({"taken": taken, "picked": str(cpu_vec_isa.pick_vec_isa()),
                  "valid": [str(i) for i in cpu_vec_isa.valid_vec_isa_list()]}))
"""


def _run(how: str, cache) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", CHECK, how], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_process_taking_the_shared_answer_picks_what_the_check_picked(tmp_path):
    checked = _run("check", tmp_path)
    verdict = json.loads((tmp_path / "scaledmm-vec-isa.json").read_text())
    assert verdict["passed"] == checked["valid"]
    taken = _run("take", tmp_path)
    all_passed = verdict["passed"] == verdict["key"]["candidates"] and verdict["passed"]
    assert taken["taken"] is bool(all_passed)
    assert (taken["picked"], taken["valid"]) == (checked["picked"], checked["valid"])


@pytest.mark.slow
def test_a_file_for_another_torch_or_a_failed_isa_is_not_taken(tmp_path):
    _run("check", tmp_path)
    path = tmp_path / "scaledmm-vec-isa.json"
    verdict = json.loads(path.read_text())
    if not verdict["passed"]:
        pytest.skip("no vector ISA passed Inductor's check on this CPU")
    other = {**verdict, "key": {**verdict["key"], "torch": "0.0.0"}}
    path.write_text(json.dumps(other))
    assert _run("take", tmp_path)["taken"] is False
    failed = {**verdict, "passed": verdict["passed"][1:]}
    path.write_text(json.dumps(failed))
    assert _run("take", tmp_path)["taken"] is False
    path.write_text("{not json")
    assert _run("take", tmp_path)["taken"] is False
