"""Kernels that say which process ran them: the fork server's tests check that a child was forked
from the run's fork server (its parent), and that it took its worker's threads and environment."""

import json
import os
import tempfile

import torch
from planted_crash import correct


def records_process(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Correct, and appends what its process is to $SCALEDMM_TEST_PROCESS_LOG (the eager call)."""
    if not torch.compiler.is_compiling():  # Dynamo cannot trace file writes
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            parent = handle.read().replace(b"\0", b" ").decode(errors="replace")
        seen = {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "parent": parent,
            "threads": torch.get_num_threads(),
            "omp": os.environ.get("OMP_NUM_THREADS"),
            "worker": os.environ.get("PYTEST_XDIST_WORKER"),
            "tempdir": tempfile.gettempdir(),
            "cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
            "pgid": os.getpgid(0),
        }
        with open(os.environ["SCALEDMM_TEST_PROCESS_LOG"], "a") as log:
            log.write(json.dumps(seen) + "\n")
    return correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
