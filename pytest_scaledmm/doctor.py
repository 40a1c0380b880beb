"""`scaledmm doctor`: what this machine is and what it can run.

Versions (python, torch, CUDA/HIP, triton), the device (name, capability, SM count), which
scaled-mm ops work here (each probed by a tiny call in a child process, so a crashing op is a
result, not the end of the check), the Inductor and Triton cache directories and their sizes, and
the environment variables that affect compilation — for each, whether this torch (or triton, or
the CUDA runtime) actually reads it, found by searching the installed sources.
"""

from __future__ import annotations

import argparse
import getpass
import importlib.util
import json
import mmap
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import __version__
from .execution.device import device_info, package_version, resolve_device
from .execution.quiet import import_torch
from .reports.report import dumps_strict

# Variables troubleshooting guides recommend for compile problems; each is checked, set or not.
RECOMMENDED = [
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "TORCHINDUCTOR_CACHE_DIR",
    "TORCHINDUCTOR_MAX_AUTOTUNE",
    "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS",
    "TORCHINDUCTOR_DISABLE_CUTLASS",
    "TORCH_COMPILE_DISABLE",
    "TORCHDYNAMO_DISABLE",
    "TORCH_LOGS",
    "TORCH_USE_CUDA_DSA",
    "PYTORCH_USE_CUDA_DSA",
    "CUDA_LAUNCH_BLOCKING",
    "TORCH_CUDA_ARCH_LIST",
    "TRITON_CACHE_DIR",
    "VLLM_USE_V1",
    "VLLM_TORCH_COMPILE_LEVEL",
    "VLLM_DISABLE_COMPILE_CACHE",
]
RELEVANT = re.compile(r"^(TORCH|PYTORCH_|TRITON_|CUDA_|CUBLAS|NVIDIA_TF32|HIP_|ROCM_|HSA_|VLLM_|INDUCTOR_)[A-Z0-9_]*$")
# Read by the CUDA driver or runtime, not by torch (NVIDIA's documentation lists them).
CUDA_RUNTIME = {
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_CACHE_PATH",
    "CUDA_CACHE_DISABLE",
    "CUDA_CACHE_MAXSIZE",
    "CUDA_DEVICE_ORDER",
    "CUDA_FORCE_PTX_JIT",
}
# A line that reads the environment, as opposed to one that only names a variable.
_READS = re.compile(r"environ|getenv|env_name|get_env|_env\(|env_var|EnvVar", re.I)
# Files that only mention variable names (reporting, name mappings).
_MENTION_ONLY = ("utils/collect_env.py", "utils/hipify/")
# Which installed package reads variables of a prefix besides torch.
_OWNER_PACKAGES = {"TRITON_": "triton", "VLLM_": "vllm"}
# The caller's environment, taken before torch is imported (importing Inductor sets some).
_USER_ENV = dict(os.environ)


# -- versions and device -------------------------------------------------------------------------


def versions() -> dict:
    import torch  # noqa: PLC0415 (torch: doctor only)

    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        pass
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "cudnn": cudnn,
        "triton": package_version("triton") or package_version("pytorch-triton"),
        "plugin": __version__,
    }


def device_block(requested: str) -> dict:
    import torch  # noqa: PLC0415 (torch: doctor only)

    device = resolve_device(requested)
    info = device_info(device)
    return {
        "device": device,
        "name": info.name,
        "arch": info.arch,
        "capability": info.capability,
        "sm_count": info.sm_count,
        "visible_gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
    }


# -- op probes (run in a child) ------------------------------------------------------------------


def _probes(device: str):
    """(name, thunk) pairs; each thunk returns (output, float64 expected) or raises."""
    import torch  # noqa: PLC0415 (torch: doctor only)

    def fp8(m, k, n):
        g = torch.Generator().manual_seed(0)
        a = torch.randn(m, k, generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, generator=g).to(torch.float8_e4m3fn).t()
        return a.to(device), (b if device == "cpu" else _colmajor(b, device))  # b stays column-major

    def expected(a, b, sa, sb):
        return (a.double().cpu() * sa.double().cpu()) @ (b.double().cpu() * sb.double().cpu())

    def scaled_tensorwise():
        a, b = fp8(16, 32, 16)
        sa, sb = torch.tensor(0.5, device=device), torch.tensor(2.0, device=device)
        out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        return (out[0] if isinstance(out, tuple) else out), expected(a, b, sa, sb)

    def scaled_rowwise():
        a, b = fp8(16, 32, 16)
        sa = torch.full((16, 1), 0.5, device=device)
        sb = torch.full((1, 16), 2.0, device=device)
        out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        return (out[0] if isinstance(out, tuple) else out), expected(a, b, sa, sb)

    def scaled_v2():
        functional = torch.nn.functional
        recipes = getattr(functional, "ScalingType", None) or torch._C._ScalingType  # type: ignore[attr-defined]  # private, older torch
        a, b = fp8(16, 32, 16)
        sa, sb = torch.tensor([0.5], device=device), torch.tensor([2.0], device=device)
        if hasattr(functional, "scaled_mm"):
            out = functional.scaled_mm(
                a, b, sa, recipes.TensorWise, sb, recipes.TensorWise, output_dtype=torch.bfloat16
            )
        else:
            tw = recipes.TensorWise.value
            out = torch.ops.aten._scaled_mm_v2(a, b, [sa], [tw], [], [sb], [tw], [], None, torch.bfloat16, [], False)
        return out, expected(a, b, sa, sb)

    def int_mm():
        g = torch.Generator().manual_seed(0)
        a = torch.randint(-8, 8, (32, 32), generator=g, dtype=torch.int8).to(device)
        b = torch.randint(-8, 8, (32, 32), generator=g, dtype=torch.int8).to(device)
        return torch._int_mm(a, b), a.double().cpu() @ b.double().cpu()

    def cutlass():
        op = torch.ops._C.cutlass_scaled_mm
        a, b = fp8(16, 32, 16)
        sa, sb = torch.tensor([0.5], device=device), torch.tensor([2.0], device=device)
        out = torch.empty(16, 16, dtype=torch.bfloat16, device=device)
        op(out, a, b, sa, sb, None)
        return out, expected(a, b, sa, sb)

    present = {
        "aten._scaled_mm (tensorwise)": hasattr(torch, "_scaled_mm"),
        "aten._scaled_mm (rowwise)": hasattr(torch, "_scaled_mm"),
        "aten._scaled_mm_v2": hasattr(torch.ops.aten, "_scaled_mm_v2") or hasattr(torch.nn.functional, "scaled_mm"),
        "aten._int_mm": hasattr(torch, "_int_mm"),
        "_C.cutlass_scaled_mm (vendor)": hasattr(torch.ops._C, "cutlass_scaled_mm"),
    }
    thunks = [scaled_tensorwise, scaled_rowwise, scaled_v2, int_mm, cutlass]
    return [(name, present[name], thunk) for name, thunk in zip(present, thunks)]


def _colmajor(b, device):
    import torch  # noqa: PLC0415 (torch: doctor only)

    return torch.empty_strided(b.size(), b.stride(), dtype=b.dtype, device=device).copy_(b)


def run_probes(device: str) -> None:
    """Child side: one JSON line before and after each probe, flushed, so the parent knows which
    op was running if the process dies."""
    import torch  # noqa: PLC0415 (torch: doctor only)

    for name, present, thunk in _probes(device):
        if not present:
            why = "not registered: the library providing it is not loaded" if "vendor" in name else "not in this torch"
            print(json.dumps({"op": name, "status": "missing", "detail": why}), flush=True)
            continue
        print(json.dumps({"op": name, "status": "started"}), flush=True)
        start = time.perf_counter()
        try:
            out, want = thunk()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            got = out.detach().double().cpu()
            err = ((got - want).abs() / want.abs().clamp_min(1e-6)).max().item()
            status = "ok" if err < 0.02 else "wrong"
            detail = f"{tuple(out.shape)} {str(out.dtype).replace('torch.', '')}, max rel err {err:.2g}"
        except Exception as exc:
            status, detail = (
                "error",
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}",
            )
        print(
            json.dumps(
                {"op": name, "status": status, "detail": detail, "seconds": round(time.perf_counter() - start, 3)}
            ),
            flush=True,
        )


def probe_ops(device: str, timeout: float = 180.0) -> list[dict]:
    command = [sys.executable, "-m", "pytest_scaledmm.doctor", "--probe-child", device]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        stdout, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = None
    results: dict[str, dict] = {}
    for line in stdout.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        results[entry["op"]] = entry
    for entry in results.values():
        if entry["status"] == "started":  # the op that was running when the child died
            how = "hung" if code is None else _death(code)
            entry.update(status="crash", detail=f"the process {how} in this call")
    return list(results.values())


def _death(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


# -- caches --------------------------------------------------------------------------------------


def _dir_size(path: Path, budget_s: float = 5.0) -> int | None:
    if not path.is_dir():
        return None
    total, deadline = 0, time.monotonic() + budget_s
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
        if time.monotonic() > deadline:
            return -total  # a lower bound: the walk was cut short
    return total


def caches() -> dict:
    """Where Inductor and Triton cache compiled code; nothing is created or changed."""
    inductor_env = _USER_ENV.get("TORCHINDUCTOR_CACHE_DIR")
    if inductor_env:
        inductor = Path(inductor_env)
    else:
        try:
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir  # noqa: PLC0415 (torch: doctor only)
        except ImportError:  # older torch

            def default_cache_dir() -> str:
                return os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")

        inductor = Path(default_cache_dir())
    triton_env = _USER_ENV.get("TRITON_CACHE_DIR")
    triton = Path(triton_env) if triton_env else Path.home() / ".triton" / "cache"
    return {
        "inductor": {
            "path": str(inductor),
            "from": "TORCHINDUCTOR_CACHE_DIR" if inductor_env else "default",
            "bytes": _dir_size(inductor),
        },
        "triton": {
            "path": str(triton),
            "from": "TRITON_CACHE_DIR" if triton_env else "default",
            "bytes": _dir_size(triton),
        },
    }


# -- environment variables ----------------------------------------------------------------------


def _python_files(package: str):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None, []
    root = Path(list(spec.submodule_search_locations)[0])
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("testing/", "test/", "include/")):
            continue
        files.append((rel, path))
    return root, files


def _python_reads(package: str, names: list[str]) -> tuple[bool, dict]:
    """name -> {"reads": [files], "mentions": [files]} over a package's Python sources."""
    root, files = _python_files(package)
    found: dict[str, dict] = {name: {"reads": [], "mentions": []} for name in names}
    if root is None or not names:
        return root is not None, found
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])")
    for rel, path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="ignore")
        except OSError:
            continue
        if not pattern.search(text):
            continue
        lines = text.splitlines()
        for number, line in enumerate(lines):
            for name in set(pattern.findall(line)):
                context = line + (lines[number - 1] if number else "")
                kind = "reads" if _READS.search(context) and not rel.startswith(_MENTION_ONLY) else "mentions"
                where = f"{package}/{rel}"
                if where not in found[name][kind]:
                    found[name][kind].append(where)
    return True, found


def _native_reads(names: list[str]) -> dict:
    """name -> [library] where the name is a standalone string constant (as getenv's argument is)
    in torch's native libraries; a name inside a message does not count."""
    import torch  # noqa: PLC0415 (torch: doctor only)

    found: dict[str, list] = {name: [] for name in names}
    if not names:
        return found
    lib = Path(torch.__file__).parent / "lib"
    for path in sorted(lib.glob("*.so*")) + sorted(lib.glob("*.dll")):
        try:
            with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                for name in names:
                    if data.find(b"\0" + name.encode() + b"\0") != -1:
                        found[name].append(path.name)
        except (OSError, ValueError):
            continue
    return found


def environment_variables(extra: list | None = None) -> list[dict]:
    """Every set variable that may affect compilation, and the recommended ones, each with a
    verdict on whether something installed reads it."""
    set_names = sorted(name for name in _USER_ENV if RELEVANT.match(name))
    names = sorted(set(set_names) | set(RECOMMENDED) | set(extra or []))
    _, torch_found = _python_reads("torch", names)
    by_owner = {}
    for prefix, package in _OWNER_PACKAGES.items():
        owned = [n for n in names if n.startswith(prefix)]
        installed, found = _python_reads(package, owned)
        by_owner.update({n: (package, installed, found[n]) for n in owned})
    unresolved = [
        n
        for n in names
        if not torch_found[n]["reads"] and n not in CUDA_RUNTIME and not (n in by_owner and by_owner[n][2]["reads"])
    ]
    native = _native_reads(unresolved)
    entries = []
    for name in names:
        reads = torch_found[name]["reads"]
        if reads:
            verdict, where = "real", f"read by torch ({', '.join(reads[:3])})"
        elif name in by_owner and by_owner[name][2]["reads"]:
            package, _, found = by_owner[name]
            verdict, where = "real", f"read by {package} ({', '.join(found['reads'][:3])})"
        elif native.get(name):
            verdict, where = "real", f"read by torch's native code ({', '.join(native[name][:3])})"
        elif name in CUDA_RUNTIME:
            verdict, where = "real", "read by the CUDA driver/runtime"
        elif name in by_owner and not by_owner[name][1]:
            verdict, where = "unknown", f"only {by_owner[name][0]} would read it, and it is not installed"
        else:
            mentions = torch_found[name]["mentions"]
            hint = f" (only named in {', '.join(mentions[:2])})" if mentions else ""
            verdict, where = "no effect", f"nothing installed reads it{hint}"
        entries.append(
            {
                "name": name,
                "set": name in _USER_ENV,
                "value": _USER_ENV.get(name),
                "recommended": name in RECOMMENDED,
                "verdict": verdict,
                "where": where,
            }
        )
    return entries


# -- the report ----------------------------------------------------------------------------------


def collect(device: str = "auto", probe: bool = True) -> dict:
    data: dict[str, Any] = {"versions": versions(), "device": device_block(device)}
    data["ops"] = probe_ops(data["device"]["device"]) if probe else []
    data["caches"] = caches()
    data["environment"] = environment_variables()
    return data


def _size(count: int | None) -> str:
    if count is None:
        return "absent"
    prefix = "at least " if count < 0 else ""
    size: float = abs(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{prefix}{size:.0f} {unit}" if unit == "B" else f"{prefix}{size:.1f} {unit}"
        size /= 1024
    return str(size)


def render(data: dict) -> str:
    v, d = data["versions"], data["device"]
    gpu = f", capability {d['capability']}, {d['sm_count']} SMs, {d['visible_gpus']} visible" if d["capability"] else ""
    lines = [
        "scaledmm doctor",
        f"  python   {v['python']} ({v['platform']})",
        f"  torch    {v['torch']} (cuda {v['cuda']}, hip {v['hip']}, cudnn {v['cudnn']})",
        f"  triton   {v['triton']}",
        f"  plugin   pytest-scaledmm {v['plugin']}",
        f"  device   {d['device']}: {d['name']} [{d['arch']}]{gpu}",
        f"scaled-mm ops on {d['device']} (a tiny call each, in a child process):",
    ]
    for op in data["ops"]:
        lines.append(f"  {op['status']:8} {op['op']:32} {op.get('detail', '')}")
    if not data["ops"]:
        lines.append("  (not probed)")
    lines.append("caches:")
    for name, cache in data["caches"].items():
        lines.append(f"  {name:8} {cache['path']}  {_size(cache['bytes'])} ({cache['from']})")
    lines.append("environment variables that affect compilation (set here, or often recommended):")
    for entry in data["environment"]:
        if not entry["set"] and not entry["recommended"]:
            continue
        state = f"={entry['value']}" if entry["set"] else " (unset)"
        lines.append(f"  {entry['verdict']:9} {entry['name']}{state}: {entry['where']}")
    return "\n".join(lines)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="scaledmm doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--device", default="auto", help="device to probe (default: cuda:0 when present, else cpu)")
    parser.add_argument("--no-probe", action="store_true", help="skip the op probes (no child process)")
    return parser


def run(args) -> int:
    import_torch()  # first: without torch's import-time noise (execution/quiet.py)
    data = collect(args.device, probe=not args.no_probe)
    if args.json:
        print(dumps_strict(data, indent=1))  # strict JSON: a non-finite number as "inf" or "nan"
    else:
        print(render(data))
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--probe-child"]:
        run_probes(argv[1])
        return 0
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
