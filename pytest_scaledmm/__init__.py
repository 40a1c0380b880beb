"""pytest-scaledmm: a compatibility matrix for quantized matmuls, eager vs torch.compile.

The public API: ``Kernel`` (declare a kernel from a conftest or plugin), the built-in kernels in
``pytest_scaledmm.kernels``, and ``ScaledmmError``, the base of every error it raises for its
user (``MatrixError`` for a bad matrix file, ``ReportError`` for a report it cannot read).
"""

from __future__ import annotations

from .errors import ScaledmmError

__version__ = "0.1.0"

__all__ = ["Kernel", "MatrixError", "ReportError", "ScaledmmError", "__version__"]

# Resolved on first use, by name: the plugin imports this package at every pytest start, and
# modules of every layer import it (for __version__), so it imports none of them itself. A type
# checker reads them as the classes from __init__.pyi (shipped with py.typed).
_LAZY = {
    "Kernel": ("pytest_scaledmm.matrix.kernels", "Kernel"),
    "MatrixError": ("pytest_scaledmm.matrix.errors", "MatrixError"),
    "ReportError": ("pytest_scaledmm.reports.report", "ReportError"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415  lazy: see _LAZY

    module, attribute = _LAZY[name]
    # Not cached here: the module in sys.modules is the one source (pytester's in-process runs
    # drop and re-import modules).
    return getattr(importlib.import_module(module), attribute)


def __dir__() -> list[str]:
    return sorted(__all__)
