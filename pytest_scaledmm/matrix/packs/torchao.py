"""torchao's quantized matmuls, as its users reach them, on the harness's contracts
(verdict/contracts.py), with no tracing trick: weights are built once, eagerly, as `quantize_`
builds them, and only the call that uses them is compiled.

- `torchao_fp8_inference_tensorwise` / `_rowwise`: torchao.float8.inference's
  `addmm_float8_unwrapped_inference` (its float8 inference helper) on pre-quantised operands.
- `torchao_float8_weight_tensorwise` / `_rowwise` / `_blockwise`: `F.linear` on a `Float8Tensor`
  weight with dynamic float8 activation quantisation (what Float8DynamicActivationFloat8WeightConfig
  makes: PerTensor, PerRow, 128x128 weight blocks with 1x128 activation blocks).
- `torchao_int8_weight`: `F.linear` on an `Int8Tensor` weight, per-channel, with dynamic per-token
  symmetric int8 activations (Int8DynamicActivationInt8WeightConfig; its quantiser divides the
  amax by 127.5).
- `torchao_float8_training_mm`: `torch.mm` on two `Float8TrainingTensor`s (torchao.float8's
  training path, tensorwise).
- `torchao_float8_linear_module`: an `nn.Linear` whose weight is a `Float8Tensor` parameter (per
  row, dynamic activations), compiled as a module: a serving layer.

The weights wrap the case's own quantised data and scales (b is K x N; torchao's weight is its
N x K transpose), so the float64 reference is exact for them. Declarations follow torchao's
documentation: e4m3 float8 with fp32 scales, per-row scaling with bf16 activations, _scaled_mm's
multiples of 16; float8 on CPU torch and on GPUs from sm89 (and MI300).
"""

from __future__ import annotations

import logging
import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.version import InvalidVersion, Version

MODULE = __name__
LIBRARY = "torchao"
MIN_VERSION = "0.17.0"  # Float8Tensor and Int8Tensor with act_quant_kwargs, as used here
EXTRA = "torchao"  # pytest-scaledmm's extra that installs LIBRARY (pyproject.toml)
INSTALL = f'pip install "pytest-scaledmm[{EXTRA}]"'

_FP8_ARCHS = ["cpu", "sm89", "sm90", "sm100", "sm120", "gfx942", "gfx950"]
_TENSORWISE = ["tensor_0d", "tensor_1d", "tensor_1x1"]
_FP8_SHAPES = {"k_multiple": 16, "n_multiple": 16}
# What torchao's float8 callers pass: quantize_ and its Float8Tensor keep fp32 scales, and
# torch._scaled_mm refuses any other (bf16 and fp16 scales reach only a wrapper's error paths).
_FP32_SCALES = {"scale_dtypes": ["fp32"]}
# The helpers that take operands as given need b column-major (their callers run
# torchao.float8.inference.preprocess_data first); cuBLASLt refuses a row-major one.
_AS_GIVEN = {"operand_layouts": ["dense", "a_padded", "a_offset", "b_padded", "scale_on_host"]}

KERNELS: dict[str, dict] = {
    "torchao_fp8_inference_tensorwise": {
        "impl": f"{MODULE}:fp8_inference",
        "family": "fp8",
        "scale_forms": _TENSORWISE,
        "dtypes": ["e4m3fn"],
        **_FP32_SCALES,
        "archs": _FP8_ARCHS,
        **_FP8_SHAPES,
        **_AS_GIVEN,
    },
    "torchao_fp8_inference_rowwise": {
        "impl": f"{MODULE}:fp8_inference",
        "family": "fp8",
        "scale_forms": ["rowwise"],
        "dtypes": ["e4m3fn"],
        **_FP32_SCALES,
        "out_dtypes": ["bf16"],
        "archs": _FP8_ARCHS,
        **_FP8_SHAPES,
        **_AS_GIVEN,
    },
    "torchao_float8_weight_tensorwise": {
        "impl": f"{MODULE}:apply_linear",
        "prepare": f"{MODULE}:float8_weight_tensorwise",
        "activation": "dynamic",
        "family": "fp8",
        "scale_forms": _TENSORWISE,
        "dtypes": ["e4m3fn"],
        **_FP32_SCALES,
        "out_dtypes": ["bf16", "fp16", "fp32"],
        "archs": _FP8_ARCHS,
        **_FP8_SHAPES,
    },
    "torchao_float8_weight_rowwise": {
        "impl": f"{MODULE}:apply_linear",
        "prepare": f"{MODULE}:float8_weight_rowwise",
        "activation": "dynamic",
        "family": "fp8",
        "scale_forms": ["rowwise"],
        "dtypes": ["e4m3fn"],
        **_FP32_SCALES,
        "out_dtypes": ["bf16"],
        "archs": _FP8_ARCHS,
        **_FP8_SHAPES,
    },
    "torchao_float8_weight_blockwise": {
        "impl": f"{MODULE}:apply_linear",
        "prepare": f"{MODULE}:float8_weight_blockwise",
        "activation": "dynamic",
        "family": "fp8",
        "scale_forms": ["blockwise"],
        "dtypes": ["e4m3fn"],
        **_FP32_SCALES,
        "out_dtypes": ["bf16"],
        # blockwise_fp8_gemm is a Triton kernel: GPUs only.
        "archs": ["sm89", "sm90", "sm100", "sm120"],
        "k_multiple": 128,
        "n_multiple": 128,
    },
    "torchao_int8_weight": {
        "impl": f"{MODULE}:apply_linear",
        "prepare": f"{MODULE}:int8_weight",
        "activation": "dynamic",
        "activation_divisor": 127.5,
        "family": "int8",
        "scale_forms": ["rowwise"],
        "out_dtypes": ["bf16", "fp16", "fp32"],
    },
    "torchao_float8_training_mm": {
        "impl": f"{MODULE}:training_mm",
        "family": "fp8",
        "scale_forms": _TENSORWISE,
        "dtypes": ["e4m3fn"],
        **_FP32_SCALES,
        "out_dtypes": ["bf16", "fp16", "fp32"],
        "bias_out_dtypes": [],
        "archs": _FP8_ARCHS,
        **_FP8_SHAPES,
        **_AS_GIVEN,
    },
    "torchao_float8_linear_module": {
        "module": f"{MODULE}:float8_linear_module",
        "activation": "dynamic",
        "family": "fp8",
        "scale_forms": ["rowwise"],
        "dtypes": ["e4m3fn"],
        **_FP32_SCALES,
        "out_dtypes": ["bf16"],
        "archs": _FP8_ARCHS,
        **_FP8_SHAPES,
    },
}


def unavailable() -> str | None:
    """Why torchao's kernels cannot run here, with the install command; None when they can."""
    try:
        version = metadata.version(LIBRARY)
    except metadata.PackageNotFoundError:
        return f"torchao is not installed: {INSTALL}"
    try:
        too_old = Version(version) < Version(MIN_VERSION)
    except InvalidVersion:
        return f"torchao {version!r} has no readable version: {INSTALL}"
    if too_old:
        return f"torchao {version} is older than {MIN_VERSION}: {INSTALL}"
    try:
        import_torchao()
    except Exception as exc:  # a broken install is the environment's problem, not the kernel's
        return f"torchao {version} is installed but does not import ({type(exc).__name__}: {exc}): {INSTALL}"
    return None


# What torchao's import logs that the user did not cause: each prebuilt C extension that cannot
# load here (CUDA kernels, on a CPU or another CUDA), and torch's deprecation of the Enum
# registration torchao makes. (logger, message pattern): held back, the extensions summarised.
IMPORT_NOISE = (
    ("torchao", re.compile(r"^Failed to load (?P<file>\S+?): ")),
    ("torch.utils._pytree", re.compile(r"is an Enum subclass and is now natively supported")),
)
_NOT_LOADED: list[str] = []  # the C extensions torchao's import in this process could not load


class _HeldBack(logging.Filter):
    def __init__(self, pattern: re.Pattern) -> None:
        super().__init__()
        self.pattern = pattern
        self.held: list[re.Match] = []

    def filter(self, record: logging.LogRecord) -> bool:
        match = self.pattern.search(record.getMessage())
        if match:
            self.held.append(match)
        return match is None


def import_torchao():
    """torchao, imported without its import-time noise (IMPORT_NOISE; load_note says it in one
    line). Any other record, and an ImportError, are the caller's."""
    if "torchao" in sys.modules:
        return sys.modules["torchao"]
    held = [(logging.getLogger(name), _HeldBack(pattern)) for name, pattern in IMPORT_NOISE]
    for logger, noise in held:
        logger.addFilter(noise)
    try:
        import torchao  # noqa: PLC0415  optional dependency
    finally:
        for logger, noise in held:
            logger.removeFilter(noise)
    _NOT_LOADED[:] = [Path(match["file"]).name.split(".")[0] for match in held[0][1].held]  # IMPORT_NOISE[0]
    return torchao


def load_note() -> str | None:
    """One line for the C extensions torchao's import in this process could not load, or None."""
    if not _NOT_LOADED:
        return None
    return (
        f"torchao {metadata.version(LIBRARY)}: its optional C extension(s) {', '.join(_NOT_LOADED)} did not load"
        " on this machine (torchao imports without them; only a call into one would fail)"
    )


def fp8_inference(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """torchao.float8.inference.addmm_float8_unwrapped_inference, its scale_a shaped by the
    helper torchao uses for it (preprocess_scale); a 3-D activation flattened to tokens."""
    from torchao.float8.inference import addmm_float8_unwrapped_inference, preprocess_scale  # noqa: PLC0415  optional dependency

    tokens = a.reshape(-1, a.shape[-1])
    out = addmm_float8_unwrapped_inference(
        tokens,
        preprocess_scale(scale_a, tuple(a.shape)),
        b,
        scale_b,
        output_dtype=out_dtype,
        bias=bias,
        use_fast_accum=use_fast_accum,
    )
    return out.reshape(*a.shape[:-1], b.shape[-1])


def _float8_weight(b, scale, granularity, block_size, out_dtype, use_fast_accum):
    from torchao.float8.inference import Float8MMConfig  # noqa: PLC0415  optional dependency
    from torchao.quantization.quantize_.workflows.float8.float8_tensor import (  # noqa: PLC0415  optional dependency
        Float8Tensor,
        QuantizeTensorToFloat8Kwargs,
    )

    return Float8Tensor(
        b.t(),
        scale,
        block_size=list(block_size),
        mm_config=Float8MMConfig(use_fast_accum=use_fast_accum),
        act_quant_kwargs=QuantizeTensorToFloat8Kwargs(float8_dtype=b.dtype, granularity=granularity),
        dtype=out_dtype,
    )


def float8_weight_tensorwise(b, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """(Float8Tensor weight, bias): one scale, PerTensor activations."""
    from torchao.quantization.granularity import PerTensor  # noqa: PLC0415  optional dependency

    k, n = b.shape
    return _float8_weight(b, scale_b.reshape(1, 1), PerTensor(), (n, k), out_dtype, use_fast_accum), bias


def float8_weight_rowwise(b, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """(Float8Tensor weight, bias): one scale per output channel, PerRow activations."""
    from torchao.quantization.granularity import PerRow  # noqa: PLC0415  optional dependency

    k, n = b.shape
    return _float8_weight(b, scale_b.reshape(n, 1), PerRow(), (1, k), out_dtype, use_fast_accum), bias


def float8_weight_blockwise(b, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """(Float8Tensor weight, bias): 128x128 weight blocks, 1x128 activation blocks."""
    from torchao.quantization.granularity import PerBlock  # noqa: PLC0415  optional dependency

    return _float8_weight(b, scale_b.t(), PerBlock([1, 128]), (128, 128), out_dtype, use_fast_accum), bias


def int8_weight(b, scale_b, *, bias=None, out_dtype):
    """(Int8Tensor weight, bias): per-channel int8, dynamic per-token symmetric int8 activations."""
    from torchao.quantization.granularity import PerRow  # noqa: PLC0415  optional dependency
    from torchao.quantization.quantize_.workflows.int8.int8_tensor import Int8Tensor, QuantizeTensorToInt8Kwargs  # noqa: PLC0415  optional dependency

    k, n = b.shape
    weight = Int8Tensor(
        b.t().contiguous(),
        scale_b.reshape(n, 1).float(),
        [1, k],
        out_dtype,
        act_quant_kwargs=QuantizeTensorToInt8Kwargs(granularity=PerRow()),
    )
    return weight, bias


def apply_linear(x, weight):
    """F.linear on the built weight: the call a quantised model makes."""
    import torch  # noqa: PLC0415  torch: start-up time

    tensor, bias = weight
    return torch.nn.functional.linear(x, tensor, bias)


def training_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """torch.mm of two Float8TrainingTensors: their scales are what multiplies high precision into
    float8, the reciprocal of the dequantisation scales."""
    import torch  # noqa: PLC0415  torch: start-up time
    from torchao.float8.float8_training_tensor import Float8TrainingTensor, GemmInputRole, LinearMMConfig  # noqa: PLC0415  optional dependency

    if bias is not None:
        raise NotImplementedError("torchao's float8 training mm takes no bias")
    config = LinearMMConfig()
    tokens = a.reshape(-1, a.shape[-1])
    left = Float8TrainingTensor(tokens, scale_a.reshape(()).reciprocal(), out_dtype, config, GemmInputRole.INPUT)
    right = Float8TrainingTensor(b, scale_b.reshape(()).reciprocal(), out_dtype, config, GemmInputRole.WEIGHT)
    out = torch.mm(left, right)
    return out.reshape(*a.shape[:-1], b.shape[-1])


def float8_linear_module(b, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """An nn.Linear holding a Float8Tensor weight parameter (PerRow, dynamic activations), as
    quantize_ leaves a model's layer."""
    import torch  # noqa: PLC0415  torch: start-up time
    from torchao.quantization.granularity import PerRow  # noqa: PLC0415  optional dependency

    k, n = b.shape
    layer = torch.nn.Linear(k, n, bias=bias is not None, dtype=out_dtype, device=b.device)
    weight = _float8_weight(b, scale_b.reshape(n, 1), PerRow(), (1, k), out_dtype, use_fast_accum)
    layer.weight = torch.nn.Parameter(weight, requires_grad=False)
    if bias is not None:
        layer.bias = torch.nn.Parameter(bias.to(out_dtype), requires_grad=False)
    return layer
