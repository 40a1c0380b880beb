"""Kernels that kill or hang the process running them: isolation must turn them into CRASH and
TIMEOUT outcomes and keep the run going."""

import os
import time

import torch


def aborts(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """CRASH: SIGABRT, as a failed device assertion or a C++ abort does."""
    os.abort()


def hangs(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """TIMEOUT: never returns, like a deadlocked compile or a spinning kernel."""
    while True:
        time.sleep(1)


def correct(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = (a.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


def records_cache_dir(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """Correct, and appends the Inductor cache directory it runs under to $SCALEDMM_TEST_CACHE_LOG."""
    if not torch.compiler.is_compiling():  # the eager call: Dynamo cannot trace file writes
        with open(os.environ["SCALEDMM_TEST_CACHE_LOG"], "a") as log:
            log.write(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "") + "\n")
    return correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
