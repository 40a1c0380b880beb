"""Hook specifications of pytest-scaledmm, and how their answers become kernels.

A conftest.py (at the rootdir, so that it is loaded before the matrix is read) or an installed
plugin implements::

    def pytest_scaledmm_kernels(config):
        from pytest_scaledmm.matrix.kernels import Kernel
        return [Kernel("my_fp8_linear", my_fp8_linear, scale_forms=["tensor_0d", "tensor_1d"])]

Declared kernels join every matrix run of that session: a matrix may name them (and narrow
them with its own keys) and otherwise they are appended after its kernels.
"""

from __future__ import annotations

from typing import Any

import pytest

hookspec = pytest.hookspec


@hookspec
def pytest_scaledmm_kernels(config: pytest.Config) -> Any:
    """Return kernels to put through the matrix: a list of
    :class:`pytest_scaledmm.matrix.kernels.Kernel` or of dicts with the same keys (``name``, ``fn``,
    and optionally ``family``, ``scale_forms``, ``dtypes``, ``archs``, ``min_torch`` and the
    shape limits ``min_m``, ``max_m``, ``m_multiple``, ``k_multiple``, ``n_multiple``).

    Called once per process (controller and every xdist worker) while the matrix is read. The
    answer must be the same in every process: no hardware or version checks here; declare
    ``archs`` / ``min_torch`` instead, which skip cases at run time.
    """


def declared_kernels(config) -> list:
    """KernelSpecs from every pytest_scaledmm_kernels implementation, in plugin order; a bad
    declaration is a MatrixError naming the plugin that made it."""
    from dataclasses import fields, is_dataclass

    from ..matrix.errors import MatrixError
    from ..matrix.spec import kernel_from_declaration

    found = []
    seen: dict[str, str] = {}
    hook = config.hook.pytest_scaledmm_kernels
    for impl in reversed(hook.get_hookimpls()):  # registration order, earliest first
        where = f"pytest_scaledmm_kernels in {impl.plugin_name}"
        answer = impl.function(config=config) if "config" in impl.argnames else impl.function()
        if answer is None:
            continue
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
