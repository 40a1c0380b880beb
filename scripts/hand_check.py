"""Each MISMATCH of a built-in kernel in a report, checked again by hand: the case's inputs rebuilt
from its parameters and seed, the kernel called eagerly, and a float64 reference made here
(independent of the oracle: each scale element repeated over its block by hand, plus the bias).
Prints one JSON line per case: the largest error against that reference relative to the largest
|reference|, where the worst element is, and whether the kernel's output equals the bias alone
(a product dropped) or zeros (a bias dropped).

    python scripts/hand_check.py report.json [--device cuda] > hand_check.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from pytest_scaledmm.matrix.case_params import input_seed
from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.draw import make_inputs
from pytest_scaledmm.verdict.scale_forms import WHOLE, scale_form


def expand(scale, form_id: str, side: str, rows: int, cols: int):
    form = scale_form(form_id)
    rb, cb = form.block(side)
    s = scale.detach().double().cpu().reshape(form.grid(side, rows, cols))
    s = s.expand(rows, -1) if rb is WHOLE else s.repeat_interleave(rb, 0)[:rows]
    return s.expand(-1, cols) if cb is WHOLE else s.repeat_interleave(cb, 1)[:, :cols]


def by_hand(params, inputs):
    m, k, n = params["m"], params["k"], params["n"]
    a = inputs.a.detach().double().cpu().reshape(m, k) * expand(inputs.scale_a, params["scale_a"], "a", m, k)
    b = inputs.b.detach().double().cpu() * expand(inputs.scale_b, params["scale_b"], "b", k, n)
    value = a @ b
    return value if inputs.bias is None else value + inputs.bias.detach().double().cpu()


def check(record: dict, run_seed: int, device: str) -> dict:
    params = record["params"]
    inputs = make_inputs(CaseParams.from_json(params), input_seed(run_seed, record["id"]), device)
    kernel = BUILTIN_IMPLS[params["kernel"]]
    keywords = {
        "bias": inputs.bias,
        "out_dtype": inputs.out_dtype,
        "use_fast_accum": inputs.use_fast_accum,
        **inputs.extras,
    }
    if params["kernel"] == "int8_w8a8":
        keywords.pop("use_fast_accum")
    out = kernel(inputs.a, inputs.b, inputs.scale_a, inputs.scale_b, **keywords)
    got = out.detach().double().cpu().reshape(params["m"], params["n"])
    ref = by_hand(params, inputs)
    found = {"id": record["id"], "outcome_in_report": record["outcome"]}
    if not ref.numel():
        return {**found, "empty": True}
    diff = (got - ref).abs()
    worst = int(torch.nan_to_num(diff, nan=float("inf")).argmax())
    found.update(
        max_rel=float(diff.max() / ref.abs().max()) if ref.abs().max() > 0 else float(diff.max()),
        worst_row=worst // params["n"],
        worst_col=worst % params["n"],
        columns_off=sorted({int(c) for c in torch.nonzero(diff > 1e-2 * ref.abs().max())[:, 1].unique()})[:4],
    )
    if inputs.bias is not None:
        bias = inputs.bias.detach().double().cpu().expand_as(got)
        found["equals_bias_alone"] = bool(torch.allclose(got, bias, rtol=1e-2, atol=1e-3))
    found["all_zero"] = bool((got == 0).all())
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    report = json.load(open(args.report))
    for record in report["cases"]:
        if record["outcome"] != "MISMATCH" or record["params"]["kernel"] not in BUILTIN_IMPLS:
            continue
        if "in place" in (record.get("signature") or ""):
            continue
        try:
            print(json.dumps(check(record, report["matrix"]["seed"], args.device)), flush=True)
        except Exception as exc:  # a case that cannot be rebuilt here: said, not fatal
            print(json.dumps({"id": record["id"], "error": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
