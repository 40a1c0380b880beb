"""Inductor's CPU vector-ISA check, timed with its own load probe and with LIBRARY_LOAD_PROBE
(execution/device.py quicken_isa_load_probe), each in a fresh Python and a fresh Inductor cache,
cold then warm; and the ISAs each finds, which must be the same.

    python scripts/isa_probe_check.py [--emulate-import-probe]

--emulate-import-probe gives Inductor the importing probe of releases before 2.12 first, so a
later torch can time both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
start = time.perf_counter()
from torch._inductor import cpu_vec_isa
from pytest_scaledmm.execution.device import TORCH_IMPORTING_LOAD_PROBE, quicken_isa_load_probe
if {emulate}:
    cpu_vec_isa.VecISA._avx_py_load = TORCH_IMPORTING_LOAD_PROBE
given = quicken_isa_load_probe(cpu_vec_isa) if {quick} else False
imported = time.perf_counter()
isas = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
print(json.dumps({{"isas": isas, "check_s": round(time.perf_counter() - imported, 2), "quick_probe": given}}))
"""


def run(quick: bool, emulate: bool, cache: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    code = CHILD.format(quick=quick, emulate=emulate)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emulate-import-probe", action="store_true")
    args = parser.parse_args()
    import torch

    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cores")
    results = {}
    for quick in (False, True):
        with tempfile.TemporaryDirectory() as cache:
            for state in ("cold", "warm"):
                start = time.perf_counter()
                found = run(quick, args.emulate_import_probe, cache)
                found["process_s"] = round(time.perf_counter() - start, 2)
                name = f"{'library load' if quick else 'as torch has it'}, {state}"
                results[name] = found
                print(f"{name:32} {json.dumps(found)}")
    lists = {json.dumps(r["isas"]) for r in results.values()}
    print("the same ISAs in every run" if len(lists) == 1 else f"DIFFERENT ISAs: {lists}")
    return 0 if len(lists) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
