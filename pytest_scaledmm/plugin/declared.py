"""The kernels plugins and conftests declare through ``pytest_scaledmm_kernels`` (hookspecs.py)."""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from ..matrix.errors import MatrixError
from ..matrix.spec import kernel_from_declaration


def _answer_sources(hook, answers: list) -> list[str]:
    """Where each answer came from, for messages: pluggy drops None answers, so plugin names pair
    with answers only when every implementation answered."""
    impls = [impl for impl in reversed(hook.get_hookimpls()) if not (impl.hookwrapper or impl.wrapper)]
    if len(impls) == len(answers):
        return [f"pytest_scaledmm_kernels in {impl.plugin_name}" for impl in impls]
    return [f"pytest_scaledmm_kernels answer {number}" for number in range(1, len(answers) + 1)]


def declared_kernels(config) -> list:
    """KernelSpecs from every pytest_scaledmm_kernels implementation, in pluggy's order (as every
    pytest hook: the latest registered first, so a conftest's kernels come before an installed
    plugin's); a bad declaration is a MatrixError naming the plugin that made it."""
    hook = config.hook.pytest_scaledmm_kernels
    answers = hook(config=config)
    found = []
    seen: dict[str, str] = {}
    for where, answer in zip(_answer_sources(hook, answers), answers):
        if not isinstance(answer, (list, tuple)):
            raise MatrixError(where, "", f"must return a list of kernels, got {type(answer).__name__}")
        for index, item in enumerate(answer):
            # Not asdict(): it deep-copies, and a custom op object must stay itself.
            entry = {f.name: getattr(item, f.name) for f in fields(item)} if is_dataclass(item) else item
            if not isinstance(entry, dict):
                raise MatrixError(where, f"[{index}]", f"not a Kernel or dict: {item!r}")
            entry = {k: (list(v) if isinstance(v, tuple) else v) for k, v in entry.items() if v is not None}
            fn, prepare, module = (entry.pop(name, None) for name in ("fn", "prepare", "module"))
            kernel = kernel_from_declaration(where, index, entry, fn, prepare, module)
            if kernel.name in seen:
                raise MatrixError(
                    where, f"[{index}].name", f"kernel {kernel.name!r} is also declared by {seen[kernel.name]}"
                )
            seen[kernel.name] = where
            found.append(kernel)
    return found
