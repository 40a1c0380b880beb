"""What a project's matrix needs installed besides torch, pytest-scaledmm and the project itself:
the pip requirements `scaledmm init` adds to the envs and CI jobs that run its kernels. Envs
without them would skip (a packed kernel) or fail every case of those kernels, under every torch
release alike, and the gate would pass an upgrade that never ran them.

For each kernel of matrix.yaml, in order:
- its `requires:` when it has one (what pip installs for its modules; `[]`: nothing);
- a packed kernel (matrix/packs): pytest-scaledmm's extra for its library;
- each module its `impl`, `prepare` or `module` names, by its top-level module: nothing for one
  of the project (beside the matrix, in the project directory or its src/), of the standard
  library, or of torch or pytest-scaledmm (or what they install); a packed library's extra;
  else the distribution installed here that provides it.

A module none of these place is a MatrixError naming the matrix file and the kernel's key.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..matrix.errors import MatrixError
from ..matrix.packs import PACK_EXTRAS, pack_library
from ..matrix.spec import read_matrix

PACKAGE = "pytest-scaledmm"
# Installed in every env that runs the matrix, with what they require.
_INSTALLED_WITH = ("torch", PACKAGE)
_REFERENCES = ("impl", "prepare", "module")
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | frozenset(sys.builtin_module_names)


def kernel_requirements(matrix: Path, project: Path) -> tuple[str, ...]:
    """The pip requirements the matrix's kernels need, each once, in the matrix's order."""
    data = read_matrix(matrix)
    roots = [str(root) for root in dict.fromkeys(p.resolve() for p in (matrix.parent, project, project / "src"))]
    found: dict[str, None] = {}
    for index, entry in enumerate(data["kernels"]):
        key = f"kernels[{index}]"
        entry = {"name": entry} if isinstance(entry, str) else entry
        if "requires" in entry:
            found.update(dict.fromkeys(_declared(matrix, f"{key}.requires", entry["requires"])))
            continue
        library = pack_library(entry["name"]) if not (entry.get("impl") or entry.get("module")) else None
        if library is not None:
            found.update(dict.fromkeys(_extra(library)))
        for ref in _REFERENCES:
            if entry.get(ref):
                top = entry[ref].partition(":")[0].split(".")[0]
                found.update(dict.fromkeys(_module_needs(matrix, f"{key}.{ref}", top, roots)))
    return tuple(found)


# What every env installs on its own terms: a kernel's requirement on it would fight the env's pin.
ENV_OWNED = frozenset({"torch", "pytest-scaledmm", "hypothesis", "pytest", "pytest-xdist"})


def _declared(matrix: Path, key: str, requires: Sequence[str]) -> list[str]:
    for index, text in enumerate(requires):
        where = f"{key}[{index}]"
        if any(c.isspace() for c in text):
            raise MatrixError(
                matrix, where, f"{text!r}: one pip requirement without spaces (the CI files pass them to pip as words)"
            )
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0]  # the lines below it point at the column
            raise MatrixError(matrix, where, f"{text!r} is not a pip requirement ({first})") from None
        if canonicalize_name(requirement.name) in ENV_OWNED:
            raise MatrixError(
                matrix,
                where,
                f"{text!r}: each env installs {requirement.name} itself (torch per env, the plugin from"
                " this checkout); a kernel cannot pin it",
            )
    return list(requires)


def _module_needs(matrix: Path, key: str, top: str, roots: list[str]) -> list[str]:
    if top in _STDLIB or importlib.machinery.PathFinder.find_spec(top, roots) is not None:
        return []
    provided = _provided()
    if canonicalize_name(top) in provided:  # torch, pytest_scaledmm, triton ...
        return []
    if top in PACK_EXTRAS:
        return _extra(top)
    dists = list(dict.fromkeys(_distributions().get(top, ())))
    if any(canonicalize_name(dist) in provided for dist in dists):
        return []
    if len(dists) == 1:
        return dists
    if dists:
        raise MatrixError(
            matrix,
            key,
            f"module {top!r} comes with several installed packages ({', '.join(dists)}), so init cannot tell which"
            " the envs need: list it under the kernel's `requires:`",
        )
    raise MatrixError(
        matrix,
        key,
        f"module {top!r} is neither in the project nor installed here, so init cannot tell what the envs must"
        " install for it: install it here, or list what pip installs for it under the kernel's `requires:`",
    )


def _requirements(dist: str) -> list[Requirement]:
    try:
        return [Requirement(text) for text in importlib.metadata.requires(dist) or ()]
    except importlib.metadata.PackageNotFoundError:
        return []


def _extra(library: str) -> list[str]:
    """What pytest-scaledmm's extra for a packed library installs (pyproject.toml), the
    requirement the pack checks for where the package's metadata is not there."""
    extra, fallback = PACK_EXTRAS[library]
    found = []
    for req in _requirements(PACKAGE):
        if req.marker is not None and req.marker.evaluate({"extra": extra}) and not req.marker.evaluate({"extra": ""}):
            req.marker = None
            found.append(str(req))
    return found or [fallback]


@cache
def _provided() -> frozenset[str]:
    """The distributions every env has: torch, pytest-scaledmm and what they require (not their extras)."""
    names = set(_INSTALLED_WITH)
    for dist in _INSTALLED_WITH:
        names.update(req.name for req in _requirements(dist) if req.marker is None or "extra" not in str(req.marker))
    return frozenset(canonicalize_name(name) for name in names)


@cache
def _distributions() -> Mapping[str, Any]:
    """Top-level module -> the installed distributions that provide it (Python 3.10+)."""
    find = getattr(importlib.metadata, "packages_distributions", None)
    return find() if find is not None else {}
