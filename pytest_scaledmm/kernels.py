"""The kernels users import: ``Kernel`` (a declaration for the ``pytest_scaledmm_kernels`` hook),
the built-in kernels the matrix names, and ``custom_op``. This module is the stable path; the
implementation lives in ``pytest_scaledmm.matrix.kernels``, which may move.

Any other name of that module still resolves here, with a DeprecationWarning: user code written
against the older layout keeps working for a release.
"""

from __future__ import annotations

import importlib
import warnings

from .matrix.kernels import (
    BUILTIN_IMPLS,
    Kernel,
    aten_scaled_mm,
    custom_op,
    fp8_linear,
    fp8_linear_no_lift,
    fp8_linear_rowwise,
    int8_bmm,
    int8_w8a8,
    scaled_grouped_mm,
    scaled_mm_v2,
    scaled_mm_v2_functional,
)

__all__ = [
    "BUILTIN_IMPLS",
    "Kernel",
    "aten_scaled_mm",
    "custom_op",
    "fp8_linear",
    "fp8_linear_no_lift",
    "fp8_linear_rowwise",
    "int8_bmm",
    "int8_w8a8",
    "scaled_grouped_mm",
    "scaled_mm_v2",
    "scaled_mm_v2_functional",
]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        value = getattr(importlib.import_module("pytest_scaledmm.matrix.kernels"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    warnings.warn(
        f"pytest_scaledmm.kernels.{name} is internal: import it from pytest_scaledmm.matrix.kernels "
        "(the public names are in pytest_scaledmm.kernels.__all__)",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
