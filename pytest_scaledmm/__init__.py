"""pytest-scaledmm: a compatibility matrix for quantized matmuls, eager vs torch.compile."""

__version__ = "0.1.0"
