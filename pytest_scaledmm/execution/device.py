"""What this machine is: versions, device, arch. Imported lazily (it imports torch)."""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import threading
from dataclasses import dataclass
from functools import cache
from importlib import metadata

from .. import __version__


@dataclass(frozen=True)
class DeviceInfo:
    device: str  # torch device string the cases run on: "cpu", "cuda:0"
    arch: str  # cpu, sm90, gfx942 ...
    name: str
    capability: str | None
    sm_count: int | None


def package_version(name: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def xdist_worker() -> tuple[int, int]:
    """(index, count) of this xdist worker, (0, 1) outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return (int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0), count


# What the run's owner found out about its GPUs, handed to each xdist worker (hand_over_devices):
# a worker then answers gpu_count and device_info without initialising CUDA itself. Its child,
# which runs the cases, is the only other process that does.
_handed_gpus: int | None = None
_handed_info: dict[str, DeviceInfo] = {}


def described_devices(requested: str) -> dict | None:
    """The GPUs a run's workers may run on, as plain data for them (take_described_devices):
    their count and each one's DeviceInfo. None on a CPU run or where torch sees no GPU."""
    if requested == "cpu" or not gpu_count():
        return None
    count = gpu_count()
    return {"gpus": count, "devices": [dataclasses.asdict(device_info(f"cuda:{index}")) for index in range(count)]}


def take_described_devices(block: dict | None) -> None:
    """Answer from what the run's owner described (described_devices) from now on."""
    global _handed_gpus
    if not block:
        return
    _handed_gpus = int(block["gpus"])
    for fields in block["devices"]:
        info = DeviceInfo(**fields)
        _handed_info[info.device] = info


def gpu_count() -> int:
    """The GPUs torch sees here: 0 where CUDA is not available."""
    if _handed_gpus is not None:
        return _handed_gpus
    import torch  # noqa: PLC0415  lazy: torch only when asked

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(requested: str) -> str:
    """The device string cases run on. With xdist and several GPUs, worker gwN takes GPU N mod the
    GPU count, so -n <GPUs> puts one worker on each GPU."""
    count = gpu_count() if requested != "cpu" else 0
    if requested == "auto":
        requested = "cuda" if count else "cpu"
    if requested.startswith("cuda") and not count:
        raise RuntimeError(f"--scaledmm-device={requested} but torch.cuda.is_available() is False")
    if requested == "cuda":
        index, _ = xdist_worker()
        return f"cuda:{index % count}"
    if requested.startswith("cuda:") and int(requested[5:]) >= count:
        raise RuntimeError(f"--scaledmm-device={requested} but torch sees {count} GPU(s)")
    return requested


def threads_per_worker() -> int:
    """CPU threads for one process so that xdist workers together do not oversubscribe the cores."""
    _, count = xdist_worker()
    return max(1, (os.cpu_count() or 1) // count)


def device_info(device: str) -> DeviceInfo:
    handed = _handed_info.get(device)
    return handed if handed is not None else _asked_device_info(device)


@cache
def _asked_device_info(device: str) -> DeviceInfo:
    import torch  # noqa: PLC0415  lazy: torch only when asked

    if device == "cpu":
        return DeviceInfo("cpu", "cpu", platform.processor() or platform.machine(), None, None)
    props = torch.cuda.get_device_properties(torch.device(device))
    if torch.version.hip:
        arch = getattr(props, "gcnArchName", "gfx").split(":")[0]
    else:
        arch = f"sm{props.major}{props.minor}"
    return DeviceInfo(device, arch, props.name, f"{props.major}.{props.minor}", props.multi_processor_count)


def environment(device: str) -> dict:
    """The environment block of a report."""
    import torch  # noqa: PLC0415  lazy: torch only when asked

    info = device_info(device)
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "triton": package_version("triton") or package_version("pytorch-triton"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "device": info.device,
        "device_name": info.name,
        "arch": info.arch,
        "capability": info.capability,
        "sm_count": info.sm_count,
        "tox_env": os.environ.get("TOX_ENV_NAME"),
        "hypothesis": package_version("hypothesis"),
        "plugin": __version__,
    }


# What the ISA check of torch releases before 2.12 runs in a new Python to load each test build:
# `import torch` first, seconds each, more under load (later releases drop it on Linux).
TORCH_IMPORTING_LOAD_PROBE = """
import torch
from ctypes import cdll
cdll.LoadLibrary("__lib_path__")
"""
# The same question without the import where it can: torch's own libraries the build names are
# loaded by path, then the build. Any other failure takes the check's own way (import torch, then
# load), so the answer is always the one the check would give.
LIBRARY_LOAD_PROBE = """
import ctypes, os, re
lib_dir = __torch_lib_dir__
loaded = set()
while True:
    try:
        ctypes.CDLL("__lib_path__")
        break
    except OSError as exc:
        missing = re.search(r"(lib[^/: ]+\\.so[^/: ]*): cannot open shared object file", str(exc))
        path = os.path.join(lib_dir, missing.group(1)) if missing else None
        if path is None or path in loaded or not os.path.isfile(path):
            import torch  # noqa: F401
            ctypes.CDLL("__lib_path__")
            break
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        loaded.add(path)
"""


def quicken_isa_load_probe(cpu_vec_isa) -> bool:
    """Give Inductor's ISA check LIBRARY_LOAD_PROBE where it still imports torch to load each test
    build. True when it was given."""
    import torch  # noqa: PLC0415  lazy: torch only when asked

    isa = getattr(cpu_vec_isa, "VecISA", None)
    if isa is None or getattr(isa, "_avx_py_load", None) != TORCH_IMPORTING_LOAD_PROBE:
        return False
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    isa._avx_py_load = LIBRARY_LOAD_PROBE.replace("__torch_lib_dir__", repr(lib_dir))
    return True


def probe_cpu_vector_isa_in_background() -> None:
    """Inductor's first CPU kernel waits for a test build of each vector ISA the CPU reports
    (~1.5-5 s each, one after another, redone in every fresh cache: most of a CPU run's cold
    start). Build them now, in parallel threads; Inductor's own check then finds them built.
    These are torch internals: where a release lacks them, nothing is done."""

    if platform.machine() not in ("x86_64", "AMD64"):
        return
    try:
        # Imported here, not in the thread: a thread importing Inductor while this one imports
        # Dynamo can see a half-initialised module.
        from torch._inductor import codecache, cpp_builder, cpu_vec_isa  # noqa: F401, PLC0415

        quicken_isa_load_probe(cpu_vec_isa)

        flags = cpu_vec_isa.x86_isa_checker()
        isas = [isa for isa in cpu_vec_isa.supported_vec_isa_list if all(f in flags for f in str(isa).split())]
    except Exception:  # Inductor repeats the check itself when the first CPU kernel needs it
        return

    def build() -> None:

        try:
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415  lazy: it imports queue (see isolate.py)

            with ThreadPoolExecutor(max(1, len(isas))) as pool:
                list(pool.map(bool, isas))
        except Exception:
            pass

    threading.Thread(target=build, name="scaledmm-isa-probe", daemon=True).start()
