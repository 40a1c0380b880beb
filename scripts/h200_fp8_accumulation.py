"""fp8e4m3xe5m2-s0d_x_blk-m33k32n128-fp32 (noncontiguous scale) missed the reference eagerly on an H200:
is it the scale (rank, layout) or the fp8 matmul itself? Prints the miss for each scale variant
and for an fp32 matmul of the same dequantised data. Run on a GPU: python scripts/h200_fp8_accumulation.py"""

import torch

from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.reference import reference

CASE_ID = "fp8e4m3xe5m2-s0d_x_blk-m33k32n128-fp32-dynamic-nc-9b046d"
params = {
    "kernel": "aten_scaled_mm",
    "special_scale": "none",
    "dtype_a": "e4m3fn",
    "dtype_b": "e5m2",
    "out_dtype": "fp32",
    "bias": False,
    "use_fast_accum": False,
    "mode": "dynamic",
    "scale_layout": "noncontiguous",
    "activation_rank": 2,
    "scale_a": "tensor_0d",
    "scale_b": "blockwise",
    "m": 33,
    "k": 32,
    "n": 128,
}
record = CaseParams.from_json(params)
x = make_inputs(record, 905165312, "cuda:0")
ref = reference(record, x)
sb = x.scale_b
print(
    "scale_a", x.scale_a.item(), "scale_b", sb.item(), tuple(sb.shape), sb.stride(), "b", tuple(x.b.shape), x.b.stride()
)
variants = {
    "as run (nc [1,1] stride 2,2)": sb,
    "contiguous [1,1]": sb.contiguous(),
    "0-D": sb.reshape(()).contiguous(),
    "[1]": sb.reshape(1).contiguous(),
}
for name, s in variants.items():
    for layout in ("params", "both-0D"):
        sa = x.scale_a if layout == "params" else x.scale_a.reshape(())
        try:
            out = torch._scaled_mm(x.a, x.b, sa, s, out_dtype=torch.float32).double().cpu()
        except Exception as exc:
            print(f"{name:32} {layout}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            continue
        err = (out - ref.value).abs()
        ratio = (out / ref.value)[ref.value.abs() > 1e-3]
        print(
            f"{name:32} {layout}: max|err|/tol {float((err / ref.tolerance).max()):.3g}  "
            f"out/ref median {float(ratio.median()):.6f} min {float(ratio.min()):.4f} max {float(ratio.max()):.4f}"
        )
# Same data without fp8 kernels: dequantise in fp32 on the GPU.
deq = (x.a.float() * x.scale_a) @ (x.b.float() * sb.reshape(()))
print("fp32 dequant matmul: max|err|/tol", float(((deq.double().cpu() - ref.value).abs() / ref.tolerance).max()))
