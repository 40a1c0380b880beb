"""Inputs of one case and its float64 dequantised reference.

Every tensor is drawn on the CPU from a generator seeded by the case id and then moved, so the
same case sees the same numbers on any device and in any process; nothing is zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

FP8_TORCH_NAMES = {
    "e4m3fn": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
}
OUT_TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Unit roundoff of each output dtype; u of the accumulator, fp32 or the reduced fast-accum path.
OUT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": 2.0**-24}
ACC_ROUNDOFF = 2.0**-23
FAST_ACC_ROUNDOFF = 2.0**-13
BLOCK = 128


def torch_dtype(name: str):
    import torch

    if name == "int8":
        return torch.int8
    attr = FP8_TORCH_NAMES.get(name) or OUT_TORCH_NAMES[name]
    return getattr(torch, attr, None)


@dataclass
class CaseInputs:
    a: Any
    b: Any
    scale_a: Any
    scale_b: Any
    bias: Optional[Any]
    out_dtype: Any
    use_fast_accum: bool

    def args(self):
        return (self.a, self.b, self.scale_a, self.scale_b, self.bias)


def _scale_tensor(form: str, side: str, m: int, k: int, n: int, generator):
    import torch

    def draw(*shape):
        # A spread over several powers of two, so a scale applied on the wrong axis shows.
        exponents = torch.randint(-2, 3, shape, generator=generator)
        return torch.pow(2.0, exponents.float()) * (1 + torch.rand(shape, generator=generator) * 0.5)

    kb, nb, mb = math.ceil(k / BLOCK), math.ceil(n / BLOCK), m
    if form == "tensor_0d":
        return draw(1).reshape(())
    if form == "tensor_1d":
        return draw(1)
    if form == "tensor_1x1":
        return draw(1, 1)
    if form == "rowwise":
        return draw(m, 1) if side == "a" else draw(1, n)
    if form == "blockwise":
        # 1x128 for a: (M, K/128) outer-dim-major; 128x128 for b: (K/128, N/128) with strides (1, K/128).
        return draw(kb, mb).t() if side == "a" else draw(nb, kb).t()
    raise ValueError(form)


def make_inputs(params: Mapping[str, Any], seed: int, device: str) -> CaseInputs:
    import torch

    generator = torch.Generator().manual_seed(seed)
    m, k, n = params["m"], params["k"], params["n"]
    dtype_a, dtype_b = torch_dtype(params["dtype_a"]), torch_dtype(params["dtype_b"])
    if params["dtype_a"] == "int8":
        a = torch.randint(-127, 128, (m, k), generator=generator, dtype=torch.int8)
        b = torch.randint(-127, 128, (n, k), generator=generator, dtype=torch.int8).t()
    else:
        a = (torch.randn(m, k, generator=generator) * 2).to(dtype_a)
        b = (torch.randn(n, k, generator=generator) * 2).to(dtype_b).t()  # K x N, column-major
    scale_a = _scale_tensor(params["scale_a"], "a", m, k, n, generator)
    scale_b = _scale_tensor(params["scale_b"], "b", m, k, n, generator)
    out_dtype = torch_dtype(params["out_dtype"])
    bias = torch.randn(n, generator=generator).to(out_dtype) if params.get("bias") else None

    def move(t):
        # Keep strides (column-major b, outer-dim-major block scales) across the move.
        if t is None or device == "cpu":
            return t
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device).copy_(t)

    return CaseInputs(move(a), move(b), move(scale_a), move(scale_b), move(bias), out_dtype, bool(params.get("use_fast_accum")))


def _expand_scale(scale, form: str, side: str, rows: int, cols: int):
    """The scale as a float64 (rows x cols) multiplier of the operand it dequantises."""
    import torch

    s = scale.detach().to("cpu", torch.float64)
    if form.startswith("tensor"):
        return s.reshape(()).expand(rows, cols)
    if form == "rowwise":
        return s.reshape(rows, 1).expand(rows, cols) if side == "a" else s.reshape(1, cols).expand(rows, cols)
    if form == "blockwise":
        if side == "a":  # rows=M, cols=K, one scale per 1x128
            return s.repeat_interleave(BLOCK, dim=1)[:, :cols]
        return s.repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)[:rows, :cols]
    raise ValueError(form)


@dataclass
class Reference:
    value: Any  # float64 M x N
    tolerance: Any  # float64 M x N, elementwise bound on |out - value|


def reference(params: Mapping[str, Any], inputs: CaseInputs, slack: float = 1.0) -> Reference:
    """Dequantise in float64 and bound the error an fp32-accumulating kernel may make:
    slack * (2*u_out*mag + K*u_acc*mag) + tiny, where mag = |A|@|B| + |bias|."""
    import torch

    m, k, n = params["m"], params["k"], params["n"]
    a = inputs.a.detach().to("cpu").to(torch.float64) * _expand_scale(inputs.scale_a, params["scale_a"], "a", m, k)
    b = inputs.b.detach().to("cpu").to(torch.float64) * _expand_scale(inputs.scale_b, params["scale_b"], "b", k, n)
    value = a @ b
    magnitude = a.abs() @ b.abs()
    if inputs.bias is not None:
        bias = inputs.bias.detach().to("cpu", torch.float64)
        value = value + bias
        magnitude = magnitude + bias.abs()
    u_out = OUT_ROUNDOFF[params["out_dtype"]]
    u_acc = FAST_ACC_ROUNDOFF if params.get("use_fast_accum") else ACC_ROUNDOFF
    tiny = torch.finfo(inputs.out_dtype).tiny
    tolerance = slack * (2 * u_out * magnitude + k * u_acc * magnitude) + tiny
    return Reference(value, tolerance)


def compare(out, ref: Reference, expected_shape, expected_dtype) -> dict:
    """How far one output is from the reference; ratio > 1 means outside the tolerance."""
    import torch

    if not isinstance(out, torch.Tensor):
        return {"ok": False, "problem": f"returned {type(out).__name__}, not a Tensor", "ratio": math.inf}
    if tuple(out.shape) != tuple(expected_shape):
        return {"ok": False, "problem": f"shape {tuple(out.shape)}, expected {tuple(expected_shape)}", "ratio": math.inf}
    if out.dtype != expected_dtype:
        return {"ok": False, "problem": f"dtype {out.dtype}, expected {expected_dtype}", "ratio": math.inf}
    got = out.detach().to("cpu", torch.float64).reshape(ref.value.shape)
    diff = (got - ref.value).abs()
    diff = torch.where(torch.isnan(got), torch.full_like(diff, math.inf), diff)
    ratio = (diff / ref.tolerance).max().item() if diff.numel() else 0.0
    max_abs = diff.max().item() if diff.numel() else 0.0
    rel = (diff / ref.value.abs().clamp_min(1e-30)).max().item() if diff.numel() else 0.0
    return {"ok": ratio <= 1.0, "ratio": ratio, "max_abs": max_abs, "max_rel": rel}
