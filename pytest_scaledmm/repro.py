"""Standalone repro scripts: one per failure signature, runnable with nothing but torch.

A script carries the case's parameters, input seed, compile settings and the environment that
found it, all written with repr. It regenerates the run's very tensors by embedding the plugin's
input module verbatim (stdlib and torch only), checks them against the shapes, strides, dtypes and
checksums the run saw, runs eager and compiled, and exits 1 while the failure reproduces, 0 once
it no longer fails, 2 when it fails differently, 3 when it cannot run the case as recorded.
A built-in kernel is embedded as source; a user kernel is imported from its module.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import os
import re
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Callable, Optional

from . import outcome as oc
from .session import CACHE_ENV as RUN_CACHE_ENV
from .session import OWNED_CACHE_ENV

REPRODUCIBLE = set(oc.FAILURES) | {oc.XFAIL}
# Names the template defines; the embedded modules must not redefine them.
RESERVED = {"CASE", "CASE_ID", "SEED", "DEVICE", "COMPILE", "EXPECTED", "TENSORS", "TIMEOUT_S", "SLACK",
            "ENV", "kernel", "repro_main", "repro_classify", "repro_case_fn", "repro_tensor_facts"}
# Variables that change how torch compiles; recorded in the header and set again by the script.
COMPILE_ENV = re.compile(r"^(TORCHINDUCTOR_|TORCHDYNAMO_|TORCH_COMPILE|TORCH_LOGS$|TRITON_|INDUCTOR_|PYTORCH_)")
CACHE_ENV = {*RUN_CACHE_ENV, OWNED_CACHE_ENV}  # this run's own cache: not for the script


class ReproError(Exception):
    """A script could not be written for this case (the reason is in the message)."""


def script_name(outcome: str, signature: str) -> str:
    digest = hashlib.sha256(f"{outcome}\0{signature}".encode()).hexdigest()[:10]
    return f"repro_{digest}.py"


# -- embedded sources ------------------------------------------------------------------------


def _module_body(module: types.ModuleType) -> str:
    """A module's source without its docstring and `from __future__` line; it must import nothing
    from this package (checked), so that it can live inside a standalone script."""
    source = inspect.getsource(module)
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("pytest_scaledmm")):
            raise ReproError(f"{module.__name__} imports from the plugin; it cannot be embedded in a repro script")
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    clash = defined & RESERVED
    if clash:
        raise ReproError(f"{module.__name__} defines {sorted(clash)}, which the repro template uses")
    lines = source.splitlines()
    skip = set()
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) and node is tree.body[0]:
            skip.update(range(node.lineno - 1, node.end_lineno))
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            skip.update(range(node.lineno - 1, node.end_lineno))
    return "\n".join(line for i, line in enumerate(lines) if i not in skip).strip("\n")


def _global_names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def function_source(fn: Callable) -> str:
    """Source of a module-level function plus the functions and constants of its module that it
    uses, in definition order, so that it runs outside its module."""
    module = sys.modules[fn.__module__]
    functions: dict[str, Callable] = {}
    constants: dict[str, object] = {}

    def visit(f):
        if f.__name__ in functions:
            return
        functions[f.__name__] = f
        for name in sorted(_global_names(f.__code__)):
            value = module.__dict__.get(name)
            if inspect.isfunction(value) and value.__module__ == module.__name__:
                visit(value)
            elif name.isupper() and isinstance(value, (int, float, str, bool, tuple)):
                constants[name] = value

    visit(fn)
    parts = [f"{name} = {value!r}" for name, value in sorted(constants.items())]
    ordered = sorted(functions.values(), key=lambda f: f.__code__.co_firstlineno)
    parts += [textwrap.dedent(inspect.getsource(f)).strip("\n") for f in ordered]
    return "\n\n\n".join(parts)


def kernel_code(name: str, fn: Optional[Callable], impl: Optional[str]) -> str:
    """Code that defines `kernel` in the script."""
    from .kernels import BUILTIN_IMPLS, load_impl

    if fn is not None and BUILTIN_IMPLS.get(name) is fn:
        return f"# Built-in kernel {name!r} of pytest-scaledmm, embedded.\n{function_source(fn)}\n\n\nkernel = {fn.__name__}"
    reference = impl
    if reference is None and fn is not None:
        candidate = f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', '')}"
        try:
            reference = candidate if load_impl(candidate) is fn else None
        except Exception:
            reference = None
    if reference is None:
        return (
            f"# Kernel {name!r} was declared by a hook and cannot be imported by name: define it here.\n"
            "kernel = None"
        )
    module_name, _, attr_path = reference.partition(":")
    where = None
    try:
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
        if getattr(module, "__file__", None):
            # mypkg.kernels lives in <root>/mypkg/kernels.py: <root> goes on sys.path.
            folder = Path(module.__file__).resolve().parent
            if Path(module.__file__).name == "__init__.py":
                folder = folder.parent
            where = str(folder.parents[module_name.count(".") - 1] if "." in module_name else folder)
    except Exception:
        pass
    path_line = f"sys.path.insert(0, {where!r})  # where the run imported it from\n" if where else ""
    return (
        f"# Kernel {name!r}: the code under test, imported as the run did ({reference}).\n"
        f"{path_line}import importlib\n\n"
        f"kernel = importlib.import_module({module_name!r})\n"
        f"for _attr in {attr_path.split('.')!r}:\n"
        "    kernel = getattr(kernel, _attr)"
    )


# -- facts the script checks -----------------------------------------------------------------


def tensor_facts(params: dict, seed: int) -> dict:
    """Shape, strides, storage offset, dtype and a checksum of every input, generated on the CPU
    exactly as the run did."""
    from .inputs import make_inputs

    inputs = make_inputs(params, seed, "cpu")
    names = ("a", "b", "scale_a", "scale_b", "bias")
    return {name: _facts(tensor) for name, tensor in zip(names, inputs.args())}


def _facts(t) -> Optional[dict]:
    if t is None:
        return None
    import zlib

    import torch

    # A fresh dense copy: contiguous() keeps a stride on size-1 dims, which view() refuses.
    flat = t.detach().cpu().clone(memory_format=torch.contiguous_format).reshape(-1)
    raw = bytes(flat.view(torch.uint8).tolist())
    return {
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "offset": int(t.storage_offset()),
        "dtype": str(t.dtype).replace("torch.", ""),
        "crc32": zlib.crc32(raw),
    }


# -- the script ------------------------------------------------------------------------------


def _expected(record: dict) -> dict:
    def short(error, key):
        return error[key].rsplit(".", 1)[-1] if error and error.get(key) else None

    eager, compiled = record.get("eager_error"), record.get("compiled_error")
    outcome = record["outcome"]
    if outcome == oc.XFAIL:  # a known failure: the script checks the failure the catalogue expects
        outcome = (record.get("known_failure") or {}).get("original_outcome") or outcome
    return {
        "outcome": outcome,
        "signature": record["signature"],
        "layer": record.get("layer"),
        "eager_error": [short(eager, "type"), short(eager, "root_type")] if eager else None,
        "compiled_error": [short(compiled, "type"), short(compiled, "root_type")] if compiled else None,
        "mismatch_side": record.get("layer") if outcome == oc.MISMATCH else None,
    }


def _pretty(value) -> str:
    """repr, laid out over lines for a reader (pprint writes Python literals)."""
    import pprint

    return pprint.pformat(value, width=100, sort_dicts=False)


def _compile_settings(mode: str, max_autotune_configs: int = 0) -> dict:
    """What compile_case passes to torch.compile, including the run's autotune cap."""
    from . import compile_modes

    backend, torch_mode, options, dynamic = compile_modes.MODE_SETTINGS[mode]
    limit_of = getattr(compile_modes, "autotune_limit", None)
    limit = limit_of(mode, max_autotune_configs) if limit_of and backend == "inductor" else None
    if limit:
        options = {**(options or {}), **limit}
    return {"backend": backend, "mode": torch_mode, "options": options, "dynamic": dynamic}


def _header_lines(record: dict, environment: dict, triage: Optional[dict]) -> list[str]:
    env = environment or {}
    lines = [
        f"{record['outcome']}: {record['signature']}",
        "",
        f"case:     {record['id']}",
        f"layer:    {record.get('layer')}",
    ]
    if triage and "layer" in triage:
        from .triage import one_line

        lines.append(f"triage:   {one_line(triage)}")
        for workaround in triage.get("workarounds", []):
            lines.append(f"          workaround: {workaround['knob']}")
    gpu = f", capability {env.get('capability')}, {env.get('sm_count')} SMs" if env.get("capability") else ""
    lines += [
        f"found on: {env.get('device_name')} [{env.get('arch')}{gpu}], device {env.get('device')}",
        f"          torch {env.get('torch')}, cuda {env.get('cuda')}, hip {env.get('hip')}, triton {env.get('triton')}, "
        f"python {env.get('python')}",
        f"          {env.get('platform')}, pytest-scaledmm {env.get('plugin')}, hypothesis {env.get('hypothesis')}",
        f"written:  {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
    ]
    return lines


def render_script(
    record: dict,
    environment: dict,
    run_seed: int,
    kernel_text: str,
    timeout_s: float,
    slack: float = 1.0,
    env_vars: Optional[dict] = None,
    max_autotune_configs: int = 0,
) -> str:
    from . import inputs as inputs_module
    from .cases import input_seed

    params = dict(record["params"])
    seed = input_seed(run_seed, record["id"])
    if env_vars is None:
        env_vars = {k: v for k, v in os.environ.items() if COMPILE_ENV.match(k) and k not in CACHE_ENV}
    header = "\n".join(_header_lines(record, environment, record.get("triage")))
    header = header.replace('"""', '" " "')  # it lives in the script's (raw) docstring
    name = script_name(record["outcome"], record["signature"])
    constants = "\n".join(
        [
            f"CASE_ID = {record['id']!r}",
            f"CASE = {_pretty(json.loads(json.dumps(params)))}",
            f"SEED = {seed!r}  # zlib.crc32(b'{run_seed}::' + CASE_ID): the run's input seed",
            f"DEVICE = {(environment or {}).get('device') or 'cpu'!r}",
            f"COMPILE = {_compile_settings(params['mode'], max_autotune_configs)!r}  # torch.compile(fullgraph=True, **COMPILE)",
            f"SLACK = {slack!r}",
            f"TIMEOUT_S = {float(timeout_s)!r}  # a hang past this exits 1 with the stacks",
            f"ENV = {dict(sorted(env_vars.items()))!r}  # compile-related variables set in the run",
            f"EXPECTED = {_pretty(_expected(record))}",
            f"TENSORS = {_pretty(tensor_facts(params, seed))}",
        ]
    )
    template = (Path(__file__).parent / "templates" / "repro_script.py.tmpl").read_text(encoding="utf-8")
    return template.format(
        name=name,
        header=header,
        constants=constants,
        kernel=kernel_text,
        inputs=_module_body(inputs_module),
        version=(environment or {}).get("plugin", "?"),
    )


def write_script(directory, record: dict, environment: dict, run_seed: int, kernel_text: str, timeout_s: float,
                 slack: float = 1.0, max_autotune_configs: int = 0) -> Path:
    """Write (or replace) the script of this record's signature and update index.json."""
    from .report import write_atomic

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / script_name(record["outcome"], record["signature"])
    text = render_script(record, environment, run_seed, kernel_text, timeout_s, slack,
                         max_autotune_configs=max_autotune_configs)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    index_path = directory / "index.json"
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        index = {}
    index[path.name] = {"outcome": record["outcome"], "signature": record["signature"], "case": record["id"]}
    write_atomic(index_path, dict(sorted(index.items())))
    return path


class ReproWriter:
    """Writes the first failing record of each signature as it arrives (on the controller)."""

    def __init__(self, directory, spec, kernels: dict, timeout_s: float, max_autotune_configs: int = 0):
        self.directory = Path(directory)
        self.max_autotune_configs = max_autotune_configs
        self.spec = spec
        self.kernels = kernels
        self.timeout_s = timeout_s
        self.written: dict[str, Path] = {}
        self.errors: dict[str, str] = {}

    def add(self, record: dict, environment: dict, run_seed: int) -> Optional[Path]:
        if record["outcome"] not in REPRODUCIBLE or not record.get("signature"):
            return None
        key = f"{record['outcome']}\0{record['signature']}"
        if key in self.written or key in self.errors:
            return None
        name = record["params"]["kernel"]
        spec = next((k for k in self.spec.kernels if k.name == name), None)
        try:
            text = kernel_code(name, self.kernels.get(name), spec.impl if spec else None)
            path = write_script(self.directory, record, environment, run_seed, text, self.timeout_s, self.spec.slack,
                                self.max_autotune_configs)
        except Exception as exc:  # a repro that cannot be written must not stop the run
            self.errors[key] = f"{record['id']}: {type(exc).__name__}: {exc}"
            return None
        self.written[key] = path
        return path

    def summary_lines(self) -> list[str]:
        if not self.written and not self.errors:
            return []
        lines = [f"repro scripts: {len(self.written)} in {self.directory} (python <script>: exit 1 while it fails)"]
        lines += [f"  could not write a repro: {message}" for message in self.errors.values()]
        return lines




def scripts_from_report(report_path, directory, case_ids=(), matrix=None, timeout_s: float = 300.0) -> list[Path]:
    """`scaledmm repro REPORT --out DIR`: scripts for a report's failures (one per signature, or
    for the given case ids), after the fact. Kernels are found through the matrix the report
    names (or `matrix`); the tensors are regenerated from the recorded seed."""
    from .kernels import BUILTIN_IMPLS
    from .report import load_report
    from .spec import load_spec

    report = load_report(report_path)
    matrix_path = matrix or (report.get("matrix") or {}).get("path")
    impls, slack = {}, 1.0
    if matrix_path and Path(matrix_path).exists():
        spec = load_spec(matrix_path)
        impls = {k.name: k.impl for k in spec.kernels}
        slack = spec.slack
    seed = (report.get("matrix") or {}).get("seed")
    if seed is None:
        raise ReproError(f"{report_path}: the report does not record its seed (key 'matrix.seed')")
    wanted = set(case_ids)
    seen, written = set(), []
    for record in sorted(report["cases"], key=lambda r: r["id"]):
        if wanted and record["id"] not in wanted:
            continue
        if not wanted and (record["outcome"] not in REPRODUCIBLE or not record.get("signature")):
            continue
        key = (record["outcome"], record.get("signature"))
        if not wanted and key in seen:
            continue
        seen.add(key)
        name = record["params"]["kernel"]
        text = kernel_code(name, BUILTIN_IMPLS.get(name) if impls.get(name) is None else None, impls.get(name))
        record = {**record, "signature": record.get("signature") or record["outcome"]}
        written.append(write_script(directory, record, report.get("environment") or {}, seed, text, timeout_s, slack))
    missing = wanted - {r["id"] for r in report["cases"]}
    if missing:
        raise ReproError(f"{report_path}: no case {', '.join(sorted(missing))}")
    return written
