"""The kernels plugins and conftests declare through ``pytest_scaledmm_kernels`` (hookspecs.py)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import fields, is_dataclass

import pytest

from ..matrix.errors import MatrixError
from ..matrix.spec import KernelSpec, kernel_from_declaration

HOOK = "pytest_scaledmm_kernels"


def _answers(config: pytest.Config) -> list[tuple[str, object]]:
    """(where, answer) of each implementation that answered, in pluggy's order. Each plugin is
    asked through pluggy, by a caller without the others: its answer keeps its name even beside
    a plugin that answers None (which a call of the whole hook drops)."""
    impls = [i for i in reversed(getattr(config.hook, HOOK).get_hookimpls()) if not (i.hookwrapper or i.wrapper)]
    plugins = [impl.plugin for impl in impls]
    found = []
    for impl in impls:
        others = [plugin for plugin in plugins if plugin is not impl.plugin]
        caller = config.pluginmanager.subset_hook_caller(HOOK, remove_plugins=others)
        where = f"{HOOK} in {impl.plugin_name}"
        try:
            answers = caller(config=config)
        except (pytest.UsageError, pytest.exit.Exception):  # the plugin's own word to pytest
            raise
        except Exception as exc:  # the plugin's own code failed: one usage error naming where
            raise MatrixError(where, "", _failure(exc, impl.function)) from None
        found += [(where, answer) for answer in answers]
    return found


def _failure(exc: Exception, hook: Callable[..., object]) -> str:
    """'raised Type: message (at file:line)' on one line; the line is the innermost one in the
    hook's own file (the user's call, not a library's frame beneath it)."""
    message = " / ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    text = f"raised {type(exc).__name__}" + (f": {message}" if message else "")
    hook_file = getattr(getattr(hook, "__code__", None), "co_filename", None)
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == hook_file]
    return text + (f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else "")


def declared_kernels(config: pytest.Config) -> list[KernelSpec]:
    """KernelSpecs from every pytest_scaledmm_kernels implementation, in pluggy's order (as every
    pytest hook: the latest registered first, so a conftest's kernels come before an installed
    plugin's); a bad declaration is a MatrixError naming the plugin that made it."""
    found = []
    seen: dict[str, str] = {}
    for where, answer in _answers(config):
        if not isinstance(answer, (list, tuple)):
            raise MatrixError(where, "", f"must return a list of kernels, got {type(answer).__name__}")
        for index, item in enumerate(answer):
            # Not asdict(): it deep-copies, and a custom op object must stay itself.
            instance = is_dataclass(item) and not isinstance(item, type)  # Kernel(...), not the class
            entry = {f.name: getattr(item, f.name) for f in fields(item)} if instance else item
            if not isinstance(entry, dict):
                raise MatrixError(where, f"[{index}]", f"not a Kernel or dict: {item!r}")
            # None is "not declared", but for the name, which is then given and wrong.
            entry = {
                k: (list(v) if isinstance(v, tuple) else v) for k, v in entry.items() if v is not None or k == "name"
            }
            fn, prepare, module = (entry.pop(name, None) for name in ("fn", "prepare", "module"))
            kernel = kernel_from_declaration(where, index, entry, fn, prepare, module)
            if kernel.name in seen:
                raise MatrixError(
                    where, f"[{index}].name", f"kernel {kernel.name!r} is also declared by {seen[kernel.name]}"
                )
            seen[kernel.name] = where
            found.append(kernel)
    return found
