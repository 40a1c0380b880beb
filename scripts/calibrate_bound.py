"""Calibrate the oracle's error bound (pytest_scaledmm/inputs.py) from real kernel outputs.

measure: run real kernels eagerly and compiled over many K and shapes, and record, per
(op, dtype pair, scales, fast_accum, out dtype, bias, K, side), the largest error over the
elements in units of each term of the bound:
    tol = c_acc*u_acc*sqrt(min(K,L))*e + C_EP*U32*(|dot|+|bias|) + C_OUT*u_out*|value| + tiny
  need_e   max over elements of (|err| - C_OUT*u_out*|value| - C_EP*U32*(|dot|+|bias|) - tiny) / e,
           i.e. what the accumulation term must cover: c_acc*u_acc*sqrt(min(K,L)) >= need_e
  need_e2  the same with 2*u_out (a second output rounding)
  r_out    max |err| / (u_out*|value| + tiny)
  max_rel  max |err| / max |value|; slope: sum(out*value)/sum(value^2) - 1 (systematic error)
  ratio    max |err| / tol with the constants at measurement time; old: the same with the earlier
           linear-in-K bound (2*u_out + K*u_acc_old) * |A|@|B|
  catch    min over elements of tol / |value|: the smallest uniform error the bound catches
Ops: torch._scaled_mm (fp8; tensorwise, rowwise, and blockwise on a GPU), torch._int_mm + the
scale epilogue (as kernels.int8_w8a8), and on the CPU the fp32 matmul the planted kernels compute.
Sides: eager, inductor (default mode), and on a GPU triton-gemm (Inductor's Triton templates)
for a subset, as the time budget allows. Imports only torch and pytest_scaledmm.verdict.inputs.

derive: from such files, the constant each accumulator family needs for each promotion length
L, the margin the constants in inputs.py keep over every record, and the smallest uniform error
the bound catches per family, out dtype and K.

    python scripts/calibrate_bound.py measure --device cuda --out $OUT/h200.json --budget-s 270
    python scripts/calibrate_bound.py measure --device cpu --out calibration/cpu-torch213.json
    python scripts/calibrate_bound.py derive calibration/*.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import zlib
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_scaledmm.verdict import draw  # noqa: E402
from pytest_scaledmm.verdict import reference as reference_module  # noqa: E402
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.scale_forms import scale_form  # noqa: E402

KS = [16, 32, 48, 64, 80, 96, 112, 128, 256, 1024, 4096, 16384]
SHAPES = {"cuda": [(17, 32), (64, 64), (256, 128)], "cpu": [(17, 32), (64, 48)]}
PAIRS = [("e4m3fn", "e4m3fn"), ("e4m3fn", "e5m2"), ("e5m2", "e4m3fn")]
SCALES = {
    "tensorwise": ("tensor_0d", "tensor_0d"),
    "rowwise": ("rowwise", "rowwise"),
    "blockwise": ("blockwise", "blockwise"),
}
OUTS = ["bf16", "fp16", "fp32"]
OLD_U = {"fp32": 2.0**-23, "reduced": 2.0**-13}
COLUMNS = [
    "op",
    "dtype_a",
    "dtype_b",
    "scales",
    "fast_accum",
    "out",
    "bias",
    "k",
    "side",
    "elements",
    "need_e",
    "need_e2",
    "r_out",
    "max_rel",
    "slope",
    "ratio",
    "old",
    "catch",
]
TRITON = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON", "triton.cudagraphs": False}


# -- kernels -------------------------------------------------------------------------------------


def scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, fast):
    out = torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=fast)
    return out[0] if isinstance(out, tuple) else out


def int_mm(a, b, scale_a, scale_b, bias, out_dtype, fast):
    out = torch._int_mm(a, b).to(torch.float32) * scale_a * scale_b
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


def fp32_matmul(a, b, scale_a, scale_b, bias, out_dtype, fast):
    """What tests/planted_kernels.py `correct` computes."""
    out = (a.to(torch.float32) * scale_a) @ (b.to(torch.float32) * scale_b)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


OPS = {"scaled_mm": scaled_mm, "int_mm": int_mm, "fp32_matmul": fp32_matmul}


def configs(device_type: str, fast_values=(False, True), pairs=PAIRS, outs=OUTS, biases=(False, True), scales=None):
    found = []
    fp8_ops = ["scaled_mm"] + (["fp32_matmul"] if device_type == "cpu" else [])
    for op in fp8_ops:
        for pair in pairs:
            for form in scales or (["tensorwise", "rowwise"] + (["blockwise"] if device_type == "cuda" else [])):
                for fast in fast_values if op == "scaled_mm" else (False,):
                    for out in outs:
                        for bias in biases:
                            found.append((op, *pair, form, fast, out, bias))
    if scales is None:
        for form in ("tensorwise", "rowwise"):
            for out in outs:
                for bias in biases:
                    found.append(("int_mm", "int8", "int8", form, False, out, bias))
    return found


def params_of(config, m, k, n) -> dict:
    op, da, db, form, fast, out, bias = config
    sa, sb = SCALES[form]
    return {
        "kernel": op,
        "dtype_a": da,
        "dtype_b": db,
        "scale_a": sa,
        "scale_b": sb,
        "out_dtype": out,
        "bias": bias,
        "use_fast_accum": fast,
        "scale_layout": "contiguous",
        "activation_rank": 2,
        "special_scale": "none",
        "m": m,
        "k": k,
        "n": n,
    }


def applicable(config, k) -> bool:
    return SCALES[config[3]][0] != "blockwise" or k % scale_form("blockwise").block_b[0] == 0


# -- one measurement -----------------------------------------------------------------------------


class Cases:
    """Inputs and float64 bound terms per (config without fast_accum, shape), made once."""

    def __init__(self, device):
        self.device = device
        self.cache = {}

    def get(self, config, m, k, n):
        op, da, db, form, fast, out, bias = config
        key = (op == "int_mm", da, db, form, out, bias, m, k, n)
        if key not in self.cache:
            params = params_of(config, m, k, n)
            seed = zlib.crc32(repr(key).encode())
            inputs = draw.make_inputs(CaseParams.from_json(params), seed, self.device)
            dev = self.device
            sa = draw.expand_scale(inputs.scale_a, params["scale_a"], "a", m, k).to(dev)
            sb = draw.expand_scale(inputs.scale_b, params["scale_b"], "b", k, n).to(dev)
            a64 = inputs.a.to(torch.float64) * sa
            b64 = inputs.b.to(torch.float64) * sb
            bias64 = None if inputs.bias is None else inputs.bias.to(torch.float64)
            terms = reference_module.bound_terms(a64, b64, bias64)
            terms["mag"] = a64.abs() @ b64.abs() + (0 if bias64 is None else bias64.abs())
            self.cache[key] = (inputs, terms)
        return self.cache[key]


def stats(out, terms, params, device_type):
    k, u_out = params["k"], reference_module.OUT_ROUNDOFF[params["out_dtype"]]
    tiny = torch.finfo(draw.torch_dtype(params["out_dtype"])).tiny
    got = out.to(torch.float64)
    value, energy, epi = terms["value"], terms["energy"].clamp_min(1e-300), terms["epilogue"]
    mag_v = value.abs()
    rest = reference_module.C_EP * reference_module.U32 * epi + tiny
    family = reference_module.accumulator(params, device_type)
    tol = reference_module.tolerance_of(terms, k, family, u_out, 1.0, tiny)
    err = (got - value).abs()
    err = torch.where(torch.isfinite(got), err, torch.full_like(err, math.inf))
    # As compare(): past the out dtype's range a saturated value of the same sign is right.
    limit = torch.finfo(out.dtype).max
    saturated = (got.abs() >= limit) & (torch.sign(got) == torch.sign(value)) & (mag_v + tol >= limit)
    err = torch.where(saturated, torch.zeros_like(err), err)
    got = torch.where(saturated, value, got)
    old_u = OLD_U["reduced" if family != "fp32" or params["use_fast_accum"] else "fp32"]
    old_tol = (2 * u_out + k * old_u) * terms["mag"] + tiny
    finite_v = mag_v > 0
    return {
        "elements": value.numel(),
        "need_e": ((err - reference_module.C_OUT * u_out * mag_v - rest).clamp_min(0) / energy).max().item(),
        "need_e2": ((err - 2 * reference_module.C_OUT * u_out * mag_v - rest).clamp_min(0) / energy).max().item(),
        "r_out": (err / (u_out * mag_v + tiny)).max().item(),
        "max_rel": (err.max() / mag_v.max()).item(),
        "slope": ((got * value).sum() / (value * value).sum() - 1).item(),
        "ratio": (err / tol).max().item(),
        "old": (err / old_tol).max().item(),
        "catch": (tol[finite_v] / mag_v[finite_v]).min().item(),
    }


def merge(into, new):
    if not into:
        return dict(new)
    out = {}
    for key, value in new.items():
        if key == "elements":
            out[key] = into[key] + value
        elif key == "catch":
            out[key] = min(into[key], value)
        elif key == "slope":
            out[key] = value if abs(value) > abs(into[key]) else into[key]
        else:
            out[key] = max(into[key], value)
    return out


def first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


class Counting:
    """A Dynamo backend that counts compiled-graph calls (a compiled side that ran no compiled
    graph is not a compiled measurement)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def __call__(self, gm, example_inputs):
        compiled = self.inner(gm, example_inputs)

        def run(*args):
            self.calls += 1
            return compiled(*args)

        run._boxed_call = getattr(compiled, "_boxed_call", False)
        return run


def compiled_fn(op, side: str, fast: bool, out_dtype):
    """A fresh function (its own code object, so its own Dynamo cache) compiled for one side."""
    namespace = {"kernel": OPS[op], "fast": fast, "out_dtype": out_dtype}
    exec(
        "def case(a, b, scale_a, scale_b, bias):\n    return kernel(a, b, scale_a, scale_b, bias, out_dtype, fast)\n",
        namespace,
    )
    options = None
    if side == "triton-gemm":
        import torch._inductor.config as inductor_config

        options = dict(TRITON)
        if "test_configs.max_mm_configs" in inductor_config.get_config_copy():
            options["test_configs.max_mm_configs"] = 2
    backend = Counting(torch._TorchCompileInductorWrapper(None, options, None))
    return torch.compile(namespace["case"], backend=backend, fullgraph=True), backend


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_config(config, side, shapes, ks, cases, device, records, errors):
    op, da, db, form, fast, out, bias = config
    out_dtype = draw.torch_dtype(out)
    fn, backend = (None, None)
    if side != "eager":
        torch._dynamo.reset()
        fn, backend = compiled_fn(op, side, fast, out_dtype)
    for k in ks:
        if not applicable(config, k):
            continue
        merged = {}
        for m, n in shapes:
            params = params_of(config, m, k, n)
            inputs, terms = cases.get(config, m, k, n)
            args = (inputs.a, inputs.b, inputs.scale_a, inputs.scale_b, inputs.bias)
            try:
                if fn is None:
                    result = OPS[op](*args, out_dtype, fast)
                else:
                    calls = backend.calls
                    result = fn(*args)
                    if backend.calls == calls:
                        raise RuntimeError("no compiled graph ran")
                sync(device)
            except Exception as exc:
                errors.setdefault((*config, side), f"k={k} m={m} n={n}: {first_line(exc)}")
                torch._dynamo.reset()
                if fn is not None:
                    fn, backend = compiled_fn(op, side, fast, out_dtype)
                continue
            merged = merge(merged, stats(result, terms, params, torch.device(device).type))
        if merged:
            records.append([op, da, db, form, fast, out, bias, k, side] + [merged[c] for c in COLUMNS[9:]])


def measure(args):
    device = args.device
    device_type = torch.device(device).type
    # One function per config and side; room for a static and a few dynamic recompiles.
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    start = time.time()
    deadline = start + args.budget_s
    shapes = SHAPES[device_type]
    cases = Cases(device)
    records, errors, skipped = [], {}, []
    everything = configs(device_type)
    if device_type == "cuda":
        # In order of priority, as the budget allows: every config eagerly; compiled, the common
        # pair and Inductor's Triton templates first, then the rest.
        first = [c for c in everything if c[1:3] in (("e4m3fn", "e4m3fn"), ("int8", "int8")) and c[3] != "blockwise"]
        triton = [
            c
            for c in first
            if c[0] == "scaled_mm" and not c[6] and (c[3], c[5]) in (("tensorwise", "fp32"), ("rowwise", "bf16"))
        ]
        sides = [
            ("eager", everything, KS),
            ("inductor", first, KS),
            ("triton-gemm", triton, [32, 128, 1024, 4096, 16384]),
            ("inductor", [c for c in everything if c not in first], KS),
        ]
    else:
        sides = [("eager", everything, KS), ("inductor", everything, KS)]
    if args.sides:
        sides = [s for s in sides if s[0] in args.sides.split(",")]
    timing = {}
    last_write = time.time()
    for side, side_configs, ks in sides:
        side_start = time.time()
        side_shapes = shapes if side != "triton-gemm" else shapes[1:2]
        for config in side_configs:
            if time.time() > deadline:
                skipped.append([*config, side])
                continue
            measure_config(config, side, side_shapes, ks, cases, device, records, errors)
            if time.time() - last_write > 20:
                write(args.out, device, shapes, records, errors, skipped, timing, start)
                last_write = time.time()
        timing[side] = round(timing.get(side, 0) + time.time() - side_start, 1)
        print(
            f"{side}: {timing[side]} s, {len(records)} records, {len(errors)} configs with errors, "
            f"{len(skipped)} skipped",
            flush=True,
        )
        write(args.out, device, shapes, records, errors, skipped, timing, start)
    return 0


def write(path, device, shapes, records, errors, skipped, timing, start):
    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"
    doc = {
        "format": 1,
        "torch": torch.__version__,
        "device_type": torch.device(device).type,
        "device": name,
        "cuda": torch.version.cuda,
        "elapsed_s": round(time.time() - start, 1),
        "timing_s": timing,
        "constants_at_measurement": {
            "accumulators": reference_module.ACCUMULATORS,
            "c_ep": reference_module.C_EP,
            "c_out": reference_module.C_OUT,
        },
        "ks": KS,
        "shapes": shapes,
        "columns": COLUMNS,
        "records": [[float(f"{v:.4g}") if isinstance(v, float) else v for v in r] for r in records],
        "errors": [[*key, text] for key, text in sorted(errors.items(), key=lambda kv: repr(kv[0]))],
        "skipped": skipped,
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=None, separators=(",", ":")).replace("],[", "],\n["))


# -- derive --------------------------------------------------------------------------------------

L_CANDIDATES = [16, 32, 64, 128, 256, 512, math.inf]


def load(paths):
    rows = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        for row in doc["records"]:
            record = dict(zip(doc["columns"], row))
            params = {
                "dtype_a": record["dtype_a"],
                "dtype_b": record["dtype_b"],
                "use_fast_accum": record["fast_accum"],
            }
            record["family"] = reference_module.accumulator(params, doc["device_type"])
            record["file"] = Path(path).name
            rows.append(record)
    return rows


def family_fit(rows, family):
    """Per L: the c_acc*u_acc every record of the family needs, and how much the model
    over-states the worst record of each K (the model's looseness)."""
    fits = {}
    rows = [r for r in rows if r["family"] == family]
    for chain in L_CANDIDATES:
        need = max(r["need_e"] / math.sqrt(min(r["k"], chain)) for r in rows)
        loose = []
        for k in sorted({r["k"] for r in rows}):
            worst = max(r["need_e"] for r in rows if r["k"] == k)
            loose.append(need * math.sqrt(min(k, chain)) / worst if worst else math.inf)
        fits[chain] = (need, max(loose))
    return fits


def margins(rows):
    """The least ratio (model's accumulation term) / need_e per family with inputs.py's constants."""
    worst = {}
    for r in rows:
        acc = reference_module.ACCUMULATORS[r["family"]]
        have = acc["c_acc"] * acc["u_acc"] * math.sqrt(min(r["k"], acc["promote_every"]))
        margin = have / r["need_e"] if r["need_e"] > 0 else math.inf
        if margin < worst.get(r["family"], (math.inf,))[0]:
            worst[r["family"]] = (margin, r)
    return worst


def detection(family, out, k, m, n, seeds=3, pair=("e4m3fn", "e4m3fn")):
    """The smallest uniform relative error eps that a kernel returning (1+eps)*value, rounded to
    the out dtype, is caught with, worst over a few seeds (bisection on eps)."""
    worst = 0.0
    for seed in range(seeds):
        params = {
            "dtype_a": pair[0],
            "dtype_b": pair[1],
            "scale_a": "tensor_0d",
            "scale_b": "tensor_0d",
            "out_dtype": out,
            "bias": False,
            "use_fast_accum": family.endswith("fast"),
            "m": m,
            "k": k,
            "n": n,
        }
        inputs = draw.make_inputs(params, seed, "cpu")
        terms = reference_module.bound_terms(*reference_module.dequantised(params, inputs))
        out_dtype, u_out = draw.torch_dtype(out), reference_module.OUT_ROUNDOFF[out]
        tol = reference_module.tolerance_of(terms, k, family, u_out, 1.0, torch.finfo(out_dtype).tiny)
        value = terms["value"]

        # Defaults bind this seed's tensors: the bisection below calls it within the iteration.
        def caught(eps, value=value, out_dtype=out_dtype, tol=tol):
            got = (value * (1 + eps)).to(out_dtype).to(torch.float64)
            return bool(((got - value).abs() > tol).any())

        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if caught(mid) else (mid, hi)
        worst = max(worst, hi)
    return worst


def derive(args):
    rows = load(args.files)
    print(f"{len(rows)} records from {', '.join(args.files)}")
    bad = [r for r in rows if not math.isfinite(r["need_e"])]
    for r in bad:
        print("  non-finite error:", r)
    for family in sorted({r["family"] for r in rows}):
        members = [r for r in rows if r["family"] == family]
        print(f"\n== {family}: {len(members)} records, u_acc {reference_module.ACCUMULATORS[family]['u_acc']:.3g}")
        print("  K: max need_e/u_acc (eager | compiled), max r_out per out dtype, max |slope|")
        u = reference_module.ACCUMULATORS[family]["u_acc"]
        for k in sorted({r["k"] for r in members}):
            at = [r for r in members if r["k"] == k]
            eager = max((r["need_e"] for r in at if r["side"] == "eager"), default=0) / u
            compiled = max((r["need_e"] for r in at if r["side"] != "eager"), default=0) / u
            outs = {o: max((r["r_out"] for r in at if r["out"] == o), default=0) for o in OUTS}
            slope = max(abs(r["slope"]) for r in at)
            print(
                f"  {k:6d}: {eager:9.3g} | {compiled:9.3g}   r_out "
                + " ".join(f"{o} {v:.3g}" for o, v in outs.items())
                + f"   |slope| {slope:.2g}"
            )
        print("  L: c_acc needed (= max need_e / (u_acc sqrt(min(K,L)))), model looseness at the worst K")
        for chain, (need, loose) in family_fit(rows, family).items():
            print(f"  {chain!s:>5}: c_acc >= {need / u:.3g}   looseness {loose:.3g}")
    print("\nmargins of inputs.py's constants (accumulation term / need_e, least over records):")
    for family, (margin, r) in sorted(margins(rows).items()):
        print(
            f"  {family}: {margin:.3g}  at {r['op']} {r['dtype_a']}x{r['dtype_b']} {r['scales']} "
            f"fast={r['fast_accum']} {r['out']} bias={r['bias']} K={r['k']} {r['side']} ({r['file']})"
        )
    worst_ratio = max(rows, key=lambda r: r["ratio"])
    print(
        f"largest error/bound with the constants of the measurement (constants_at_measurement): "
        f"{worst_ratio['ratio']:.3g}"
    )
    if args.detect:
        detect_m, detect_n = args.detect_shape
        print(f"\nsmallest uniform error caught (worst of 3 seeds), M x N = {detect_m:d} x {detect_n:d}:")
        print("  family              out   " + " ".join(f"{k:>7}" for k in args.detect_k))
        for family in reference_module.ACCUMULATORS:
            for out in OUTS:
                found = [detection(family, out, k, *args.detect_shape) for k in args.detect_k]
                print(f"  {family:20s} {out:5s} " + " ".join(f"{100 * f:6.3g}%" for f in found))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    m.add_argument("--out", required=True)
    m.add_argument("--budget-s", type=float, default=270.0)
    m.add_argument("--sides", default="", help="comma-separated subset of eager,inductor,triton-gemm")
    d = sub.add_parser("derive")
    d.add_argument("files", nargs="+")
    d.add_argument("--detect", action="store_true", help="also compute the smallest uniform error caught")
    d.add_argument("--detect-shape", type=int, nargs=2, default=[16, 16])
    d.add_argument("--detect-k", type=int, nargs="+", default=[32, 128, 1024, 4096, 16384])
    args = parser.parse_args(argv)
    return measure(args) if args.command == "measure" else derive(args)


if __name__ == "__main__":
    sys.exit(main())
