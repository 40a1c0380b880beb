"""Implementations under test.

Kernel contract (the meaning of torch._scaled_mm): ``kernel(a, b, scale_a, scale_b, *, bias=None,
out_dtype, use_fast_accum=False) -> Tensor`` where ``a`` is M x K row-major, ``b`` is K x N
column-major and the scales are dequantisation multipliers: out = (a * scale_a) @ (b * scale_b) + bias.
"""

from __future__ import annotations

import importlib
from typing import Callable

from .spec import BUILTIN_KERNELS, KernelSpec, MatrixError

KernelFn = Callable[..., "object"]


def aten_scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """torch._scaled_mm; keywords work on every release, and before 2.5 it returned (out, amax)."""
    import torch

    out = torch._scaled_mm(
        a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum
    )
    return out[0] if isinstance(out, tuple) else out


def int8_w8a8(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """int8 W8A8: torch._int_mm (int32 accumulate) then the per-token / per-channel scale epilogue
    that Inductor fuses."""
    import torch

    out = torch._int_mm(a, b).to(torch.float32) * scale_a * scale_b
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


BUILTIN_IMPLS: dict[str, KernelFn] = {
    "aten_scaled_mm": aten_scaled_mm,
    "int8_w8a8": int8_w8a8,
}
assert set(BUILTIN_IMPLS) <= set(BUILTIN_KERNELS)


def load_impl(reference: str) -> KernelFn:
    module_name, _, attr_path = reference.partition(":")
    obj = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    if not callable(obj):
        raise TypeError(f"{reference} is not callable")
    return obj


def resolve_kernels(spec_path, kernels: tuple[KernelSpec, ...]) -> dict[str, KernelFn]:
    """Name -> callable for every kernel of the matrix; a kernel that cannot be loaded is a usage
    error naming the matrix key."""
    resolved = {}
    for index, kernel in enumerate(kernels):
        if kernel.impl is None:
            if kernel.name not in BUILTIN_IMPLS:
                raise MatrixError(spec_path, f"kernels[{index}]", f"built-in kernel {kernel.name!r} is not available")
            resolved[kernel.name] = BUILTIN_IMPLS[kernel.name]
            continue
        try:
            resolved[kernel.name] = load_impl(kernel.impl)
        except Exception as exc:  # any import-time failure of user code is reported, not raised
            raise MatrixError(
                spec_path, f"kernels[{index}].impl", f"cannot load {kernel.impl!r}: {type(exc).__name__}: {exc}"
            ) from None
    return resolved
