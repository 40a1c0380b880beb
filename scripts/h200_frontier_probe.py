"""Probe of the scaled-matmul frontier on one GPU: which scaled_mm_v2 call form Dynamo traces,
grouped GEMM eager and compiled, scale_result, bias dtypes, export + AOTInductor, recompiles under
mark_dynamic, and the kernel Inductor picks per backend. One JSON line per probe on stdout; each
probe is isolated by try/except so that one failure does not hide the others.

    python scripts/h200_frontier_probe.py > $OUT/frontier_probe.jsonl
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import traceback

import torch
import torch._dynamo
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code

F = torch.nn.functional
DEV = "cuda"
E4M3 = torch.float8_e4m3fn


def emit(**row):
    print(json.dumps(row, default=str), flush=True)


def first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    lines = [line for line in text.splitlines() if line.strip()]
    keep = [line for line in lines if "Error" in line or "Exception" in line or "Unsupported" in line]
    return " | ".join((keep or lines)[:3])[:400]


def fp8(shape, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(shape, generator=g) * 2).clamp(-400, 400).to(E4M3).to(DEV)


def pos(shape, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.rand(shape, generator=g) * 1.5 + 0.25).to(DEV)


def expand(scale, rows, cols, block):
    """Float64 multiplier of an operand rows x cols from a scale with blocks (br, bc)."""
    s = scale.double().reshape(-(-rows // block[0]), -(-cols // block[1]))
    return s.repeat_interleave(block[0], 0)[:rows].repeat_interleave(block[1], 1)[:, :cols]


def rel_err(out, ref):
    out = out.double()
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    if not torch.isfinite(out).all():
        return "non-finite"
    return float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def compiled(fn, backend, mode=None, options=None, dynamic=None):
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, mode=mode, options=options, dynamic=dynamic, fullgraph=True)


def run_variant(tag, fn, args, ref, backends=("eager_call", "eager", "aot_eager", "inductor")):
    for backend in backends:
        start = time.perf_counter()
        try:
            call = fn if backend == "eager_call" else compiled(fn, backend)
            out = call(*args)
            torch.cuda.synchronize()
            emit(probe=tag, backend=backend, ok=True, err=rel_err(out, ref), s=round(time.perf_counter() - start, 2))
        except Exception as exc:  # noqa: BLE001 - the error is the datum
            emit(probe=tag, backend=backend, ok=False, error=first_line(exc), s=round(time.perf_counter() - start, 2))


# ---------------------------------------------------------------- scaled_mm_v2 call forms
BLOCK = {
    "TensorWise": lambda rows, cols: ((1,), (rows, cols)),
    "RowWise_a": lambda rows, cols: ((rows, 1), (1, cols)),
    "RowWise_b": lambda rows, cols: ((1, cols), (rows, 1)),
    "BlockWise1x128": lambda rows, cols: ((rows, cols // 128), (1, 128)),
    "BlockWise128x128": lambda rows, cols: ((rows // 128, cols // 128), (128, 128)),
}


def v2_scales(recipe, side, rows, cols, seed):
    key = f"RowWise_{side}" if recipe == "RowWise" else recipe
    shape, block = BLOCK[key](rows, cols)
    s = pos(shape, seed)
    if recipe.startswith("BlockWise") and side == "a":
        s = s.t().contiguous().t()  # outer-dim-major, as cuBLAS wants 1x128 scales of a
    if recipe == "BlockWise1x128" and side == "b":
        s = s.t().contiguous().t()
    mult = expand(s, rows, cols, block) if recipe != "TensorWise" else s.double().reshape(1, 1).expand(rows, cols)
    return s, mult


def probe_v2():
    m, k, n = 256, 512, 256
    a = fp8((m, k), 1)
    bt = fp8((n, k), 2)
    b = bt.t()
    pairs = [
        ("TensorWise", "TensorWise"),
        ("RowWise", "RowWise"),
        ("BlockWise1x128", "BlockWise128x128"),
        ("BlockWise128x128", "BlockWise1x128"),
        ("BlockWise1x128", "BlockWise1x128"),
    ]
    for ra, rb in pairs:
        try:
            sa, ma = v2_scales(ra, "a", m, k, 3)
            # b's blocks are along (K, N); a 1x128 recipe of b means 128 along K, one column.
            if rb == "BlockWise1x128":
                sbt = pos((n, k // 128), 4)
                sb = sbt.t()  # K/128 x N, strides (1, K/128)
                mb = expand(sbt, n, k, (1, 128)).t()
            elif rb == "BlockWise128x128":
                sbt = pos((n // 128, k // 128), 4)
                sb = sbt.t()
                mb = expand(sbt, n, k, (128, 128)).t()
            else:
                sb, mb = v2_scales(rb, "b", k, n, 4)
            ref = (a.double() * ma) @ (b.double() * mb)
        except Exception as exc:  # noqa: BLE001
            emit(probe=f"v2 setup {ra}x{rb}", ok=False, error=first_line(exc))
            continue
        recipe_a, recipe_b = getattr(F.ScalingType, ra), getattr(F.ScalingType, rb)
        ia, ib = int(recipe_a.value), int(recipe_b.value)

        # Defaults bind this pair's recipes: each form is compiled and run within the iteration.
        def functional_form(a, b, sa, sb, recipe_a=recipe_a, recipe_b=recipe_b):
            return F.scaled_mm(a, b, sa, recipe_a, sb, recipe_b, output_dtype=torch.bfloat16)

        def aten_int_form(a, b, sa, sb, ia=ia, ib=ib):
            return torch.ops.aten._scaled_mm_v2(a, b, [sa], [ia], [], [sb], [ib], [], None, torch.bfloat16, [], False)

        def aten_int_form_swizzle(a, b, sa, sb, ia=ia, ib=ib):
            return torch.ops.aten._scaled_mm_v2(a, b, [sa], [ia], [0], [sb], [ib], [0], None, torch.bfloat16, [], False)

        def v1_form(a, b, sa, sb):
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

        for name, fn in (
            ("functional", functional_form),
            ("aten_int", aten_int_form),
            ("aten_int_noswizzle", aten_int_form_swizzle),
            ("v1", v1_form),
        ):
            run_variant(f"v2 {name} {ra}x{rb}", fn, (a, b, sa, sb), ref)


def probe_v2_skip_reason():
    """Why Dynamo skips F.scaled_mm: the file/function it names."""
    try:
        a = fp8((32, 32), 1)
        b = fp8((32, 32), 2).t()
        s = torch.ones((), device=DEV)
        fn = compiled(
            lambda a, b, s: F.scaled_mm(
                a, b, s, F.ScalingType.TensorWise, s, F.ScalingType.TensorWise, output_dtype=torch.bfloat16
            ),
            "eager",
        )
        fn(a, b, s)
        emit(probe="v2 skip reason", ok=True)
    except Exception as exc:  # noqa: BLE001
        emit(probe="v2 skip reason", ok=False, error=str(exc)[:1500])


# ---------------------------------------------------------------- grouped GEMM
def grouped_ref(a, b, sa, sb, offs, kind):
    outs = []
    if kind == "2d3d":
        start = 0
        for g, end in enumerate(offs.tolist()):
            ag = a[start:end].double() * sa[start:end].double()[:, None]
            outs.append(ag @ (b[g].double() * sb[g].double()[None, :]))
            start = end
        return torch.cat(outs)
    if kind == "3d3d":
        return (a.double() * sa.double()[..., None]) @ (b.double() * sb.double()[:, None, :])
    if kind == "2d2d":
        start = 0
        m, n = a.shape[0], b.shape[1]
        for g, end in enumerate(offs.tolist()):
            ag = a[:, start:end].double() * sa[g * m : (g + 1) * m].double()[:, None]
            bg = b[start:end].double() * sb[g * n : (g + 1) * n].double()[None, :]
            outs.append(ag @ bg)
            start = end
        return torch.stack(outs)
    raise ValueError(kind)


def probe_grouped():
    op = torch._scaled_grouped_mm
    k, n = 128, 256
    for label, sizes in (("even", [64, 64, 64, 64]), ("jagged", [16, 48, 128, 64]), ("empty", [32, 0, 96, 0])):
        g = len(sizes)
        total = sum(sizes)
        a = fp8((total, k), 10)
        b = fp8((g, n, k), 11).transpose(-2, -1)
        sa = pos((total,), 12)
        sb = pos((g, n), 13)
        offs = torch.tensor(sizes, dtype=torch.int32).cumsum(0).to(torch.int32).to(DEV)
        ref = grouped_ref(a, b, sa, sb, offs, "2d3d")

        def fn(a, b, sa, sb, offs):
            return op(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)

        run_variant(
            f"grouped 2d3d {label}", fn, (a, b, sa, sb, offs), ref, backends=("eager_call", "aot_eager", "inductor")
        )
        for mode in ("max-autotune-no-cudagraphs",):
            start = time.perf_counter()
            try:
                torch._dynamo.reset()
                out = torch.compile(fn, mode=mode, fullgraph=True)(a, b, sa, sb, offs)
                emit(
                    probe=f"grouped 2d3d {label}",
                    backend=mode,
                    ok=True,
                    err=rel_err(out, ref),
                    s=round(time.perf_counter() - start, 2),
                )
            except Exception as exc:  # noqa: BLE001
                emit(probe=f"grouped 2d3d {label}", backend=mode, ok=False, error=first_line(exc))
    g, m = 4, 64
    a = fp8((g, m, k), 20)
    b = fp8((g, n, k), 21).transpose(-2, -1)
    sa = pos((g, m), 22)
    sb = pos((g, n), 23)
    ref = grouped_ref(a, b, sa, sb, None, "3d3d")
    run_variant(
        "grouped 3d3d",
        lambda a, b, sa, sb: op(a, b, sa, sb, out_dtype=torch.bfloat16),
        (a, b, sa, sb),
        ref,
        backends=("eager_call", "aot_eager", "inductor"),
    )
    m, n = 64, 128
    sizes = [128, 0, 256, 128]
    total_k = sum(sizes)
    a = fp8((m, total_k), 30)
    b = fp8((n, total_k), 31).t()
    sa = pos((len(sizes) * m,), 32)
    sb = pos((len(sizes) * n,), 33)
    offs = torch.tensor(sizes, dtype=torch.int32).cumsum(0).to(torch.int32).to(DEV)
    ref = grouped_ref(a, b, sa, sb, offs, "2d2d")
    run_variant(
        "grouped 2d2d",
        lambda a, b, sa, sb, offs: op(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16),
        (a, b, sa, sb, offs),
        ref,
        backends=("eager_call", "aot_eager", "inductor"),
    )


# ---------------------------------------------------------------- scale_result, bias dtypes
def probe_scale_result_and_bias():
    m, k, n = 64, 128, 64
    a = fp8((m, k), 40)
    b = fp8((n, k), 41).t()
    sa = pos((), 42)
    sb = pos((), 43)
    sr = torch.tensor(4.0, device=DEV)
    ref = (a.double() * sa.double()) @ (b.double() * sb.double())

    def with_result(a, b, sa, sb, sr):
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, scale_result=sr, out_dtype=E4M3)

    # The op multiplies by scale_result? or divides? the eager value says which.
    run_variant("scale_result fp8 out (ref = ref/4 assumed)", with_result, (a, b, sa, sb, sr), ref / 4.0)
    run_variant(
        "scale_result fp8 out (ref = ref*4 assumed)",
        with_result,
        (a, b, sa, sb, sr),
        ref * 4.0,
        backends=("eager_call",),
    )
    for bias_dtype in (torch.bfloat16, torch.float16, torch.float32):
        for out_dtype in (torch.bfloat16, torch.float32, torch.float16):
            bias = (torch.randn(n) * 3).to(bias_dtype).to(DEV)

            def with_bias(a, b, sa, sb, bias, out_dtype=out_dtype):
                return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, bias=bias, out_dtype=out_dtype)

            run_variant(
                f"bias {bias_dtype} out {out_dtype}",
                with_bias,
                (a, b, sa, sb, bias),
                ref + bias.double(),
                backends=("eager_call", "inductor"),
            )


# ---------------------------------------------------------------- rank-3 keepdim scales
def probe_rank3_keepdim():
    bsz, t, k, n = 2, 24, 128, 64
    x = fp8((bsz, t, k), 50)
    w = fp8((n, k), 51).t()
    sx = pos((bsz, t, 1), 52)  # amax(dim=-1, keepdim=True) of a 3-D activation
    sw = pos((1, n), 53)

    def linear(x, w, sx, sw):
        out = torch._scaled_mm(x.reshape(-1, k), w, scale_a=sx.reshape(-1, 1), scale_b=sw, out_dtype=torch.bfloat16)
        return out.reshape(bsz, t, n)

    ref = ((x.double() * sx.double()).reshape(-1, k) @ (w.double() * sw.double())).reshape(bsz, t, n)
    run_variant("rank3 keepdim rowwise", linear, (x, w, sx, sw), ref, backends=("eager_call", "inductor"))
    for mode in ("max-autotune-no-cudagraphs",):
        try:
            torch._dynamo.reset()
            out = torch.compile(linear, mode=mode, fullgraph=True)(x, w, sx, sw)
            emit(probe="rank3 keepdim rowwise", backend=mode, ok=True, err=rel_err(out, ref))
        except Exception as exc:  # noqa: BLE001
            emit(probe="rank3 keepdim rowwise", backend=mode, ok=False, error=first_line(exc))
    probe_aoti("aoti rank3 keepdim", linear, (x, w, sx, sw), ref)
    probe_aoti("aoti rank3 keepdim max-autotune", linear, (x, w, sx, sw), ref, options={"max_autotune": True})


# ---------------------------------------------------------------- export + AOTInductor
class Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def probe_aoti(tag, fn, args, ref, options=None):
    start = time.perf_counter()
    try:
        ep = torch.export.export(Wrap(fn), tuple(args))
        t_export = time.perf_counter() - start
        with tempfile.TemporaryDirectory() as tmp:
            path = torch._inductor.aoti_compile_and_package(
                ep, package_path=os.path.join(tmp, "case.pt2"), inductor_configs=options or {}
            )
            t_compile = time.perf_counter() - start - t_export
            runner = torch._inductor.aoti_load_package(path)
            out = runner(*args)
            torch.cuda.synchronize()
        emit(
            probe=tag,
            backend="aoti",
            ok=True,
            err=rel_err(out, ref),
            export_s=round(t_export, 2),
            compile_s=round(t_compile, 2),
            s=round(time.perf_counter() - start, 2),
        )
    except Exception as exc:  # noqa: BLE001
        emit(probe=tag, backend="aoti", ok=False, error=first_line(exc), s=round(time.perf_counter() - start, 2))


def probe_aoti_basic():
    m, k, n = 64, 128, 64
    a = fp8((m, k), 60)
    b = fp8((n, k), 61).t()
    for name, sa, sb in (
        ("0d x 0d", pos((), 62), pos((), 63)),
        ("0d x 1d", pos((), 62), pos((1,), 63)),
        ("row x row", pos((m, 1), 62), pos((1, n), 63)),
    ):
        ref = (a.double() * sa.double()) @ (b.double() * sb.double())
        fn = lambda a, b, sa, sb: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
        probe_aoti(f"aoti {name}", fn, (a, b, sa, sb), ref)


def probe_aoti_control():
    """AOTInductor on a plain bf16 matmul: whether a load segfault is about scaled_mm at all."""
    a = torch.randn(64, 128, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(128, 64, device=DEV, dtype=torch.bfloat16)
    probe_aoti("aoti control bf16 mm", lambda a, b: a @ b, (a, b), a.double() @ b.double())


# ---------------------------------------------------------------- mark_dynamic and recompiles
def probe_dynamic():
    from torch._dynamo.testing import CompileCounterWithBackend

    k, n = 128, 64
    b = fp8((n, k), 71).t()
    sb = pos((1, n), 72)
    for name, mark in (("static", None), ("mark_dynamic M", "dynamic"), ("maybe_mark_dynamic M", "maybe")):
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("inductor")
        fn = torch.compile(
            lambda a, b, sa, sb: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
            backend=counter,
            fullgraph=True,
        )
        errs = []
        try:
            for m in (16, 32, 48, 64, 80):
                a = fp8((m, k), 70 + m)
                sa = pos((m, 1), 73 + m)
                if mark == "dynamic":
                    torch._dynamo.mark_dynamic(a, 0)
                    torch._dynamo.mark_dynamic(sa, 0)
                elif mark == "maybe":
                    torch._dynamo.maybe_mark_dynamic(a, 0)
                    torch._dynamo.maybe_mark_dynamic(sa, 0)
                out = fn(a, b, sa, sb)
                errs.append(rel_err(out, (a.double() * sa.double()) @ (b.double() * sb.double())))
            emit(probe=f"recompiles {name}", ok=True, frames=counter.frame_count, errs=errs)
        except Exception as exc:  # noqa: BLE001
            emit(probe=f"recompiles {name}", ok=False, frames=counter.frame_count, error=first_line(exc))


# ---------------------------------------------------------------- which kernel ran
KERNEL_PATTERNS = (
    ("extern _scaled_mm", r"extern_kernels\._scaled_mm|aten\._scaled_mm|torch\.ops\.aten\._scaled_mm"),
    ("triton template", r"triton_tem_\w+"),
    ("persistent tma", r"persistent|tma"),
    ("cutlass", r"cutlass\w*"),
    ("decomposed", r"triton_(poi|red|per)_\w+"),
)


def probe_kernel_choice():
    m, k, n = 256, 512, 256
    a = fp8((m, k), 80)
    b = fp8((n, k), 81).t()
    variants = {
        "row x row": (pos((m, 1), 82), pos((1, n), 83)),
        "0d x 0d": (pos((), 82), pos((), 83)),
    }
    settings = {
        "inductor": dict(),
        "max-autotune-no-cudagraphs": dict(mode="max-autotune-no-cudagraphs"),
        "aten gemm backend": dict(options={"max_autotune": True, "max_autotune_gemm_backends": "ATEN"}),
        "triton gemm backend": dict(options={"max_autotune": True, "max_autotune_gemm_backends": "TRITON"}),
        "triton persistent tma": dict(
            options={
                "max_autotune": True,
                "max_autotune_gemm_backends": "TRITON",
                "triton.enable_persistent_tma_matmul": True,
            }
        ),
        "cutlass gemm backend": dict(options={"max_autotune": True, "max_autotune_gemm_backends": "CUTLASS"}),
    }
    emit(
        probe="inductor config knobs",
        has_persistent_tma="triton.enable_persistent_tma_matmul" in inductor_config.get_config_copy(),
        cutlass_dir=getattr(getattr(inductor_config, "cuda", None), "cutlass_dir", None),
        cutlass_exists=os.path.isdir(str(getattr(getattr(inductor_config, "cuda", None), "cutlass_dir", "") or "")),
    )
    for vname, (sa, sb) in variants.items():
        ref = (a.double() * sa.double()) @ (b.double() * sb.double())
        for sname, kw in settings.items():
            start = time.perf_counter()
            try:
                torch._dynamo.reset()
                fn = torch.compile(
                    lambda a, b, sa, sb: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                    fullgraph=True,
                    **kw,
                )
                out, codes = run_and_get_code(fn, a, b, sa, sb)
                code = "\n".join(codes)
                found = {label: sorted(set(re.findall(pat, code)))[:4] for label, pat in KERNEL_PATTERNS}
                emit(
                    probe=f"kernel choice {vname}",
                    backend=sname,
                    ok=True,
                    err=rel_err(out, ref),
                    found=found,
                    s=round(time.perf_counter() - start, 2),
                )
            except Exception as exc:  # noqa: BLE001
                emit(
                    probe=f"kernel choice {vname}",
                    backend=sname,
                    ok=False,
                    error=first_line(exc),
                    s=round(time.perf_counter() - start, 2),
                )


# ---------------------------------------------------------------- MX / NVFP4 on this card
def probe_mx_nvfp4():
    m, k, n = 128, 128, 128
    a = fp8((m, k), 90)
    b = fp8((n, k), 91).t()
    try:
        sa = torch.full((m, k // 32), 1.0, device=DEV).to(torch.float8_e8m0fnu)
        sb = torch.full((n, k // 32), 1.0, device=DEV).to(torch.float8_e8m0fnu)
        out = F.scaled_mm(
            a,
            b,
            sa,
            F.ScalingType.BlockWise1x32,
            sb,
            F.ScalingType.BlockWise1x32,
            swizzle_a=F.SwizzleType.NO_SWIZZLE,
            swizzle_b=F.SwizzleType.NO_SWIZZLE,
            output_dtype=torch.bfloat16,
        )
        emit(probe="mx e8m0 1x32", ok=True, err=rel_err(out, a.double() @ b.double()))
    except Exception as exc:  # noqa: BLE001
        emit(probe="mx e8m0 1x32", ok=False, error=first_line(exc))
    try:
        fp4 = torch.zeros((m, k // 2), dtype=torch.uint8, device=DEV).view(torch.float4_e2m1fn_x2)
        fp4b = torch.zeros((n, k // 2), dtype=torch.uint8, device=DEV).view(torch.float4_e2m1fn_x2)
        sa = torch.ones((m, k // 16), device=DEV).to(E4M3)
        sb = torch.ones((n, k // 16), device=DEV).to(E4M3)
        g = torch.ones((), device=DEV)
        out = F.scaled_mm(
            fp4,
            fp4b.t(),
            [sa, g],
            [F.ScalingType.BlockWise1x16, F.ScalingType.TensorWise],
            [sb, g],
            [F.ScalingType.BlockWise1x16, F.ScalingType.TensorWise],
            swizzle_a=[F.SwizzleType.SWIZZLE_32_4_4, F.SwizzleType.NO_SWIZZLE],
            swizzle_b=[F.SwizzleType.SWIZZLE_32_4_4, F.SwizzleType.NO_SWIZZLE],
            output_dtype=torch.bfloat16,
        )
        emit(probe="nvfp4 1x16 + global", ok=True, shape=tuple(out.shape))
    except Exception as exc:  # noqa: BLE001
        emit(probe="nvfp4 1x16 + global", ok=False, error=first_line(exc))


def probe_v2_pairs():
    """The three blockwise pairings in the layouts the op wants: 1x128 scales as [rows, K/128]
    outer-dim-major; a 128x128 scale as [L4, blocks] outer-dim-major, L4 = K/128 rounded up to 4."""
    m, k, n = 256, 512, 256
    kb, l4 = k // 128, -(-(k // 128) // 4) * 4
    a = fp8((m, k), 1)
    b = fp8((n, k), 2).t()
    rows_1x128 = lambda rows, seed: pos((rows, kb), seed)  # noqa: E731  canonical grid per row

    def padded_128(blocks, seed):
        canon = pos((blocks, kb), seed)
        pad = torch.ones((blocks, l4), device=DEV)
        pad[:, :kb] = canon
        return canon, pad.t()  # [L4, blocks], strides (1, L4)

    cases = {}
    ca = rows_1x128(m, 3)
    cb_cols = rows_1x128(n, 4)
    cb128, sb128 = padded_128(n // 128, 5)
    ca128, sa128 = padded_128(m // 128, 6)
    ma_1x128 = expand(ca, m, k, (1, 128))
    mb_1x128 = expand(cb_cols, n, k, (1, 128)).t()
    ma_128 = expand(ca128, m, k, (128, 128))
    mb_128 = expand(cb128, n, k, (128, 128)).t()
    outer = lambda t: t.t().contiguous().t()  # noqa: E731
    cases["1x128 x 128x128"] = (outer(ca), sb128, ma_1x128, mb_128, 4, 5)
    cases["128x128 x 1x128"] = (sa128, outer(cb_cols), ma_128, mb_1x128, 5, 4)
    cases["1x128 x 1x128"] = (outer(ca), outer(cb_cols), ma_1x128, mb_1x128, 4, 4)
    for name, (sa, sb, ma, mb, ia, ib) in cases.items():
        ref = (a.double() * ma) @ (b.double() * mb)
        emit(probe=f"v2 pair {name} layout", sa=(tuple(sa.shape), sa.stride()), sb=(tuple(sb.shape), sb.stride()))
        fn = lambda a, b, sa, sb, ia=ia, ib=ib: torch.ops.aten._scaled_mm_v2(  # noqa: E731
            a, b, [sa], [ia], [], [sb], [ib], [], None, torch.bfloat16, [], False
        )
        run_variant(f"v2 pair {name}", fn, (a, b, sa, sb), ref, backends=("eager_call", "aot_eager", "inductor"))
        for mode in ("max-autotune-no-cudagraphs",):
            try:
                torch._dynamo.reset()
                out = torch.compile(fn, mode=mode, fullgraph=True)(a, b, sa, sb)
                emit(probe=f"v2 pair {name}", backend=mode, ok=True, err=rel_err(out, ref))
            except Exception as exc:  # noqa: BLE001
                emit(probe=f"v2 pair {name}", backend=mode, ok=False, error=first_line(exc))
        v1 = lambda a, b, sa, sb: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
        run_variant(f"v1 pair {name}", v1, (a, b, sa, sb), ref, backends=("eager_call", "inductor"))


def probe_scale_result_detail():
    m, k, n = 64, 128, 64
    a = fp8((m, k), 40)
    b = fp8((n, k), 41).t()
    sa = torch.tensor(0.05, device=DEV)
    sb = torch.tensor(0.05, device=DEV)
    ref = (a.double() * sa.double()) @ (b.double() * sb.double())
    for factor in (1.0, 4.0, 0.25):
        sr = torch.tensor(factor, device=DEV)
        fn = lambda a, b, sa, sb, sr: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, scale_result=sr, out_dtype=E4M3)  # noqa: E731
        for backend in ("eager_call", "inductor", "max-autotune-no-cudagraphs"):
            try:
                if backend == "eager_call":
                    call = fn
                else:
                    torch._dynamo.reset()
                    call = torch.compile(fn, fullgraph=True, mode=None if backend == "inductor" else backend)
                out = call(a, b, sa, sb, sr).double()
                ratio = float((out * ref).sum() / (ref * ref).sum())
                emit(
                    probe=f"scale_result {factor}",
                    backend=backend,
                    ok=True,
                    ref_absmax=float(ref.abs().max()),
                    out_over_ref=round(ratio, 4),
                )
            except Exception as exc:  # noqa: BLE001
                emit(probe=f"scale_result {factor}", backend=backend, ok=False, error=first_line(exc))


def main():
    emit(
        probe="env",
        torch=torch.__version__,
        device=torch.cuda.get_device_name(0),
        capability=torch.cuda.get_device_capability(0),
        python=sys.version.split()[0],
    )
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    only = set(sys.argv[1:])
    import faulthandler

    faulthandler.enable()
    for probe in (
        probe_v2_pairs,
        probe_scale_result_detail,
        probe_v2_skip_reason,
        probe_v2,
        probe_grouped,
        probe_scale_result_and_bias,
        probe_rank3_keepdim,
        probe_aoti_control,
        probe_aoti_basic,
        probe_dynamic,
        probe_kernel_choice,
        probe_mx_nvfp4,
    ):
        if only and probe.__name__ not in only:
            continue
        start = time.perf_counter()
        try:
            probe()
        except Exception:  # noqa: BLE001
            emit(probe=probe.__name__, ok=False, error=traceback.format_exc()[-800:])
        emit(probe=probe.__name__, done=True, s=round(time.perf_counter() - start, 1))


if __name__ == "__main__":
    main()
