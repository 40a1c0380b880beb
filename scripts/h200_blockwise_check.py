"""Blockwise scaled matmul on one GPU, checked against a float64 reference made here by hand
(independent of the plugin's oracle) and against the plugin's own bound: every pairing of the
1x128 / 128x128 recipes, the kernels that take them, eagerly and compiled, over a few shapes.
Where a result is off, says where: which row and column blocks hold the worst errors.

    python scripts/h200_blockwise_check.py > $OUT/blockwise.jsonl
"""

from __future__ import annotations

import itertools
import json
import sys

import torch

from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.reference import reference
from pytest_scaledmm.verdict.scale_forms import WHOLE, scale_form

PAIRINGS = [
    ("block1x128", "block128x128"),
    ("block128x128", "block1x128"),
    ("block1x128", "block1x128"),
    ("blockwise", "blockwise"),
]
KERNELS = ["scaled_mm_v2", "aten_scaled_mm"]
MODES = ["eager", "inductor", "max-autotune-no-cudagraphs"]
SHAPES = list(itertools.product([64, 128, 256], [128, 256], [128, 256]))


def by_hand(params, inputs):
    """(a * scale_a) @ (b * scale_b) in float64, each scale element repeated over its block."""

    def expand(scale, form_id, side, rows, cols):
        form = scale_form(form_id)
        rb, cb = form.block(side)
        s = scale.detach().double().cpu().reshape(form.grid(side, rows, cols))
        s = s.expand(rows, -1) if rb is WHOLE else s.repeat_interleave(rb, 0)[:rows]
        return s.expand(-1, cols) if cb is WHOLE else s.repeat_interleave(cb, 1)[:, :cols]

    m, k, n = params["m"], params["k"], params["n"]
    a = inputs.a.detach().double().cpu() * expand(inputs.scale_a, params["scale_a"], "a", m, k)
    b = inputs.b.detach().double().cpu() * expand(inputs.scale_b, params["scale_b"], "b", k, n)
    return a @ b


def where_off(ratio, m, n):
    """The worst error ratio per 128-row block and per 128-column block."""
    rows = [round(float(ratio[i : i + 128].max()), 3) for i in range(0, m, 128)]
    cols = [round(float(ratio[:, j : j + 128].max()), 3) for j in range(0, n, 128)]
    return rows, cols


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for (sa, sb), kernel, (m, k, n) in itertools.product(PAIRINGS, KERNELS, SHAPES):
        params = {
            "kernel": kernel,
            "scale_a": sa,
            "scale_b": sb,
            "dtype_a": "e4m3fn",
            "dtype_b": "e4m3fn",
            "out_dtype": "bf16",
            "bias": False,
            "use_fast_accum": False,
            "m": m,
            "k": k,
            "n": n,
            "scale_layout": "contiguous",
            "activation_rank": 2,
        }
        record = CaseParams.from_json(params)
        inputs = make_inputs(record, seed=m * 1000003 + k * 1009 + n, device=device)
        ref = reference(record, inputs)
        hand = by_hand(params, inputs)
        ref_gap = float((ref.value - hand).abs().max())
        fn = BUILTIN_IMPLS[kernel]

        def call(a, b, s_a, s_b, fn=fn):  # fn bound now: compiled and run within this iteration
            return fn(a, b, s_a, s_b, bias=None, out_dtype=torch.bfloat16)

        for mode in MODES:
            row = {"kernel": kernel, "pair": f"{sa}x{sb}", "m": m, "k": k, "n": n, "mode": mode, "ref_vs_hand": ref_gap}
            try:
                torch._dynamo.reset()
                run = call if mode == "eager" else torch.compile(call, mode=None if mode == "inductor" else mode)
                out = run(inputs.a, inputs.b, inputs.scale_a, inputs.scale_b).double().cpu()
                ratio = (out - ref.value).abs() / ref.tolerance
                row.update(
                    max_ratio=round(float(ratio.max()), 4),
                    failing=int((ratio > 1).sum()),
                    rel_vs_hand=float((out - hand).abs().max() / hand.abs().max()),
                )
                if row["failing"]:
                    row["worst_row_blocks"], row["worst_col_blocks"] = where_off(ratio, m, n)
            except Exception as exc:  # one line per refusal, the rest go on
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:240]}"
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
