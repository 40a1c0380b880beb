"""Count how many forms a few facts take in the package: run before and after a refactor, on each
source root, and compare the figures.

    python scripts/one_source_counts.py [--root DIR] [--json OUT] [--no-mypy]

Every figure is read from DIR/pytest_scaledmm/**/*.py by its syntax tree (ast), never by import:

1. string-key case reads: the case parameter names are the fields of `CaseParams`
   (verdict/case_axes.py) less `given`. A read is `X["<field>"]` in a load, or `X.get("<field>", ...)`,
   whatever X is: a settings dict's `.get("mode")` or a schema's `["kernel"]` counts too, so the
   figure is an upper bound. Broken down by subpackage, with the 10 files holding most.
2. verdict signatures taking a Mapping: function and method definitions under verdict/ with a
   parameter whose annotation's text contains "Mapping".
3. records rebuilt from a mapping: calls of `case_record` (a name or an attribute) or of
   `CaseParams.from_json`.
4. support field declarations: the annotated class-level fields (ClassVar left out) of the
   classes Declared, Kernel, KernelSpec, Support and OpModel, wherever defined (a class absent
   from a root is listed as missing), and the `SupportField(...)` rows that name their field
   by a literal (a row built from a dataclass field, `SupportField(f.name, ...)`, declares
   nothing of its own). A field name's places are the classes declaring it plus the rows naming
   it; the figure is the sum of those places, and how many names have 3 or more.
5. cost tables: module-level assignments of a dict literal keyed by at least two compile mode
   names (eager, aot_eager, inductor, max-autotune, ...) whose values are all numbers.
6. report writer locking lines: the writer modules are those whose source names a file lock
   (fcntl, flock, O_EXCL, FileLock, filelock, msvcrt), and the modules that import a lock- or
   claim-named name from one or give one a name of that kind (`from .report_path import claim`).
   In them a top-level definition (function, class, assignment) counts when its name says lock or
   claim, its source names a file lock, or its docstring speaks of locking or claiming; then,
   repeatedly, a definition that only counted definitions use (none other in its module, no other
   module). Lines are non-blank, non-comment lines, docstrings included; "without docstrings"
   leaves them out. Call sites inside larger functions (the CLI's merge, the plugin's configure
   and unconfigure hooks) are not counted, nor a report directory's pruning that skips locked
   reports: a smaller figure than a count of every line the report's protection touches.
7. mypy precise-expression share: mypy run in DIR with DIR/pyproject.toml's configuration and
   --any-exprs-report (a fresh cache, so roots never share one); for execution/ and plugin/,
   1 - Anys / Exprs over their modules. Also the share of precise lines (--lineprecision-report):
   Precise / (Precise + Imprecise + Any). --no-mypy skips it.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tempfile
import tokenize
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE = "pytest_scaledmm"
SUBPACKAGE_ORDER = ("execution", "plugin", "matrix", "reports", "verdict", "scaffold", "top-level")
SUPPORT_CLASSES = ("Declared", "Kernel", "KernelSpec", "Support", "OpModel")
COMPILE_MODES = frozenset(
    {"eager", "aot_eager", "inductor", "max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead"}
)
LOCK_TOKENS = ("fcntl", "flock", "O_EXCL", "FileLock", "filelock", "msvcrt")
# Words of a name (ReportLock: report, lock; LOCK_KEY: lock, key), so that Block is no lock.
NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
LOCK_WORDS = re.compile(r"\b(claim\w*|lock|locks|locked|locking)\b", re.IGNORECASE)
MYPY_SUBPACKAGES = ("execution", "plugin")


@dataclass
class Module:
    rel: str  # path under DIR/pytest_scaledmm, with "/"
    name: str  # dotted module name
    source: str
    tree: ast.Module
    lines: list[str] = field(default_factory=list)

    @property
    def subpackage(self) -> str:
        parts = self.rel.split("/")
        return parts[0] if len(parts) > 1 else "top-level"


def load_modules(package_dir: Path) -> list[Module]:
    modules = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).as_posix()
        dotted = [PACKAGE, *rel[: -len(".py")].split("/")]
        if dotted[-1] == "__init__":
            dotted.pop()
        source = path.read_text(encoding="utf-8")
        modules.append(Module(rel, ".".join(dotted), source, ast.parse(source, str(path)), source.splitlines()))
    return modules


def by_subpackage(counts: Counter[str]) -> dict[str, int]:
    known = [name for name in SUBPACKAGE_ORDER if name in counts]
    return {name: counts[name] for name in known + sorted(set(counts) - set(known))}


def str_constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def class_fields(cls: ast.ClassDef) -> list[str]:
    """Annotated class-body fields, ClassVar left out (not a dataclass field)."""
    return [
        stmt.target.id
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and "ClassVar" not in ast.unparse(stmt.annotation)
    ]


def find_classes(modules: Iterable[Module], names: Iterable[str]) -> list[tuple[str, Module, ast.ClassDef]]:
    wanted = set(names)
    return [
        (node.name, module, node)
        for module in modules
        for node in ast.walk(module.tree)
        if isinstance(node, ast.ClassDef) and node.name in wanted
    ]


# -- 1. string-key case reads ------------------------------------------------------------------------


def case_fields(modules: list[Module]) -> list[str]:
    found = [cls for _, module, cls in find_classes(modules, ["CaseParams"]) if module.rel == "verdict/case_axes.py"]
    if not found:
        raise SystemExit("no class CaseParams in verdict/case_axes.py")
    return [name for name in class_fields(found[0]) if name != "given"]


def case_key_reads(module: Module, keys: frozenset[str]) -> int:
    reads = 0
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and str_constant(node.slice) in keys:
            reads += 1
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and str_constant(node.args[0]) in keys
        ):
            reads += 1
    return reads


def figure_case_reads(modules: list[Module]) -> dict[str, Any]:
    keys = frozenset(case_fields(modules))
    per_file = {module.rel: case_key_reads(module, keys) for module in modules}
    per_subpackage: Counter[str] = Counter()
    for module in modules:
        per_subpackage[module.subpackage] += per_file[module.rel]
    top = sorted(((n, rel) for rel, n in per_file.items() if n), key=lambda item: (-item[0], item[1]))[:10]
    return {
        "fields": len(keys),
        "total": sum(per_file.values()),
        "by_subpackage": by_subpackage(per_subpackage),
        "top_files": {rel: n for n, rel in top},
    }


# -- 2. verdict signatures taking a Mapping ----------------------------------------------------------


def all_params(args: ast.arguments) -> Iterator[ast.arg]:
    yield from args.posonlyargs
    yield from args.args
    yield from args.kwonlyargs
    if args.vararg:
        yield args.vararg
    if args.kwarg:
        yield args.kwarg


def figure_mapping_signatures(modules: list[Module]) -> dict[str, Any]:
    per_file: Counter[str] = Counter()
    definitions = 0
    for module in modules:
        if module.subpackage != "verdict":
            continue
        for node in ast.walk(module.tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            definitions += 1
            if any(arg.annotation and "Mapping" in ast.unparse(arg.annotation) for arg in all_params(node.args)):
                per_file[module.rel] += 1
    return {"total": sum(per_file.values()), "definitions": definitions, "by_file": dict(per_file.most_common())}


# -- 3. records rebuilt from a mapping ---------------------------------------------------------------


def is_record_rebuild(call: ast.Call) -> bool:
    if called_name(call) == "case_record":
        return True
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "from_json"
        and isinstance(func.value, ast.Name)
        and func.value.id == "CaseParams"
    )


def figure_record_rebuilds(modules: list[Module]) -> dict[str, Any]:
    per_subpackage: Counter[str] = Counter()
    for module in modules:
        per_subpackage[module.subpackage] += sum(
            1 for node in ast.walk(module.tree) if isinstance(node, ast.Call) and is_record_rebuild(node)
        )
    return {"total": sum(per_subpackage.values()), "by_subpackage": by_subpackage(+per_subpackage)}


# -- 4. support field declarations -------------------------------------------------------------------


def support_field_rows(modules: list[Module]) -> list[tuple[str, str]]:
    """(field name, file) of each SupportField(...) call; None where the name is not a literal."""
    rows = []
    for module in modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and called_name(node) == "SupportField":
                name = str_constant(node.args[0]) if node.args else None
                for keyword in node.keywords:
                    if keyword.arg == "name":
                        name = str_constant(keyword.value)
                rows.append((name, module.rel))
    return rows


def figure_support_fields(modules: list[Module]) -> dict[str, Any]:
    classes = {}
    places: Counter[str] = Counter()
    for name, module, cls in find_classes(modules, SUPPORT_CLASSES):
        fields = class_fields(cls)
        key = name if name not in classes else f"{name} ({module.rel})"  # a name defined twice
        classes[key] = {"file": module.rel, "fields": len(fields)}
        places.update(set(fields))
    all_rows = support_field_rows(modules)
    rows = [(name, rel) for name, rel in all_rows if name is not None]
    places.update(name for name, _ in rows)
    row_names = {name for name, _ in rows}
    in_three = sorted(name for name, n in places.items() if n >= 3)
    return {
        "classes": classes,
        "missing_classes": [name for name in SUPPORT_CLASSES if not any(k.split(" ")[0] == name for k in classes)],
        "support_field_rows": len(rows),
        "derived_rows": len(all_rows) - len(rows),
        "row_files": sorted({rel for _, rel in rows}),
        "places": sum(places.values()),
        "names": len(places),
        "names_in_3_or_more": len(in_three),
        "names_in_3_or_more_that_are_rows": sum(1 for name in in_three if name in row_names),
        "names_in_3_or_more_list": in_three,
    }


# -- 5. cost tables ----------------------------------------------------------------------------------


def is_number(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def figure_cost_tables(modules: list[Module]) -> dict[str, Any]:
    tables = []
    for module in modules:
        for stmt in module.tree.body:
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            else:
                continue
            if not isinstance(value, ast.Dict) or not value.values:
                continue
            modes = {str_constant(key) for key in value.keys} & COMPILE_MODES
            if len(modes) >= 2 and all(is_number(v) for v in value.values):
                tables += [{"name": ast.unparse(target), "file": module.rel} for target in targets]
    return {"total": len(tables), "tables": tables}


# -- 6. report writer locking lines ------------------------------------------------------------------


def comment_or_blank_lines(module: Module) -> set[int]:
    """1-based lines with nothing but a comment or whitespace (tokenize: not fooled by strings)."""
    code_lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(module.source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if token.type == tokenize.ENDMARKER:
            continue
        code_lines.update(range(token.start[0], token.end[0] + 1))
    return set(range(1, len(module.lines) + 1)) - code_lines


def docstring_lines(node: ast.AST) -> set[int]:
    found: set[int] = set()
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and inner.body:
            first = inner.body[0]
            if isinstance(first, ast.Expr) and str_constant(first.value) is not None:
                found.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return found


def span(node: ast.stmt) -> set[int]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return set(range(start, (node.end_lineno or node.lineno) + 1))


def defined_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return [name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)]


def used_names(node: ast.AST) -> set[str]:
    names = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            names.add(inner.id)
        elif isinstance(inner, ast.Attribute):
            names.add(inner.attr)
        elif isinstance(inner, ast.alias):
            names.add(inner.name.rsplit(".", 1)[-1])
    return names


def says_lock(name: str) -> bool:
    words = [word.lower() for word in NAME_WORD.findall(name)]
    return any(word.startswith("claim") or word in ("lock", "locks", "locked", "locking", "flock") for word in words)


def is_lock_unit(stmt: ast.stmt, names: list[str], text: str) -> bool:
    if any(says_lock(name) for name in names) or any(token in text for token in LOCK_TOKENS):
        return True
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        doc = ast.get_docstring(stmt) or ""
        return bool(LOCK_WORDS.search(doc))
    return False


def imported_from(module: Module) -> Iterator[tuple[str, str]]:
    """(module imported from, name) of each `from ... import name` in `module`, at any depth."""
    package = module.name if module.rel.endswith("__init__.py") else module.name.rpartition(".")[0]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                yield source, alias.name


def writer_modules(modules: list[Module]) -> list[Module]:
    """The modules naming a file lock, and those linked to one by importing a lock- or
    claim-named name from it or giving it one."""
    lockers = {module.name for module in modules if any(token in module.source for token in LOCK_TOKENS)}
    linked = set(lockers)
    for module in modules:
        for source, name in imported_from(module):
            if says_lock(name) and (source in lockers or module.name in lockers):
                linked |= {module.name, source}
    return [module for module in modules if module.name in linked]


def figure_locking_lines(modules: list[Module]) -> dict[str, Any]:
    writers = writer_modules(modules)
    # Names each module uses: a helper another module uses is shared, not the lock's own.
    uses = {module.rel: used_names(module.tree) for module in modules}
    files = {}
    for module in writers:
        units = [(stmt, defined_names(stmt)) for stmt in module.tree.body if defined_names(stmt)]
        texts = [ast.get_source_segment(module.source, stmt) or "" for stmt, _ in units]
        chosen = {i for i, (stmt, names) in enumerate(units) if is_lock_unit(stmt, names, texts[i])}
        elsewhere = set().union(*(names for rel, names in uses.items() if rel != module.rel))
        while True:  # add helpers only the counted definitions use, until none is left
            added = set()
            for i, (_, names) in enumerate(units):
                if i in chosen or set(names) & elsewhere:
                    continue
                users = {j for j, (stmt, _) in enumerate(units) if j != i and set(names) & used_names(stmt)}
                if users and users <= chosen:
                    added.add(i)
            if not added:
                break
            chosen |= added
        skipped = comment_or_blank_lines(module)
        docs = docstring_lines(module.tree)
        counted = {i: span(units[i][0]) - skipped for i in sorted(chosen, key=lambda i: units[i][0].lineno)}
        files[module.rel] = {
            "lines": len(module.lines) - len(skipped),
            "lock_lines": sum(len(lines) for lines in counted.values()),
            "lock_code_lines": sum(len(lines - docs) for lines in counted.values()),
            "units": {"/".join(units[i][1]): len(lines) for i, lines in counted.items()},
        }
    return {
        "files": files,
        "total": sum(f["lock_lines"] for f in files.values()),
        "total_code": sum(f["lock_code_lines"] for f in files.values()),
    }


# -- 7. mypy precise-expression share ----------------------------------------------------------------


def report_rows(path: Path) -> Iterator[list[str]]:
    """The module rows of a mypy text report: header, rule and Total left out."""
    for line in path.read_text().splitlines()[2:]:
        cells = line.split()
        if cells and not cells[0].startswith("-") and cells[0] != "Total":
            yield cells


def in_subpackage(module_name: str, subpackage: str) -> bool:
    prefix = f"{PACKAGE}.{subpackage}"
    return module_name == prefix or module_name.startswith(prefix + ".")


def figure_mypy(root: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="one_source_counts.") as tmp:
        reports = Path(tmp, "reports")
        command = [sys.executable, "-m", "mypy", "--cache-dir", str(Path(tmp, "cache"))]
        command += ["--any-exprs-report", str(reports), "--lineprecision-report", str(reports)]
        # No files: the configuration's `files` names the package, relative to DIR.
        done = subprocess.run(command, cwd=root, capture_output=True, text=True)
        if not (reports / "any-exprs.txt").exists():
            raise SystemExit(f"mypy wrote no report (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        any_rows = list(report_rows(reports / "any-exprs.txt"))
        line_rows = list(report_rows(reports / "lineprecision.txt"))
    result: dict[str, Any] = {"mypy_exit": done.returncode, "mypy_summary": done.stdout.strip().splitlines()[-1:]}
    for subpackage in MYPY_SUBPACKAGES:
        anys = sum(int(row[1]) for row in any_rows if in_subpackage(row[0], subpackage))
        exprs = sum(int(row[2]) for row in any_rows if in_subpackage(row[0], subpackage))
        # lineprecision columns: Name Lines Precise Imprecise Any Empty Unanalyzed
        precise, imprecise, any_lines = (
            sum(int(row[col]) for row in line_rows if in_subpackage(row[0], subpackage)) for col in (2, 3, 4)
        )
        analysed = precise + imprecise + any_lines
        result[subpackage] = {
            "anys": anys,
            "exprs": exprs,
            "precise_expr_pct": round(100 * (1 - anys / exprs), 1) if exprs else None,
            "precise_line_pct": round(100 * precise / analysed, 1) if analysed else None,
        }
    return result


# -- 8. report shape declarations -------------------------------------------------------------------


def schema_property_keys(node: ast.Dict) -> int:
    """The keys a hand-written JSON Schema `properties` object names: literal keys, and those
    a comprehension over a literal tuple or list adds."""
    count = 0
    for key, value in zip(node.keys, node.values, strict=True):
        if key is not None:
            count += str_constant(key) is not None
        elif isinstance(value, ast.DictComp) and isinstance(value.generators[0].iter, (ast.Tuple, ast.List)):
            count += len(value.generators[0].iter.elts)
    return count


def typed_dicts(module: Module) -> list[ast.ClassDef]:
    """The TypedDict classes of a module, those derived from one of its own too."""
    found: dict[str, ast.ClassDef] = {}
    for node in module.tree.body:
        if isinstance(node, ast.ClassDef) and any(
            ast.unparse(base) == "TypedDict" or ast.unparse(base) in found for base in node.bases
        ):
            found[node.name] = node
    return list(found.values())


def figure_report_shape(modules: list[Module]) -> dict[str, Any]:
    typed = sum(
        len(class_fields(cls)) for module in modules if module.rel == "records.py" for cls in typed_dicts(module)
    )
    by_hand: Counter[str] = Counter()
    for module in modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if key is not None and str_constant(key) == "properties" and isinstance(value, ast.Dict):
                        if module.rel.startswith("reports/"):
                            by_hand[module.rel] += schema_property_keys(value)
    return {"typed_fields": typed, "schema_keys_by_hand": dict(by_hand), "schema_total": sum(by_hand.values())}


# -- output ------------------------------------------------------------------------------------------


def breakdown(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def print_figures(figures: dict[str, Any]) -> None:
    reads = figures["case_reads"]
    print(f"1. string-key case reads ({reads['fields']} CaseParams fields)   {reads['total']}")
    print(f"     by subpackage: {breakdown(reads['by_subpackage'])}")
    for rel, n in reads["top_files"].items():
        print(f"     {n:5d}  {rel}")
    signatures = figures["mapping_signatures"]
    print(
        f"2. verdict signatures taking a Mapping            {signatures['total']}"
        f"  (of {signatures['definitions']} definitions in verdict/)"
    )
    rebuilds = figures["record_rebuilds"]
    print(f"3. records rebuilt from a mapping                 {rebuilds['total']}")
    print(f"     by subpackage: {breakdown(rebuilds['by_subpackage'])}")
    support = figures["support_fields"]
    print(f"4. places a support field is declared             {support['places']}")
    for name, cls in support["classes"].items():
        print(f"     {cls['fields']:5d}  {name} fields ({cls['file']})")
    row_files = ", ".join(support["row_files"])
    print(f"     {support['support_field_rows']:5d}  SupportField rows naming their field ({row_files})")
    if support.get("derived_rows"):
        print(f"     {support['derived_rows']:5d}  SupportField rows built from a dataclass's fields (no declaration)")
    if support["missing_classes"]:
        print(f"     not found: {', '.join(support['missing_classes'])}")
    print(
        f"   field names declared in 3 or more places       {support['names_in_3_or_more']}"
        f"  (of {support['names']} names; {support['names_in_3_or_more_that_are_rows']} of them SupportField rows)"
    )
    costs = figures["cost_tables"]
    print(f"5. cost tables keyed by compile mode              {costs['total']}")
    for table in costs["tables"]:
        print(f"     {table['name']} ({table['file']})")
    locking = figures["locking_lines"]
    print(
        f"6. report writer locking and claiming lines       {locking['total']}"
        f"  ({locking['total_code']} without docstrings)"
    )
    for rel, info in locking["files"].items():
        print(
            f"     {info['lock_lines']:5d} of {info['lines']:5d}  {rel} ({info['lock_code_lines']} without docstrings)"
        )
        print(f"            {', '.join(f'{name} {n}' for name, n in info['units'].items()) or '(none)'}")
    if "mypy" in figures:
        print("7. mypy precise-expression share (precise lines)")
        for subpackage in MYPY_SUBPACKAGES:
            share = figures["mypy"][subpackage]
            print(
                f"     {subpackage:10s} {share['precise_expr_pct']:5.1f}%  ({share['anys']} Any of {share['exprs']}"
                f" expressions; lines {share['precise_line_pct']:.1f}%)"
            )


def print_report_shape(shape: dict[str, Any]) -> None:
    print(f"8. report fields declared as types (records.py)   {shape['typed_fields']}")
    print(f"   report fields declared in a hand-written JSON Schema (reports/)   {shape['schema_total']}")
    for rel, n in shape["schema_keys_by_hand"].items():
        print(f"     {n:5d}  {rel}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="source root")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--no-mypy", action="store_true", help="skip figure 7 (a mypy run of a minute or so)")
    args = parser.parse_args()
    root = args.root.resolve()
    modules = load_modules(root / PACKAGE)
    if not modules:
        raise SystemExit(f"no {PACKAGE}/**/*.py under {root}")
    figures: dict[str, Any] = {
        "root": str(root),
        "case_reads": figure_case_reads(modules),
        "mapping_signatures": figure_mapping_signatures(modules),
        "record_rebuilds": figure_record_rebuilds(modules),
        "support_fields": figure_support_fields(modules),
        "cost_tables": figure_cost_tables(modules),
        "locking_lines": figure_locking_lines(modules),
        "report_shape": figure_report_shape(modules),
    }
    if not args.no_mypy:
        figures["mypy"] = figure_mypy(root)
    print(f"root: {root}")
    print_figures(figures)
    print_report_shape(figures["report_shape"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
