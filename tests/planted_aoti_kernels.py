"""A scaled-mm kernel whose module, once imported with $PLANTED_AOTI_LOAD set, stands in for
AOTInductor's packaging and loading, so that the aoti tests need no C++ build: a "package" is
the exported program saved by torch.export.save, loaded back as a module, and loading fails as
$PLANTED_AOTI_LOAD says:
  crash-all    every load segfaults (a machine whose AOTInductor loader is broken)
  fail-scaled  a package that calls _scaled_mm raises while it loads; any other loads and runs
  crash-then-no-start  the first load segfaults; after it, a process other than the run's own
               ($PLANTED_AOTI_RUN_PID) exits with status 1 as it imports this module, as a
               child that cannot import the package does
The import patches torch._inductor: a test that imports this module in its own process restores
both functions afterwards (monkeypatch).
"""

import faulthandler
import os

import torch


def _package(program, package_path=None, inductor_configs=None, **_):
    torch.export.save(program, package_path)
    return package_path


# Written by the first load in crash-then-no-start, in the run's directory (every child's too).
CRASHED = "planted-aoti-crashed"


def _load(path, *args, **kwargs):
    how = os.environ.get("PLANTED_AOTI_LOAD")
    if how == "crash-then-no-start":
        open(CRASHED, "w").close()
    if how in ("crash-all", "crash-then-no-start"):
        faulthandler._sigsegv()
    program = torch.export.load(path)
    if how == "fail-scaled" and any("_scaled_mm" in str(node.target) for node in program.graph.nodes):
        raise RuntimeError("planted: this machine cannot load a package that calls _scaled_mm")
    return program.module()


if (
    os.environ.get("PLANTED_AOTI_LOAD") == "crash-then-no-start"
    and os.path.exists(CRASHED)
    and str(os.getpid()) != os.environ.get("PLANTED_AOTI_RUN_PID")
):
    os._exit(1)
if os.environ.get("PLANTED_AOTI_LOAD"):
    torch._inductor.aoti_compile_and_package = _package
    torch._inductor.aoti_load_package = _load


def scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    return torch._scaled_mm(
        a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum
    )
