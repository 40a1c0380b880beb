"""Inputs of one case, its expected output shape and its float64 dequantised reference.

Every tensor is drawn on the CPU from a generator seeded by the case id and then moved, so the
same case sees the same numbers on any device and in any process; nothing is zeros.

Layout axes change how the same values are laid out, never the values (except `expanded`, which
repeats one value): `scale_layout` applies to both scales, `activation_rank` to `a`, and
`special_scale` writes one special value into the first element of `scale_a`.
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
# Unit roundoff of each output dtype, and of the accumulator: fp32 (int8 accumulates exactly in
# int32; the CPU emulates fp8 with fp32 sums), or reduced, ~14 mantissa bits, for fp8 products on
# GPU tensor cores with use_fast_accum, and on Hopper without it too within a chain of K products
# (cuBLAS promotes to fp32 only between chunks of K): on an H200, fp32-out cases with K <= 128
# missed a 2^-23 bound by 4-19x with every scale rank and layout, while an fp32 matmul of the
# same dequantised data met it.
OUT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": 2.0**-24}
ACC_ROUNDOFF = 2.0**-23
REDUCED_ACC_ROUNDOFF = 2.0**-13
BLOCK = 128
SPECIAL_VALUES = {"zero": 0.0, "inf": math.inf, "nan": math.nan}  # "negative" negates the element


def torch_dtype(name: str):
    import torch

    if name == "int8":
        return torch.int8
    attr = FP8_TORCH_NAMES.get(name) or OUT_TORCH_NAMES[name]
    return getattr(torch, attr, None)


def activation_batches(params: Mapping[str, Any]) -> int:
    """A 3-D activation is (B, M/B, K) with B = 2 when M is even, else B = 1 (so M = 1 and odd M
    still get a 3-D tensor)."""
    if params.get("activation_rank", 2) != 3:
        return 0
    return 2 if params["m"] % 2 == 0 else 1


def expected_shape(params: Mapping[str, Any]) -> tuple:
    """(M, N) for 2-D activations, (B, M/B, N) for 3-D ones: the leading dims of `a` are kept."""
    m, n = params["m"], params["n"]
    batches = activation_batches(params)
    return (batches, m // batches, n) if batches else (m, n)


@dataclass
class CaseInputs:
    a: Any
    b: Any
    scale_a: Any
    scale_b: Any
    bias: Optional[Any]
    out_dtype: Any
    use_fast_accum: bool
    finite_scale_a: Any = None  # scale_a before the special value, for tolerances; on the CPU

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


def _with_special(scale, special: str):
    if special == "none":
        return scale
    scale = scale.clone()
    first = (0,) * scale.dim()
    scale[first] = -scale[first] if special == "negative" else SPECIAL_VALUES[special]
    return scale


def _extent(t) -> int:
    """Elements of storage a view spans from its first element."""
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()) if size > 0)


def lay_out(t, layout: str):
    """The same scale values in another memory layout, on the same device. Unused storage is NaN,
    so a kernel that reads past a view's strides or offset produces NaN, not a near miss.

    - noncontiguous: every stride doubled, as a strided slice of a wider tensor;
    - offset: the same strides starting one shard into the storage, as tensor-parallel rank 1
      of 2 sees its slice of a sharded scale;
    - expanded: stride 0 everywhere: one value broadcast to the form's shape (per-tensor scale
      expanded to rowwise, as frameworks do); a 0-D scale stays as it is.
    """
    import torch

    if layout == "contiguous":
        return t
    if layout == "expanded":
        return t.reshape(-1)[0].clone().expand(t.shape) if t.dim() else t
    extent = _extent(t)
    if layout == "offset":
        buffer = torch.full((2 * extent,), math.nan, dtype=t.dtype, device=t.device)
        view = buffer.as_strided(t.shape, t.stride(), extent)
    elif layout == "noncontiguous":
        buffer = torch.full((2 * extent,), math.nan, dtype=t.dtype, device=t.device)
        view = buffer.as_strided(t.shape, tuple(2 * s for s in t.stride()), 0)
    else:
        raise ValueError(layout)
    view.copy_(t)
    return view


def _move(t, device: str):
    """To the device, keeping strides (column-major b, outer-dim-major block scales)."""
    import torch

    if t is None or device == "cpu":
        return t
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device).copy_(t)


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
    if params["dtype_a"] == "int8":
        # int8 values span +-127, so dequantisation scales are ~1/127 (absmax / 127 in practice);
        # larger ones overflow fp16 outputs for any K worth testing.
        scale_a, scale_b = scale_a / 127, scale_b / 127
    out_dtype = torch_dtype(params["out_dtype"])
    bias = None
    if params.get("bias"):
        # On the scale of the output (entries of a and b have std 2): a smaller bias would sit
        # below a bf16 output's resolution and a kernel that drops it would pass.
        spread = 4 * math.sqrt(k) * scale_a.abs().mean() * scale_b.abs().mean()
        bias = (torch.randn(n, generator=generator) * spread).to(out_dtype)

    layout = params.get("scale_layout", "contiguous")
    if layout == "expanded":  # the reference must see the repeated value too
        scale_a, scale_b = lay_out(scale_a, layout).clone(), lay_out(scale_b, layout).clone()
    finite_scale_a = scale_a
    scale_a = _with_special(scale_a, params.get("special_scale", "none"))
    batches = activation_batches(params)
    a = _move(a, device)
    if batches:
        a = a.view(batches, m // batches, k)
    return CaseInputs(
        a,
        _move(b, device),
        lay_out(_move(scale_a, device), layout),
        lay_out(_move(scale_b, device), layout),
        _move(bias, device),
        out_dtype,
        bool(params.get("use_fast_accum")),
        finite_scale_a,
    )


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


def reference(params: Mapping[str, Any], inputs: CaseInputs, slack: float = 1.0, scale_a=None) -> Reference:
    """Dequantise in float64 and bound the error an fp32-accumulating kernel may make:
    slack * (2*u_out*mag + K*u_acc*mag) + tiny, where mag = |A|@|B| + |bias|. A 3-D activation
    is flattened to M tokens. `scale_a` replaces the case's (the finite one, for tolerances)."""
    import torch

    m, k, n = params["m"], params["k"], params["n"]
    scale_a = inputs.scale_a if scale_a is None else scale_a
    a = inputs.a.detach().to("cpu").reshape(m, k).to(torch.float64) * _expand_scale(scale_a, params["scale_a"], "a", m, k)
    b = inputs.b.detach().to("cpu").to(torch.float64) * _expand_scale(inputs.scale_b, params["scale_b"], "b", k, n)
    value = a @ b
    magnitude = a.abs() @ b.abs()
    if inputs.bias is not None:
        bias = inputs.bias.detach().to("cpu", torch.float64)
        value = value + bias
        magnitude = magnitude + bias.abs()
    u_out = OUT_ROUNDOFF[params["out_dtype"]]
    fp8_on_gpu = inputs.a.device.type != "cpu" and (
        params.get("dtype_a") in FP8_TORCH_NAMES or params.get("dtype_b") in FP8_TORCH_NAMES
    )
    u_acc = REDUCED_ACC_ROUNDOFF if fp8_on_gpu or params.get("use_fast_accum") else ACC_ROUNDOFF
    tiny = torch.finfo(inputs.out_dtype).tiny
    tolerance = slack * (2 * u_out * magnitude + k * u_acc * magnitude) + tiny
    return Reference(value, tolerance)


def check_metadata(out, expected_shape, expected_dtype) -> Optional[dict]:
    """A failed check when `out` is not a tensor of the expected shape and dtype, else None."""
    import torch

    if not isinstance(out, torch.Tensor):
        return {"ok": False, "problem": f"returned {type(out).__name__}, not a Tensor", "ratio": math.inf}
    if tuple(out.shape) != tuple(expected_shape):
        return {"ok": False, "problem": f"shape {tuple(out.shape)}, expected {tuple(expected_shape)}", "ratio": math.inf}
    if out.dtype != expected_dtype:
        return {"ok": False, "problem": f"dtype {out.dtype}, expected {expected_dtype}", "ratio": math.inf}
    return None


def compare(out, ref: Reference, expected_shape, expected_dtype) -> dict:
    """How far one output is from the reference; ratio > 1 means outside the tolerance."""
    import torch

    bad = check_metadata(out, expected_shape, expected_dtype)
    if bad:
        return bad
    got = out.detach().to("cpu", torch.float64).reshape(ref.value.shape)
    diff = (got - ref.value).abs()
    diff = torch.where(torch.isnan(got), torch.full_like(diff, math.inf), diff)
    # Past the output dtype's range the right answer is a saturated value of the same sign.
    limit = torch.finfo(expected_dtype).max
    overflow = ref.value.abs() > limit
    saturated = (got.abs() >= limit) & (torch.sign(got) == torch.sign(ref.value))
    diff = torch.where(overflow, torch.where(saturated, torch.zeros_like(diff), torch.full_like(diff, math.inf)), diff)
    ratio = (diff / ref.tolerance).max().item() if diff.numel() else 0.0
    max_abs = diff.max().item() if diff.numel() else 0.0
    rel = (diff / ref.value.abs().clamp_min(1e-30)).max().item() if diff.numel() else 0.0
    return {"ok": ratio <= 1.0, "ratio": ratio, "max_abs": max_abs, "max_rel": rel}


def parity(eager_out, compiled_out, tolerance, expected_shape, expected_dtype) -> dict:
    """Compiled against eager, for special scale values where no reference number is meaningful:
    the same NaN positions, the same signed infinities, and finite values within twice the
    reference tolerance (computed from the finite scales)."""
    import torch

    bad = check_metadata(compiled_out, expected_shape, expected_dtype)
    if bad:
        return bad
    e = eager_out.detach().to("cpu", torch.float64).reshape(tolerance.shape)
    c = compiled_out.detach().to("cpu", torch.float64).reshape(tolerance.shape)
    counts = {"nan": int(torch.isnan(e).sum()), "inf": int(torch.isinf(e).sum())}
    if not torch.equal(torch.isnan(e), torch.isnan(c)):
        return {"ok": False, "problem": "NaN positions differ from eager", "ratio": math.inf, **counts}
    if not torch.equal(torch.where(torch.isinf(e), e, 0.0), torch.where(torch.isinf(c), c, 0.0)):
        return {"ok": False, "problem": "infinities differ from eager", "ratio": math.inf, **counts}
    finite = torch.isfinite(e)
    diff = torch.where(finite, (e - c).abs(), torch.zeros_like(e))
    ratio = (diff / (2 * tolerance)).max().item() if diff.numel() else 0.0
    max_abs = diff.max().item() if diff.numel() else 0.0
    ok = ratio <= 1.0
    result = {"ok": ok, "ratio": ratio, "max_abs": max_abs, "against": "eager", **counts}
    if not ok:
        result["problem"] = "finite values differ from eager"
    return result
