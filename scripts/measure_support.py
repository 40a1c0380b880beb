"""Measure what the built-in kernels accept eagerly on this machine: the facts behind the support
model (pytest_scaledmm/matrix/support.py).

Runs each built-in kernel once per configuration, eagerly (no compile), over scale pairs,
layouts, shape classes, dtype pairs, output dtypes, bias and fast accumulation, and writes one
line per configuration: the parameters and "ok" or the documented refusal it raised (its key in
verdict/refusals.py), or the raw error. Needs only torch and this checkout:

    PYTHONPATH=. python scripts/measure_support.py --device cuda --out support-sm90.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.outcome import describe_exception
from pytest_scaledmm.verdict.refusals import matching_refusal

FORMS = ["tensor_0d", "tensor_1d", "tensor_1x1", "rowwise", "blockwise"]
PER_TENSOR = FORMS[:3]
EPILOGUE = FORMS[:4]
LAYOUTS = ["contiguous", "noncontiguous", "offset", "expanded"]
BASE = {
    "dtype_a": "e4m3fn",
    "dtype_b": "e4m3fn",
    "out_dtype": "bf16",
    "bias": False,
    "use_fast_accum": False,
    "scale_layout": "contiguous",
    "activation_rank": 2,
    "special_scale": "none",
}


def configurations():
    fp8 = ("aten_scaled_mm", "scaled_mm_v2")
    # Scale pairs x layouts x shapes, e4m3 x e4m3 to bf16.
    for kernel in fp8:
        for sa, sb, layout, m, k, n in itertools.product(
            FORMS, FORMS, LAYOUTS, (1, 7, 17, 256), (64, 128, 144, 256), (64, 128, 160, 256)
        ):
            yield {
                **BASE,
                "kernel": kernel,
                "scale_a": sa,
                "scale_b": sb,
                "scale_layout": layout,
                "m": m,
                "k": k,
                "n": n,
            }
    # Alignment of K and N.
    for kernel in fp8:
        for (sa, sb), m, k, n in itertools.product(
            (("tensor_0d", "tensor_0d"), ("rowwise", "rowwise"), ("blockwise", "blockwise")),
            (1, 17),
            (24, 40, 136, 200, 256),
            (24, 40, 136, 200, 256),
        ):
            yield {**BASE, "kernel": kernel, "scale_a": sa, "scale_b": sb, "m": m, "k": k, "n": n}
    # dtypes, output dtype, bias, fast accumulation.
    for kernel in fp8:
        for (sa, sb), da, db, out, bias, fast, (m, k, n) in itertools.product(
            (
                ("tensor_0d", "tensor_0d"),
                ("tensor_1d", "tensor_1x1"),
                ("rowwise", "rowwise"),
                ("blockwise", "blockwise"),
            ),
            ("e4m3fn", "e5m2"),
            ("e4m3fn", "e5m2"),
            ("bf16", "fp16", "fp32"),
            (False, True),
            (False, True),
            ((17, 256, 128), (33, 128, 64), (1, 144, 160)),
        ):
            yield {
                **BASE,
                "kernel": kernel,
                "scale_a": sa,
                "scale_b": sb,
                "dtype_a": da,
                "dtype_b": db,
                "out_dtype": out,
                "bias": bias,
                "use_fast_accum": fast,
                "m": m,
                "k": k,
                "n": n,
            }
    # The serving-framework wrapper: per-tensor forms, 3-D tokens.
    for sa, sb, layout, rank, m, k, n, out, bias in itertools.product(
        PER_TENSOR, PER_TENSOR, LAYOUTS, (2, 3), (1, 17, 256), (64, 144), (64, 160), ("bf16", "fp32"), (False, True)
    ):
        yield {
            **BASE,
            "kernel": "fp8_linear",
            "scale_a": sa,
            "scale_b": sb,
            "scale_layout": layout,
            "activation_rank": rank,
            "m": m,
            "k": k,
            "n": n,
            "out_dtype": out,
            "bias": bias,
        }
    # int8: _int_mm's shape limits, then the epilogue's scale forms.
    int8 = {**BASE, "kernel": "int8_w8a8", "dtype_a": "int8", "dtype_b": "int8"}
    for m, k, n in itertools.product((1, 8, 16, 17, 33, 256), (16, 24, 32, 36, 128, 144), (16, 24, 32, 40, 128, 160)):
        yield {**int8, "scale_a": "rowwise", "scale_b": "rowwise", "m": m, "k": k, "n": n}
    for sa, sb, layout, out, bias in itertools.product(
        EPILOGUE, EPILOGUE, LAYOUTS, ("bf16", "fp16", "fp32"), (False, True)
    ):
        yield {
            **int8,
            "scale_a": sa,
            "scale_b": sb,
            "scale_layout": layout,
            "out_dtype": out,
            "bias": bias,
            "m": 33,
            "k": 144,
            "n": 160,
        }


def outcome(params, device):
    kernel = BUILTIN_IMPLS[params["kernel"]]
    try:
        inputs = make_inputs(CaseParams.from_json(params), 1, device)
        kernel(
            inputs.a,
            inputs.b,
            inputs.scale_a,
            inputs.scale_b,
            bias=inputs.bias,
            out_dtype=inputs.out_dtype,
            use_fast_accum=inputs.use_fast_accum,
        )
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        return "ok"
    except Exception as exc:
        info = describe_exception(exc)
        refusal = matching_refusal(info, params["kernel"])
        if refusal is not None:
            return refusal.key
        return f"?{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import torch

    started = time.time()
    rows = [[p, outcome(p, args.device)] for p in configurations()]
    arch = "cpu"
    if args.device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(args.device))
        arch = f"sm{props.major}{props.minor}"
    with open(args.out, "w") as handle:
        json.dump(
            {"torch": torch.__version__, "arch": arch, "seconds": round(time.time() - started, 1), "rows": rows}, handle
        )
    print(f"{len(rows)} configurations in {time.time() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
