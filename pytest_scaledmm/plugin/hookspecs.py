"""Hook specifications of pytest-scaledmm (their answers become kernels in declared.py).

A conftest.py (at the rootdir, so that it is loaded before the matrix is read) or an installed
plugin implements::

    def pytest_scaledmm_kernels(config):
        from pytest_scaledmm import Kernel
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
    :class:`pytest_scaledmm.Kernel` or of dicts with the same keys (``name``, ``fn``,
    and optionally ``family``, ``scale_forms``, ``dtypes``, ``archs``, ``min_torch`` and the
    shape limits ``min_m``, ``max_m``, ``m_multiple``, ``k_multiple``, ``n_multiple``).

    Called once per process (controller and every xdist worker) while the matrix is read. The
    answer must be the same in every process: no hardware or version checks here; declare
    ``archs`` / ``min_torch`` instead, which skip cases at run time.
    """
