"""The code a matrix run runs, as sha256 digests: each kernel's defining module and the modules
of the user's project it imports, transitively, and the plugin package's own sources (a built-in
kernel is the plugin's code). The report's matrix block holds them (`code`): `scaledmm merge`
refuses shards that ran different code, compare and gate say when a kernel's code changed.

Imports are read from the source (ast), never run; a module is found as `import` would find it
(sys.modules first, then the import system's finders, without importing it). The project is the
files under the run's import directories (the matrix file's directory, the rootdir), less
installed packages (site-packages, a virtual environment inside the project) and the plugin.
Keys are paths relative to the project (a dotted module name outside it): shards on other
machines agree when their code does.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import inspect
import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PLUGIN_DIR = Path(__file__).resolve().parent.parent
# The plugin's sources: code, templates, type stubs and the CI files `scaledmm init` writes.
_PLUGIN_SUFFIXES = frozenset({".py", ".pyi", ".j2", ".js", ".tmpl", ".yml", ".yaml", ".typed"})
_INSTALLED = frozenset({"site-packages", "dist-packages"})


def _file_sha(path: str | Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def combined(files: Mapping[str, str | None]) -> str:
    """One digest of several files, by key and content: the same files give the same digest."""
    digest = hashlib.sha256()
    for key in sorted(files):
        digest.update(f"{key}\0{files[key] or 'unreadable'}\n".encode("utf-8", "backslashreplace"))
    return digest.hexdigest()


def plugin_digest() -> str:
    """The digest of the plugin package's sources."""
    files = {
        path.relative_to(PLUGIN_DIR).as_posix(): _file_sha(path)
        for path in PLUGIN_DIR.rglob("*")
        if path.suffix in _PLUGIN_SUFFIXES and "__pycache__" not in path.parts and path.is_file()
    }
    return combined(files)


class _Project:
    """Which files are the user's project, and their keys."""

    def __init__(self, roots: Iterable[str | Path]):
        self.roots = [os.path.realpath(root) for root in dict.fromkeys(str(r) for r in roots)]
        paths = sysconfig.get_paths()
        self.installed = [
            os.path.realpath(paths[name]) for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths
        ]

    def root_of(self, path: str) -> str | None:
        """The project root `path` lies under, None when it is not the project's."""
        if _INSTALLED & set(Path(path).parts) or _under(path, str(PLUGIN_DIR)):
            return None
        if any(_under(path, place) for place in self.installed):
            return None
        return next((root for root in self.roots if _under(path, root)), None)

    def key(self, path: str, module: str | None) -> str:
        root = self.root_of(path)
        if root is not None:
            return Path(os.path.relpath(path, root)).as_posix()
        return module or Path(path).name


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _spec_file(spec: Any) -> str | None:
    origin = getattr(spec, "origin", None)
    return os.path.realpath(origin) if isinstance(origin, str) and os.path.isfile(origin) else None


def _find_spec(name: str, path: Sequence[str] | None) -> Any:
    """The spec of `name` from the import system's finders, without importing it."""
    finders = [importlib.machinery.PathFinder, *sys.meta_path]
    for finder in finders:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except Exception:  # a finder that cannot answer for this name: the next one may
            continue
        if spec is not None:
            return spec
    return None


def module_file(name: str) -> str | None:
    """The file module `name` is (or would be) imported from, None for one without a file."""
    module = sys.modules.get(name)
    if module is not None:
        found = getattr(module, "__file__", None)
        return os.path.realpath(found) if isinstance(found, str) and os.path.isfile(found) else None
    path: Sequence[str] | None = None
    parts = name.split(".")
    for index in range(1, len(parts) + 1):
        prefix = ".".join(parts[:index])
        parent = sys.modules.get(prefix)
        if parent is not None and index < len(parts):
            path = getattr(parent, "__path__", None)
        else:
            spec = _find_spec(prefix, path)
            if spec is None:
                return None
            if index == len(parts):
                return _spec_file(spec)
            path = spec.submodule_search_locations
        if path is None:
            return None
    return None


def _imported_names(tree: ast.AST, package: str | None) -> list[str]:
    """Every module an import statement of the tree may name, with its parent packages: for
    `from a import b`, `a` and `a.b` (b may be a submodule)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if not package:
                    continue  # a relative import outside a known package: nothing to follow
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    continue
                stem = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{stem}.{base}" if base else stem
            if not base:
                continue
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    expanded: list[str] = []
    for name in names:
        parts = name.split(".")
        expanded += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return list(dict.fromkeys(expanded))


def _package_of(module: str | None, path: str) -> str | None:
    if not module:
        return None
    return module if Path(path).name == "__init__.py" else module.rpartition(".")[0] or None


def project_files(start: Sequence[tuple[str, str | None]], project: _Project) -> dict[str, str | None]:
    """Key -> sha256 of the files `start` names ((path, module name) pairs, always kept) and of
    the project modules they import, transitively."""
    found: dict[str, str | None] = {}
    seen: set[str] = set()
    queue = list(start)
    while queue:
        path, module = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        found[project.key(path, module)] = _file_sha(path)
        # Its packages' __init__ modules run before it does.
        parents = [module.rsplit(".", i)[0] for i in range(module.count("."), 0, -1)] if module else []
        queue += [(f, name) for name in parents if (f := module_file(name)) and project.root_of(f) is not None]
        if not path.endswith(".py"):
            continue  # an extension module: its bytes are the digest, it has no imports to read
        try:
            tree = ast.parse(Path(path).read_bytes(), filename=path)
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue  # hashed as it is; an unreadable module imports nothing we can follow
        for name in _imported_names(tree, _package_of(module, path)):
            target = module_file(name)
            if target is not None and target not in seen and project.root_of(target) is not None:
                queue.append((target, name))
    return found


def _definition(part: Any) -> tuple[str | None, str | None]:
    """(file, module name) where a kernel's part is defined: a `module:qualname` reference by its
    module, a callable by its code (a wrapper by what it wraps, an instance by its class)."""
    if isinstance(part, str):
        name = part.partition(":")[0]
        return module_file(name), name
    while isinstance(part, functools.partial):
        part = part.func
    init = getattr(part, "_init_fn", None)  # torch.library.custom_op: the function it was made of
    part = init if callable(init) else part
    try:
        part = inspect.unwrap(part)
    except ValueError:  # a __wrapped__ loop: take it as it is
        pass
    if not (inspect.isfunction(part) or inspect.ismethod(part) or inspect.isclass(part)):
        part = type(part)
    module = getattr(part, "__module__", None)
    try:
        found = inspect.getsourcefile(part) or inspect.getfile(part)
    except (TypeError, OSError):
        found = None
    if found is None or not os.path.isfile(found):
        found = module_file(module) if isinstance(module, str) else None
    return (os.path.realpath(found) if found else None), module if isinstance(module, str) else None


def kernel_code(spec: Any, resolved: Any, project: _Project, plugin: str) -> dict[str, Any]:
    """A kernel's entry of the code block: the plugin's digest for a built-in, else the digest of
    its parts' modules and the project modules they import, with each file's digest."""
    if not spec.user_code:
        return {"sha256": plugin, "builtin": True}
    parts = [spec.fn, spec.impl, spec.prepare, spec.module, resolved]
    start = [_definition(part) for part in parts if part is not None]
    files = [(path, module) for path, module in start if path is not None]
    if not files:
        return {"sha256": None, "unknown": "no source file defines it"}
    found = project_files(files, project)
    return {"sha256": combined(found), "files": dict(sorted(found.items()))}


def code_block(kernel_specs: Iterable[Any], resolved: Mapping[str, Any], roots: Iterable[str | Path]) -> dict[str, Any]:
    """The report's `matrix.code`: the plugin's digest and each kernel's (kernel_code)."""
    plugin = plugin_digest()
    project = _Project(roots)
    kernels = {spec.name: kernel_code(spec, resolved.get(spec.name), project, plugin) for spec in kernel_specs}
    return {"plugin": plugin, "kernels": kernels}
