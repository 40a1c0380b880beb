"""Kernels on the weights-once and dynamic-activation contracts (verdict/contracts.py), each right
one beside a wrong twin with one realistic defect.

- a tensor-subclass weight (torchao's Float8Tensor) built by a prepare step, applied by F.linear;
  twin: the prepare step reverses the output channels' scales;
- a module factory (an nn.Module with fp8 buffers, calling torch._scaled_mm); twin: the module
  stores its weight scale in bf16;
- a dynamic per-token fp8 activation quantiser on the plain contract; twin: quantises with one
  scale for the whole tensor while dequantising per token;
- a prepare step that counts its calls (built once per case, serving loop included).
"""

import torch

PREPARED = []  # one entry per prepare call, for the test that counts them


def _float8_weight(b, scale, bias, out_dtype):
    from torchao.float8.inference import Float8MMConfig
    from torchao.quantization.granularity import PerRow
    from torchao.quantization.quantize_.workflows.float8.float8_tensor import Float8Tensor, QuantizeTensorToFloat8Kwargs

    k, n = b.shape
    weight = Float8Tensor(
        b.t(),
        scale,
        block_size=[1, k],
        mm_config=Float8MMConfig(use_fast_accum=False),
        act_quant_kwargs=QuantizeTensorToFloat8Kwargs(granularity=PerRow()),
        dtype=out_dtype,
    )
    return weight, bias


def subclass_weight(b, scale_b, *, bias=None, out_dtype):
    return _float8_weight(b, scale_b.reshape(-1, 1), bias, out_dtype)


def subclass_weight_reversed_scales(b, scale_b, *, bias=None, out_dtype):
    return _float8_weight(b, scale_b.reshape(-1, 1).flip(0).contiguous(), bias, out_dtype)


def linear(x, weight):
    tensor, bias = weight
    return torch.nn.functional.linear(x, tensor, bias)


class ScaledLinear(torch.nn.Module):
    """A serving layer: fp8 weight and its per-channel scale as buffers, per-token activations."""

    def __init__(self, b, scale_b, bias, out_dtype, scale_dtype=torch.float32):
        super().__init__()
        self.register_buffer("weight", b.t().contiguous())
        self.register_buffer("weight_scale", scale_b.reshape(1, -1).to(scale_dtype))
        self.register_buffer("bias", bias)
        self.out_dtype = out_dtype

    def forward(self, a, scale_a):
        tokens = a.reshape(-1, a.shape[-1])
        out = torch._scaled_mm(
            tokens,
            self.weight.t(),
            scale_a.reshape(-1, 1),
            self.weight_scale.float(),
            bias=self.bias,
            out_dtype=self.out_dtype,
        )
        return out.reshape(*a.shape[:-1], out.shape[-1])


def scaled_linear(b, scale_b, *, bias=None, out_dtype):
    return ScaledLinear(b, scale_b, bias, out_dtype)


def scaled_linear_bf16_scale(b, scale_b, *, bias=None, out_dtype):
    return ScaledLinear(b, scale_b, bias, out_dtype, scale_dtype=torch.bfloat16)


def _per_token(x, whole_tensor=False):
    tokens = x.reshape(-1, x.shape[-1]).float()
    amax = tokens.abs().amax(dim=-1, keepdim=True)
    scale = amax / 448.0
    quant_scale = scale.amax() if whole_tensor else scale
    q = (tokens / quant_scale.clamp_min(1e-30)).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q, scale


def dynamic_per_token(x, b, scale_b, *, bias=None, out_dtype):
    q, scale = _per_token(x)
    out = torch._scaled_mm(q, b, scale, scale_b.reshape(1, -1), bias=bias, out_dtype=out_dtype)
    return out.reshape(*x.shape[:-1], b.shape[-1])


def dynamic_per_token_whole_tensor(x, b, scale_b, *, bias=None, out_dtype):
    q, scale = _per_token(x, whole_tensor=True)
    out = torch._scaled_mm(q, b, scale, scale_b.reshape(1, -1), bias=bias, out_dtype=out_dtype)
    return out.reshape(*x.shape[:-1], b.shape[-1])


def counted_weight(b, scale_b, *, bias=None, out_dtype):
    PREPARED.append(tuple(b.shape))
    return b, scale_b.reshape(1, -1), bias


def counted_apply(a, scale_a, weight):
    b, scale_b, bias = weight
    return torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=torch.bfloat16)


def raising_weight(b, scale_b, *, bias=None, out_dtype):
    raise ValueError("this weight layout is not supported")
