"""Standalone repro scripts: one per failure signature, runnable with nothing but torch.

A script carries the case's parameters, input seed, compile settings and the environment that
found it as data: every value that comes from a report (or a live record) is written as a Python
literal of plain data by `literal`, never pasted into code, a comment or a docstring, so no report
can put code into a script. It embeds the verdict modules verbatim (pytest_scaledmm/verdict/:
stdlib and torch only), so it regenerates the run's very tensors, checks them against the shapes,
strides, dtypes and checksums the run saw, and runs the run's own eager -> compile -> check
pipeline and classification; then it exits with a code of its own per verdict (EXIT_*; the
template's docstring lists them) so that a crash of the script (exit 1) never reads as one.
A built-in kernel is embedded as source; a user kernel is imported from its module, named by a
reference checked to be `module:qualname` of dotted identifiers.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import keyword
import math
import os
import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from .. import __version__, verdict
from ..errors import ScaledmmError
from ..execution.cache import CACHE_ENV as RUN_CACHE_ENV
from ..execution.cache import OWNED_CACHE_ENV
from ..execution.quiet import TORCH_IMPORT_NOISE
from ..execution.run import other_m_entry, other_m_sizes
from ..execution.triage import one_line
from ..matrix.case_params import input_seed
from ..matrix.compile_modes import CompileMode, compile_mode, compile_settings
from ..matrix.corpus import CORPUS_SCHEMA
from ..matrix.kernels import BUILTIN_IMPLS, accepts_keyword, add_import_dirs, load_impl
from ..matrix.kernels import kernel_accepts_fast_accum as spec_accepts_fast_accum
from ..matrix.packs import PACK_KERNELS
from ..matrix.replay_command import valid_case_id
from ..matrix.schema import DEFAULT_LIMITS
from ..matrix.spec import KernelSpec, load_spec, pack_kernel_spec, size_problem
from ..records import CaseRecord
from ..verdict import outcome as oc
from ..verdict.call_contract import CallContract
from ..verdict.case_axes import case_record
from ..verdict.draw import make_inputs
from ..verdict.facts import input_facts
from ..verdict.refusals import Support
from ..verdict.runners import REGISTERED_BY, runner_named
from ..verdict.support_fields import OPERAND_DTYPES, OUT_DTYPES
from .files import SCRIPT_MODE, write_text_atomic
from .report import iso_time, load_report, root_cause_of, write_atomic
from .report_dir import project_dir


def reproducible(outcome: str | None) -> bool:
    """Whether a record of this class gets a script: a failure, a known one (xfailed), or an
    informational class (LENIENT: its script shows the compiled side's result on the input eager
    refuses, and reproduces while compiled still accepts it). Read from the outcome table. Not an
    ORDER_DEPENDENT one: alone it passes; its replay command runs it after its earlier cases."""
    known = oc.outcome_class(outcome)
    if known is None or outcome == oc.ORDER_DEPENDENT:
        return False
    return known.fails or known.pytest_status == "xfailed" or known.informational


# The script's exit status per verdict; 1 stays Python's own for a script that failed.
EXIT_NOT_REPRODUCED, EXIT_REPRODUCED, EXIT_DIFFERENT, EXIT_CANNOT_RUN = 0, 10, 11, 12
# The verdict modules the template calls; the script embeds them and every sibling they import.
VERDICT_MODULES = ("draw", "facts", "opcheck", "refusals", "oracle", "pipeline", "reproduced", "contracts", "sequence")
# Variables that change how torch compiles; recorded in the header and set again by the script.
COMPILE_ENV = re.compile(r"^(TORCHINDUCTOR_|TORCHDYNAMO_|TORCH_COMPILE|TORCH_LOGS$|TRITON_|INDUCTOR_|PYTORCH_)")
CACHE_ENV = {*RUN_CACHE_ENV, OWNED_CACHE_ENV}  # this run's own cache: not for the script
TEXT_LIMIT = 4000  # characters of one recorded text (a signature, an error message) kept in FOUND
ENV_FIELDS = (
    "torch",
    "cuda",
    "hip",
    "triton",
    "python",
    "platform",
    "plugin",
    "hypothesis",
    "device",
    "device_name",
    "arch",
    "capability",
    "sm_count",
    "tox_env",
)


class ReproError(ScaledmmError):
    """A script could not be written for this case (the reason is in the message)."""


def script_name(outcome: str, cause: str, kernel: str | None = None) -> str:
    """The script's file name: a short hash of the outcome, the root cause and the kernel (one
    "values off the reference" in two kernels is two bugs)."""
    key = f"{outcome}\0{cause}" + (f"\0{kernel}" if kernel is not None else "")
    return f"repro_{hashlib.sha256(key.encode()).hexdigest()[:10]}.py"


def cause_key(record: CaseRecord) -> tuple:
    """(outcome, root cause, kernel): what one script stands for."""
    kernel = _mapping(record.get("params")).get("kernel")
    return record["outcome"], root_cause_of(record), kernel if isinstance(kernel, str) else None


def record_script_name(record: CaseRecord) -> str:
    return script_name(*cause_key(record))


# Every script this module writes holds this line: a file without it is never replaced.
WRITTEN_MARK = "WRITTEN_BY = 'pytest-scaledmm "


# -- values as literals ----------------------------------------------------------------------


def _flat(value, depth: int = 0) -> str:
    """One-line Python source for plain data that evaluates back to an equal value. Types are
    matched exactly (a str subclass could bring its own repr); str.__repr__ escapes every quote,
    backslash, line break and unprintable character, so a string can never end early."""
    if depth > 20:
        raise ReproError("a value nested more than 20 levels deep")
    kind = type(value)
    if value is None or kind is bool:
        return repr(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if math.isfinite(value):
            return float.__repr__(value)
        return 'float("nan")' if value != value else ('float("inf")' if value > 0 else 'float("-inf")')
    if kind is str:
        return str.__repr__(value)
    if kind is list:
        return "[" + ", ".join(_flat(v, depth + 1) for v in value) + "]"
    if kind is tuple:
        inner = ", ".join(_flat(v, depth + 1) for v in value)
        return "(" + inner + ("," if len(value) == 1 else "") + ")"
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise ReproError("a mapping with a key that is not a string")
        return "{" + ", ".join(f"{str.__repr__(k)}: {_flat(v, depth + 1)}" for k, v in value.items()) + "}"
    raise ReproError(f"a value of type {kind.__name__}, not plain data")


def literal(value, indent: int = 0, width: int = 100) -> str:
    """`_flat`, laid out over lines for a reader when it is long."""
    one = _flat(value)
    if len(one) + indent <= width or type(value) not in (dict, list) or not value:
        return one
    pad = " " * (indent + 4)
    if type(value) is dict:
        body = [f"{pad}{str.__repr__(k)}: {literal(v, indent + 4, width)}," for k, v in value.items()]
        return "{\n" + "\n".join(body) + "\n" + " " * indent + "}"
    body = [f"{pad}{literal(v, indent + 4, width)}," for v in value]
    return "[\n" + "\n".join(body) + "\n" + " " * indent + "]"


def _plain(value):
    """A report-derived value as plain JSON data (dicts with string keys, lists, str, int,
    float, bool, None)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ReproError(f"a recorded value is not plain data ({type(exc).__name__})") from None


def _text(value) -> str | None:
    """A recorded value as text for FOUND, cut to TEXT_LIMIT characters."""
    if value is None:
        return None
    text = value if type(value) is str else json.dumps(_plain(value), ensure_ascii=False)
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "..."


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


# -- embedded sources ------------------------------------------------------------------------


def _top_level_names(tree: ast.Module) -> list:
    """Names a module binds at its top level by def, class or assignment (imports aside), with
    repeats: an embedded module must not rebind another's name."""
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            elements = target.elts if isinstance(target, ast.Tuple) else [target]
            names += [e.id for e in elements if isinstance(e, ast.Name)]
    return names


def _verdict_module(name: str) -> types.ModuleType:
    return importlib.import_module(f"{verdict.__name__}.{name}")


def _sibling_imports(module: types.ModuleType) -> dict:
    """{sibling: names imported} of a verdict module's `from .<sibling> import a, b` lines,
    wherever they are. Any other import from this package could not work inside a script."""
    siblings: dict = {}
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0 and not (node.module or "").startswith("pytest_scaledmm"):
            continue
        renamed = [alias.name for alias in node.names if alias.asname not in (None, alias.name)]
        if node.level != 1 or not node.module or renamed:
            raise ReproError(
                f"{module.__name__} imports from the plugin other than by `from .<sibling> import name`; "
                "it cannot be embedded in a repro script"
            )
        siblings.setdefault(node.module, set()).update(alias.name for alias in node.names)
    return siblings


def verdict_modules(roots=VERDICT_MODULES) -> list:
    """The verdict modules `roots` need, each after the siblings it imports."""
    ordered: list = []

    def visit(name: str, path: tuple):
        module = _verdict_module(name)
        if module in ordered or name in path:  # a cycle can only go through imports inside functions
            return
        for sibling in sorted(_sibling_imports(module)):
            visit(sibling, path + (name,))
        ordered.append(module)

    for root in roots:
        visit(root, ())
    return ordered


def _module_body(module: types.ModuleType) -> str:
    """A verdict module's source without its docstring, its `from __future__` line and its
    `from .<sibling> import` lines: the script holds the siblings beside it, and each must
    define what is imported from it."""
    source = inspect.getsource(module)
    tree = ast.parse(source)
    for sibling, names in _sibling_imports(module).items():
        missing = names - set(_top_level_names(ast.parse(inspect.getsource(_verdict_module(sibling)))))
        if missing:
            raise ReproError(f"{module.__name__} imports {sorted(missing)}, which {sibling} does not define")
    skip: set[int] = set()
    for statement in tree.body:  # `if TYPE_CHECKING:` blocks of sibling imports: for annotations only
        if _type_checking_imports(statement):
            skip.update(range(statement.lineno - 1, statement.end_lineno or statement.lineno))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expr, ast.ImportFrom)):
            continue
        docstring = node is tree.body[0] and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if docstring or (isinstance(node, ast.ImportFrom) and (node.level or node.module == "__future__")):
            skip.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    return "\n".join(line for i, line in enumerate(source.splitlines()) if i not in skip).strip("\n")


def _type_checking_imports(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        and not node.orelse
        and all(isinstance(inner, ast.ImportFrom) and inner.level for inner in node.body)
    )


def verdict_code() -> str:
    """The verdict modules a script needs, verbatim but for those import lines, in order."""
    parts = []
    for module in verdict_modules():
        where = module.__name__.replace(".", "/") + ".py"
        parts.append(f"# -- {where} " + "-" * max(3, 90 - len(where)) + "\n" + _module_body(module))
    return "\n\n\n".join(parts)


def _rebound(text: str) -> list:
    """Names the script binds twice at its top level (an embedded module clashing with another,
    the kernel or the template)."""
    names = _top_level_names(ast.parse(text))
    return sorted({name for name in names if names.count(name) > 1})


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
    parts = [f"{name} = {literal(value)}" for name, value in sorted(constants.items())]
    ordered = sorted(functions.values(), key=lambda f: f.__code__.co_firstlineno)
    parts += [textwrap.dedent(inspect.getsource(f)).strip("\n") for f in ordered]
    return "\n\n\n".join(parts)


def _dotted(text: str) -> bool:
    parts = text.split(".")
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in parts)


def check_reference(reference: str) -> tuple[str, list[str]]:
    """(module, attribute path) of a kernel reference `module:qualname`, both dotted Python
    identifiers; anything else is a ReproError."""
    module_name, colon, attr_path = reference.partition(":") if isinstance(reference, str) else ("", "", "")
    if not colon or not _dotted(module_name) or not _dotted(attr_path):
        raise ReproError(f"kernel reference {reference!r} is not module:qualname of dotted identifiers")
    return module_name, attr_path.split(".")


def kernel_code(name: str, fn: Callable | None, impl: str | None, import_dirs=(), *, resolve: bool = True) -> str:
    """Code that defines `kernel` in the script. `name` appears in no code or comment.
    `import_dirs`: the directories the run imported from (the matrix's, the rootdir), which a
    user kernel's module may need for its own imports of the project's packages. `resolve`
    False: the module is not imported here (a report's kernel, its matrix not confirmed)."""
    builtin = BUILTIN_IMPLS.get(name)
    if fn is not None and builtin is fn:
        source = function_source(builtin)
        return f"# A built-in kernel of pytest-scaledmm, embedded.\n{source}\n\n\nkernel = {builtin.__name__}"
    reference = impl
    if reference is None and fn is not None:
        candidate = f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', '')}"
        try:
            check_reference(candidate)
            reference = candidate if load_impl(candidate) is fn else None
        except Exception:
            reference = None
    if reference is None:
        return (
            "# This kernel cannot be imported by name here (a hook's kernel, or a report read without its\n"
            "# matrix: pass --matrix): define it here.\n"
            "kernel = None"
        )
    module_name, attrs = check_reference(reference)
    where = None
    try:
        if not resolve:
            raise LookupError(module_name)
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
        file = getattr(module, "__file__", None)
        if file:
            # mypkg.kernels lives in <root>/mypkg/kernels.py: <root> goes on sys.path.
            folder = Path(file).resolve().parent
            if Path(file).name == "__init__.py":
                folder = folder.parent
            where = str(folder.parents[module_name.count(".") - 1] if "." in module_name else folder)
    except Exception:
        pass
    dirs = list(dict.fromkeys([str(d) for d in import_dirs] + ([where] if where else [])))
    lines = [
        "# The code under test, imported by name (KERNEL_REF). IMPORT_DIRS (the matrix's directory, the",
        "# rootdir, where the module was) go last on sys.path: a file there never shadows torch's imports.",
        f"KERNEL_REF = {literal(reference)}",
        f"IMPORT_DIRS = {literal(dirs)}",
        "for repro_directory in IMPORT_DIRS:",
        "    if repro_directory not in sys.path:",
        "        sys.path.append(repro_directory)",
        "import importlib  # noqa: E402",
        "",
        f"kernel = importlib.import_module({literal(module_name)})",
        f"for _attr in {literal(attrs)}:",
        "    kernel = getattr(kernel, _attr)",
    ]
    return "\n".join(lines)


def contract_code(spec) -> str:
    """Code that sets CONTRACT and `prepare` (the prepare step of a `prepare` kernel, imported by
    name; None otherwise) after kernel_code."""
    contract = getattr(spec, "contract", "call") if spec is not None else "call"
    lines = [f"CONTRACT = {literal(contract)}  # how the run called the kernel (verdict/contracts.py)"]
    reference = spec.prepare if contract == "prepare" else None
    if reference is not None and not isinstance(reference, str):
        candidate = f"{getattr(reference, '__module__', '')}:{getattr(reference, '__qualname__', '')}"
        try:
            check_reference(candidate)
            reference = candidate
        except ReproError:
            reference = None
    if reference is None:
        note = (
            "# This kernel's prepare step cannot be imported by name: define it here." if contract == "prepare" else ""
        )
        return "\n".join(lines + ([note] if note else []) + ["prepare = None"])
    module_name, attrs = check_reference(reference)
    lines += [
        f"prepare = __import__({literal(module_name)}, fromlist=['_'])",
        f"for _attr in {literal(attrs)}:",
        "    prepare = getattr(prepare, _attr)",
    ]
    return "\n".join(lines)


def pack_kernel_specs() -> dict:
    """Name -> KernelSpec of every packed kernel, as a matrix listing it by name declares it."""
    return {name: pack_kernel_spec(name) for name in PACK_KERNELS}


def kernel_reference(spec) -> str | None:
    """What a script imports as `kernel`: a module kernel's factory, else its impl."""
    if spec is None:
        return None
    ref = spec.module if spec.contract == "module" else spec.impl
    return ref if isinstance(ref, str) else None


# -- facts the script checks -----------------------------------------------------------------


def tensor_facts(params: Mapping[str, Any], seed: int) -> dict:
    """Shape, strides, storage offset, dtype and a checksum of every input, generated on the CPU
    exactly as the run did."""
    return input_facts(make_inputs(case_record(params), seed, "cpu"))


def kernel_support(spec) -> dict | None:
    """What the kernel declares it supports (refusals.Support), as plain data, from its KernelSpec;
    None without one (the script then judges alike refusals as triage does: UNSUPPORTED)."""
    support = Support.of(spec)
    if support is None:
        return None
    # The call contract travels beside it, only where declared: older scripts read as before.
    contract = CallContract.of(spec)
    return support.to_json() | ({"call_contract": contract.to_json()} if contract != CallContract() else {})


def kernel_accepts_fast_accum(spec) -> bool:
    return spec_accepts_fast_accum(spec)


def takes_fast_accum(fn: Callable | None) -> bool:
    """Whether the run passes use_fast_accum to this kernel (only where its signature takes it)."""
    return fn is None or accepts_keyword(fn, "use_fast_accum")


# -- the script ------------------------------------------------------------------------------


def _error_names(error) -> list | None:
    error = _mapping(error)
    if not error:
        return None

    def short(key):
        value = error.get(key)
        return value.rsplit(".", 1)[-1] if isinstance(value, str) and value else None

    return [short("type"), short("root_type")]


def _expected(record: CaseRecord) -> dict:
    outcome = record["outcome"]
    if outcome == oc.XFAIL:  # a known failure: the script checks the failure the catalogue expects
        outcome = _mapping(record.get("known_failure")).get("original_outcome") or outcome
    return {
        "outcome": _text(outcome),
        "signature": _text(record["signature"]),
        "layer": _text(record.get("layer")),
        "eager_error": _error_names(record.get("eager_error")),
        "compiled_error": _error_names(record.get("compiled_error")),
        "mismatch_side": _text(record.get("layer")) if outcome == oc.MISMATCH else None,
    }


def _found(record: CaseRecord, environment: dict) -> dict:
    """What the run recorded, for a reader (printed when the script starts)."""
    triage = _mapping(record.get("triage"))
    summary: str | dict | None = None
    if triage:
        try:
            summary = one_line(triage)
        except Exception:  # a triage block this version cannot read: shown as it is
            summary = triage
    known = _mapping(record.get("known_failure"))

    def error(key):
        e = _mapping(record.get(key))
        return {k: _text(e.get(k)) for k in ("type", "root_type", "message") if e.get(k) is not None} or None

    env = _mapping(environment)
    return {
        "outcome": _text(record["outcome"]),
        "signature": _text(record["signature"]),
        "case": _text(record["id"]),
        "layer": _text(record.get("layer")),
        "detail": _text(record.get("detail")),
        "eager_error": error("eager_error"),
        "compiled_error": error("compiled_error"),
        "known_failure": {k: _text(known.get(k)) for k in ("signature", "link", "reason") if known.get(k) is not None}
        or None,
        "triage": _text(summary),
        "workarounds": [
            _text(_mapping(w).get("knob")) for w in triage.get("workarounds", []) or [] if isinstance(w, dict)
        ]
        or None,
        "environment": {k: _text(env.get(k)) for k in ENV_FIELDS if env.get(k) is not None},
        "written": iso_time(),
    }


def _compile_comment(runner: str) -> str:
    return runner_named(runner).how


def render_script(
    record: CaseRecord,
    environment: dict,
    run_seed: int,
    kernel_text: str,
    timeout_s: float,
    slack: float = 1.0,
    env_vars: dict | None = None,
    max_autotune_configs: int = 0,
    support: dict | None = None,
    fast_accum_keyword: bool = True,
) -> str:
    """The script's text. Every value from `record` and `environment` goes in through `literal`;
    the result is compiled here, so a script that would not parse is never written. `support`:
    kernel_support of the case's kernel; `fast_accum_keyword`: takes_fast_accum of it."""
    _refuse_limits(timeout_s, slack)
    params = _plain(dict(record["params"]))
    seed = input_seed(run_seed, record["id"])
    if env_vars is None:
        env_vars = {k: v for k, v in os.environ.items() if COMPILE_ENV.match(k) and k not in CACHE_ENV}
    name = record_script_name(record)
    quiet_imports = [[category.__name__, message] for category, message in TORCH_IMPORT_NOISE]  # builtins only
    device = _mapping(environment).get("device")
    row = compile_mode(params["mode"])
    other_m, eager_other_m = _other_m_calls(record, params, run_seed, row)
    constants = "\n".join(
        [
            "# What the run recorded (values from the report, as data).",
            f"FOUND = {literal(_found(record, environment))}",
            f"CASE_ID = {literal(_text(record['id']))}",
            f"CASE = {literal(params)}",
            f"RUN_SEED = {literal(_plain(run_seed))}",
            "SEED = " + literal(seed) + "  # zlib.crc32(f'{RUN_SEED}::{CASE_ID}'.encode()): the run's input seed",
            f"DEVICE = {literal(device if isinstance(device, str) and device else 'cpu')}",
            f"COMPILE = {literal(compile_settings(params['mode'], max_autotune_configs))}"
            f"  # {_compile_comment(row.runner)}",
            f"RUNNER = {literal(row.runner)}  # how the compiled side is made (pipeline.make_compiled)",
            f"RUNNER_MODULE = {literal(REGISTERED_BY.get(row.runner, ''))}  # the module of a registered runner",
            f"OTHER_M = {literal(other_m)}  # the other M a dynamic-M mode runs, each with its input seed",
            f"EAGER_OTHER_M = {literal(eager_other_m)}  # the eager side's call at another M, as the run made it",
            f"SEQUENCE = {literal(sequence_steps(record))}  # the eager side's later calls, as the run made them",
            f"KERNEL_SUPPORT = {literal(_plain(support))}  # what the kernel declares: how alike refusals are judged",
            f"FAST_ACCUM_KEYWORD = {literal(bool(fast_accum_keyword))}  # whether the kernel is passed use_fast_accum",
            f"SLACK = {literal(float(slack))}",
            f"TIMEOUT_S = {literal(float(timeout_s))}  # a hang past this: the stacks, then a verdict",
            f"ENV = {literal(dict(sorted(env_vars.items())))}  # compile-related variables set in the run",
            f"QUIET_IMPORTS = {literal(quiet_imports)}  # torch's import-time warnings the run filters",
            f"EXPECTED = {literal(_expected(record))}",
            f"TENSORS = {literal(tensor_facts(params, seed))}",
            f"WRITTEN_BY = {literal('pytest-scaledmm ' + __version__)}",
        ]
    )
    text = _fill_template(name, constants, kernel_text)
    _refuse_broken(text, name, record["id"])
    return text


def _refuse_limits(timeout_s: float, slack: float) -> None:
    """Refuses (ReproError) a timeout or tolerance slack that is not a finite number above 0."""
    if type(timeout_s) not in (int, float) or not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ReproError(f"timeout must be a finite number of seconds greater than 0, not {timeout_s!r}")
    if type(slack) not in (int, float) or not math.isfinite(slack) or slack <= 0:
        raise ReproError(f"tolerance slack must be finite and greater than 0, not {slack!r}")


def _other_m_calls(record: CaseRecord, params: dict, run_seed: int, row: CompileMode) -> tuple[list, list]:
    """(OTHER_M, EAGER_OTHER_M): the calls at another M the run made, each with its input seed:
    those of a mode that marks M (`row`), and the eager side's one that the record's extra names."""
    other_m = other_m_sizes(record["id"], params["m"], run_seed) if row.marks_m else []
    eager_m = _mapping(record.get("extra")).get("other_m")
    eager_other_m = [other_m_entry(record["id"], eager_m, run_seed)] if type(eager_m) is int and eager_m >= 1 else []
    return other_m, eager_other_m


SEQUENCE_CHANGES = frozenset({"k", "n", "out_dtype", "dtype_a", "dtype_b", "bias", "bias_dtype"})
MAX_STEP_SIZE = 1 << 20  # a K or N past this is no step a run plans (its reference alone is 2^24 MACs)


def _step_value(key: str, value: Any) -> bool:
    """A value a step may give `key`: a size within the largest a matrix admits, a known dtype."""
    if key in ("k", "n"):
        return type(value) is int and 0 <= value <= MAX_STEP_SIZE
    if key == "bias":
        return type(value) is bool
    if key == "bias_dtype":
        return value == "out"  # the only bias dtype a step gives
    return value in (OUT_DTYPES if key == "out_dtype" else OPERAND_DTYPES)


def sequence_steps(record: CaseRecord) -> list:
    """The steps of the record's call sequence (extra.sequence.steps, verdict/sequence.py), as data:
    a step of any other form is left out, and so are those after it."""
    found = _mapping(_mapping(record.get("extra")).get("sequence")).get("steps")
    steps: list = []
    for step in found if isinstance(found, list) else []:
        step = _mapping(step)
        changes = _mapping(step.get("changes"))
        valid = (
            isinstance(step.get("kind"), str)
            and isinstance(step.get("label"), str)
            and type(step.get("seed")) is int
            and 0 <= step["seed"] < 2**32
            and set(changes) <= SEQUENCE_CHANGES
            and all(_step_value(key, value) for key, value in changes.items())
        )
        if not valid:
            break
        label = _text(step["label"])
        steps.append({"kind": step["kind"], "label": label, "changes": dict(changes), "seed": step["seed"]})
    return steps


def _fill_template(name: str, constants: str, kernel_text: str) -> str:
    """The script template filled in: its constants, its kernel (with the one-function contract
    where the kernel text names none) and the embedded verdict modules."""
    if "\nCONTRACT = " not in "\n" + kernel_text:
        kernel_text = kernel_text + "\n" + contract_code(None)  # a one-function kernel
    template = (Path(__file__).parent / "templates" / "repro_script.py.tmpl").read_text(encoding="utf-8")
    return template.format(
        name=name,
        constants=constants,
        kernel=kernel_text,
        verdict=verdict_code(),
    )


def _refuse_broken(text: str, name: str, case_id: str) -> None:
    """Refuses (ReproError) a script that does not compile, or that binds a name twice (an
    embedded module clashing with another)."""
    try:
        compile(text, name, "exec")
    except (SyntaxError, ValueError) as exc:  # a defect of this module, never of the report
        raise ReproError(f"the script for {case_id!r} does not compile: {exc}") from None
    clash = _rebound(text)
    if clash:
        raise ReproError(f"the script for {case_id!r} binds {clash} twice: an embedded module clashes")


def write_script(
    directory,
    record: CaseRecord,
    environment: dict,
    run_seed: int,
    kernel_text: str,
    timeout_s: float,
    slack: float = 1.0,
    max_autotune_configs: int = 0,
    support: dict | None = None,
    fast_accum_keyword: bool = True,
) -> Path:
    """Write (or replace) the script of this record's signature and update index.json
    (render_script says what `support` and `fast_accum_keyword` are)."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ReproError(f"{directory} is there and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    index_path = directory / "index.json"
    index = _read_index(index_path)
    outcome, cause, kernel = cause_key(record)
    entry = {
        "outcome": outcome,
        "signature": record["signature"],
        "cause": cause,
        "kernel": kernel,
        "case": record["id"],
    }
    name = record_script_name(record)
    for attempt in range(2, 1000):  # another cause's script under this name is never replaced
        known = index.get(name)
        if not isinstance(known, dict) or (
            known.get("outcome"),
            known.get("cause", known.get("signature")),
            known.get("kernel"),
        ) == (outcome, cause, kernel):
            break
        name = f"{record_script_name(record)[:-3]}_{attempt}.py"
    path = directory / name
    if os.path.lexists(path) and not _our_script(path):
        raise ReproError(f"{path} is there and was not written by pytest-scaledmm: it is never replaced")
    text = render_script(
        record,
        environment,
        run_seed,
        kernel_text,
        timeout_s,
        slack,
        max_autotune_configs=max_autotune_configs,
        support=support,
        fast_accum_keyword=fast_accum_keyword,
    )
    write_text_atomic(path, text, SCRIPT_MODE)
    index[path.name] = entry
    write_atomic(index_path, dict(sorted(index.items())))
    return path


def _our_script(path: Path) -> bool:
    try:
        if not path.is_file() or path.is_symlink():
            return False
        with open(path, encoding="utf-8", errors="replace") as handle:
            return WRITTEN_MARK in handle.read(1 << 20)
    except OSError:
        return False


def _read_index(path: Path) -> dict:
    """The directory's index.json ({script name: what it reproduces}); {} when there is none.
    A file there that is not such an index is never overwritten."""
    if not os.path.lexists(path):
        return {}
    try:
        if path.is_symlink() or not path.is_file():
            raise ValueError
        index = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(index, dict) or not all(re.fullmatch(r"repro_[0-9a-f]{10}(_\d+)?\.py", k) for k in index):
            raise ValueError
    except (OSError, ValueError):
        raise ReproError(f"{path} is there and is not an index of repro scripts: it is never overwritten") from None
    return index


class ReproWriter:
    """Writes the first failing record of each signature as it arrives (on the controller)."""

    def __init__(self, directory, spec, kernels: dict, timeout_s: float, max_autotune_configs: int = 0, import_dirs=()):
        self.directory = Path(directory)
        self.import_dirs = tuple(import_dirs)
        self.max_autotune_configs = max_autotune_configs
        self.spec = spec
        self.kernels = kernels
        self.timeout_s = timeout_s
        self.written: dict[tuple, Path] = {}  # by cause_key
        self.errors: dict[tuple, str] = {}

    def add(self, record: CaseRecord, environment: dict, run_seed: int) -> Path | None:
        if not reproducible(record["outcome"]) or not record.get("signature"):
            return None
        key = cause_key(record)
        if key in self.written or key in self.errors:
            return None
        name = record["params"]["kernel"]
        spec = next((k for k in self.spec.kernels if k.name == name), None)
        try:
            fn = self.kernels.get(name)
            text = kernel_code(name, fn, kernel_reference(spec), self.import_dirs) + "\n" + contract_code(spec)
            slack = self.spec.slack * ((spec.slack if spec else None) or 1.0)
            path = write_script(
                self.directory,
                record,
                environment,
                run_seed,
                text,
                self.timeout_s,
                slack,
                self.max_autotune_configs,
                kernel_support(spec),
                kernel_accepts_fast_accum(spec) if spec else takes_fast_accum(fn),
            )
        except Exception as exc:  # a repro that cannot be written must not stop the run
            self.errors[key] = f"{record['id']}: {type(exc).__name__}: {exc}"
            return None
        self.written[key] = path
        return path

    def summary_lines(self) -> list[str]:
        if not self.written and not self.errors:
            return []
        lines = [
            f"repro scripts: {len(self.written)} in {self.directory} "
            f"(python <script>: exit {EXIT_REPRODUCED} while it fails, {EXIT_NOT_REPRODUCED} once fixed)"
        ]
        lines += [f"  could not write a repro: {message}" for message in self.errors.values()]
        return lines


def _record_problem(record, limits) -> str | None:
    """Why a report's record cannot make a script (a key and what is wrong with it), or None:
    the script regenerates the case from these values, so they must be a case of this plugin,
    within the matrix's tensor-element limits."""
    import jsonschema  # noqa: PLC0415 (0.3 s start-up)

    if not isinstance(record, dict):
        return "the record is not an object"
    for key in ("id", "outcome"):
        if not isinstance(record.get(key), str):
            return f"key {key!r} is not a string"

    if not valid_case_id(record["id"]):
        return "key 'id' is not a case id this plugin writes"
    if record.get("signature") is not None and not isinstance(record["signature"], str):
        return "key 'signature' is not a string"
    schema = cast("dict[str, Any]", CORPUS_SCHEMA)["properties"]["cases"]["items"]["properties"]["params"]
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(record.get("params")))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        return f"key 'params{'.' + where if where else ''}' is not a valid case parameter"
    params = record["params"]
    if any(type(params[d]) is not int for d in ("m", "k", "n")):
        return "key 'params' has a dimension that is not an integer"
    problem = size_problem(params["m"], params["k"], params["n"], limits)
    return f"key 'params': {problem[1]}" if problem else None


def scripts_from_report(report_path, directory, case_ids=(), matrix=None, timeout_s: float = 300.0) -> list[Path]:
    """`scaledmm repro REPORT --out DIR`: scripts for a report's failures (one per signature, or
    for the given case ids), after the fact. Kernels are found through the matrix the report
    names (or `matrix`); the tensors are regenerated from the recorded seed. A report is data
    from elsewhere: a record whose values are not a case of this plugin is refused, by id."""
    report = load_report(report_path)
    if os.path.lexists(directory) and not Path(directory).is_dir():
        raise ReproError(f"--out {directory}: it is there and is not a directory")
    matrix_block = _mapping(report.get("matrix"))
    # A report is data from elsewhere (an unpacked CI artifact): the matrix it names, and the
    # kernels that matrix names, are never read or imported unless the user gives --matrix.
    sources = _kernel_sources(Path(matrix) if matrix else None)
    seed = _recorded_seed(report_path, matrix_block.get("seed"))
    cases = report.get("cases") if isinstance(report.get("cases"), list) else []
    cases = [r for r in cases if isinstance(r, dict)]
    ids = {r["id"] for r in cases if isinstance(r.get("id"), str)}
    wanted = set(case_ids)
    environment = _mapping(report.get("environment"))
    written = []
    # One record at a time: each is checked just before its script is written, as it comes.
    for record in _records_to_script(report_path, cases, wanted, sources.limits):
        written.append(_write_case_script(directory, record, environment, seed, timeout_s, sources))
    missing = wanted - ids
    if missing:
        raise ReproError(f"{report_path}: no case {', '.join(repr(m) for m in sorted(missing))}")
    return written


@dataclass
class _KernelSources:
    """Where scripts_from_report finds a case's kernel: `module:qualname` references and
    KernelSpecs by name, the matrix's tolerance slack and tensor limits, and the directories
    the run imported kernels from."""

    impls: dict[str, str | None]
    specs: dict[str, KernelSpec]
    slack: float
    limits: dict[str, int]
    import_dirs: list[str]


def _kernel_sources(matrix_path: Path | None) -> _KernelSources:
    """The kernels of the matrix the user gave (its directories put on sys.path as the run put
    them), and the packed kernels, known without one."""
    impls: dict[str, str | None] = {}
    specs: dict[str, KernelSpec] = {}
    slack, limits = 1.0, dict(DEFAULT_LIMITS)
    import_dirs: list[str] = []
    if matrix_path is not None:
        # Where the run imported the kernels from (plugin/entry.py): the matrix's directory and
        # its project's (pytest's rootdir when run on that matrix).
        import_dirs = [str(d) for d in dict.fromkeys([matrix_path.resolve().parent, project_dir(matrix_path)])]
        spec = load_spec(matrix_path)
        add_import_dirs(import_dirs)
        impls = {k.name: kernel_reference(k) for k in spec.kernels}
        specs = {k.name: k for k in spec.kernels}
        slack, limits = spec.slack, dict(spec.limits)
    # The packed kernels (torchao's) are part of this package: known without the matrix.
    for name, entry in pack_kernel_specs().items():
        specs.setdefault(name, entry)
        impls.setdefault(name, kernel_reference(entry))
    return _KernelSources(impls, specs, slack, limits, import_dirs)


def _recorded_seed(report_path: str | os.PathLike[str], seed: object) -> int:
    """The report's run seed (`matrix.seed`); refused when it is missing or not an integer."""
    if type(seed) is not int:
        what = (
            "does not record its seed" if seed is None else f"records a seed that is not an integer ({_text(seed)!r})"
        )
        raise ReproError(f"{report_path}: the report {what} (key 'matrix.seed')")
    return seed


def _records_to_script(
    report_path: str | os.PathLike[str], cases: list[CaseRecord], wanted: set[str], limits: Mapping[str, int]
) -> Iterator[CaseRecord]:
    """The records to write scripts for, by id, each with its outcome for a missing signature:
    the `wanted` ones, or else the first reproducible record of each cause. A record whose
    values are not a case of this plugin is refused (_record_problem) when its turn comes."""
    seen = set()
    for record in sorted(cases, key=lambda r: str(r.get("id"))):
        if wanted and not (isinstance(record.get("id"), str) and record["id"] in wanted):
            continue
        outcome = record.get("outcome")
        if not wanted and not (isinstance(outcome, str) and reproducible(outcome) and record.get("signature")):
            continue
        problem = _record_problem(record, limits)
        if problem:
            raise ReproError(f"{report_path}: case {_text(record.get('id'))!r}: {problem}")
        record = {**record, "signature": record.get("signature") or record["outcome"]}
        key = cause_key(record)
        if not wanted and key in seen:
            continue
        seen.add(key)
        yield record


def _write_case_script(
    directory: str | os.PathLike[str],
    record: CaseRecord,
    environment: dict,
    seed: int,
    timeout_s: float,
    sources: _KernelSources,
) -> Path:
    """Writes the script of one record of a report (write_script), its kernel from `sources`;
    the path written."""
    name = record["params"]["kernel"]
    text, fn = _case_kernel(name, sources)
    support = kernel_support(sources.specs.get(name))
    if support is None and name in BUILTIN_IMPLS:
        support = {"name": name, "builtin": True}  # a built-in whose declarations are not at hand
    own_slack = (sources.specs[name].slack if name in sources.specs else None) or 1.0
    try:
        return write_script(
            directory,
            record,
            environment,
            seed,
            text,
            timeout_s,
            sources.slack * own_slack,
            support=support,
            fast_accum_keyword=kernel_accepts_fast_accum(sources.specs[name])
            if name in sources.specs
            else takes_fast_accum(fn),
        )
    except OSError as exc:
        raise ReproError(f"cannot write into {directory}: {exc.strerror or exc}") from None


def _case_kernel(name: str, sources: _KernelSources) -> tuple[str, Callable | None]:
    """(the script's kernel code, the kernel's callable here): a built-in embedded as source, a
    user kernel imported by reference; the callable None where it cannot be imported here."""
    impl = sources.impls.get(name)
    fn = BUILTIN_IMPLS.get(name) if impl is None else None
    text = kernel_code(name, fn, impl, sources.import_dirs) + "\n" + contract_code(sources.specs.get(name))
    if impl is not None:
        try:
            fn = load_impl(impl)
        except Exception:  # the script imports it itself, and says so when it cannot
            fn = None
    return text, fn
