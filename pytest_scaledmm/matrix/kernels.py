"""Implementations under test: the built-in kernels, user kernels and how they are loaded.

Kernel contract (the meaning of torch._scaled_mm): ``kernel(a, b, scale_a, scale_b, *, bias=None,
out_dtype, use_fast_accum=False) -> Tensor`` where ``a`` is M x K row-major (or B x T x K for a
3-D activation, M = B*T tokens), ``b`` is K x N column-major and the scales are dequantisation
multipliers in one of the matrix's forms: out = (a * scale_a) @ (b * scale_b) + bias, of dtype
out_dtype and shape (M, N) (or (B, T, N)). The harness passes bias, out_dtype and use_fast_accum
by keyword, so they may also be positional parameters (a torch.library custom op cannot have
keyword-only tensors).

The harness reads a kernel's signature when it resolves the kernel: ``a, b, scale_a, scale_b``
(positional), ``bias`` and ``out_dtype`` are required; ``use_fast_accum`` is optional: a kernel
without it (and without ``**kwargs``) gets no fast-accumulation cases and is never passed the
keyword. Callables whose signature cannot be read (torch ops) are called with every keyword.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verdict.scale_forms import RECIPE_CODES, SWIZZLE_CODES, recipe_pairs, recipes_of_shape
from ..verdict.support_fields import Declared
from .packs import pack_unavailable
from .spec import BUILTIN_KERNELS, KernelSpec, MatrixError

KernelFn = Callable[..., "object"]

# A serving framework pads tiny token counts up to this before torch._scaled_mm and narrows the
# output back (vLLM's Fp8LinearOp uses 17: _scaled_mm is faster with more than 16 rows).
TOKEN_PADDING = 17


@dataclass(frozen=True)
class Kernel(Declared):
    """A kernel declared from a conftest or plugin through ``pytest_scaledmm_kernels``.

    Only ``name`` and ``fn`` are required; the rest narrows what the matrix gives the kernel
    (``scale_forms``, ``dtypes``) or where it runs (``archs``, ``min_torch``: skipped at run time,
    never filtered at collection). Declarations must not depend on the machine: every process
    and xdist worker must declare the same kernels.

    Shape limits declare what the kernel supports, as OpInfo declares an operator's valid inputs:
    ``min_m`` / ``max_m`` (M counts tokens, B*T for a 3-D activation), ``m_multiple``,
    ``k_multiple``, ``n_multiple``; and which pairs and dtypes it takes: ``scale_pairs`` and
    ``dtype_pairs`` (lists of (a, b) pairs), ``out_dtypes``, ``bias_out_dtypes`` (the output
    dtypes it takes a bias with; [] for none). Most cases are generated inside the declaration
    and a boundary slice outside it; one the kernel refuses (eager and compiled alike) outside it
    is UNSUPPORTED, while a refusal inside it is REFUSED, a failure.

    ``name`` and ``fn`` may be positional; every other field is a keyword (verdict/support_fields.py
    `Declared` lists the declarations, with what each means), so that ``Kernel("k", fn, "int8")``
    is refused rather than read as something else.
    """

    name: str
    fn: KernelFn | None = None
    # Weights built once (verdict/contracts.py): `prepare(b, scale_b, bias=..., out_dtype=...)`
    # returns the weight object `fn(a, scale_a, weight)` applies; or `module(b, scale_b, ...)`
    # returns an nn.Module called as `module(a, scale_a)` and compiled as a module.
    prepare: KernelFn | None = field(default=None, kw_only=True)
    module: KernelFn | None = field(default=None, kw_only=True)


def _first(out):
    # Before torch 2.5 _scaled_mm returned (out, amax).
    return out[0] if isinstance(out, tuple) else out


def aten_scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False, scale_result=None):
    """torch._scaled_mm; keywords work on every release (before 2.5 the scales were optional
    keywords after out_dtype). `scale_result` (a 0-D fp32 tensor) is passed only when given."""
    import torch  # noqa: PLC0415  torch: start-up time

    extra = {} if scale_result is None else {"scale_result": scale_result}
    return _first(
        torch._scaled_mm(
            a,
            b,
            scale_a=scale_a,
            scale_b=scale_b,
            bias=bias,
            out_dtype=out_dtype,
            use_fast_accum=use_fast_accum,
            **extra,
        )
    )


def _scaling_type():
    import torch  # noqa: PLC0415  torch: start-up time

    functional = torch.nn.functional
    return getattr(functional, "ScalingType", None) or getattr(torch._C, "_ScalingType", None)


def _scale_shape(scale) -> tuple:
    # A two-level (NVFP4) scale is the pair (block scales, global scale): its blocks decide.
    return tuple((scale[0] if isinstance(scale, (tuple, list)) else scale).shape)


def scale_recipe_names(scale_a, scale_b, rows: int, inner: int, cols: int) -> tuple[str, str]:
    """The scaled_mm_v2 recipes (ScalingType names) the scale shapes stand for: those of the
    scale forms (scale_forms.py) whose shapes they have, TensorWise where none fits. A shape can
    fit several (M = 1 makes a rowwise scale_a one element), so the pair is chosen jointly among
    the forms' pairs; a pair the op does not support is left to the op to refuse. Plain Python
    on static shapes: under torch.compile it folds to constants."""
    side_a = recipes_of_shape(_scale_shape(scale_a), "a", rows, inner, cols) or ["TensorWise"]
    side_b = recipes_of_shape(_scale_shape(scale_b), "b", rows, inner, cols) or ["TensorWise"]
    return next(((a, b) for a, b in recipe_pairs() if a in side_a and b in side_b), (side_a[0], side_b[0]))


def scale_recipes(scale_a, scale_b, rows: int, inner: int, cols: int) -> tuple:
    """scale_recipe_names as torch.nn.functional.ScalingType members."""
    recipes = _scaling_type()
    pair = scale_recipe_names(scale_a, scale_b, rows, inner, cols)
    return getattr(recipes, pair[0]), getattr(recipes, pair[1])


BLOCK_K = 128  # the K extent of the blockwise recipes' blocks


def to_blocked(scale):
    """A microscaling scale (rows x K/block, one row per row of a, or of b's N) in cuBLAS's
    swizzled layout SWIZZLE_32_4_4, flattened: padded to 128 rows and 4 columns, each 128 x 4
    tile stored as 32 x 16 (row r of the tile at [r % 32, (r // 32) * 4 + c]). The algorithm
    of torchao's and PyTorch's tests' to_blocked. Padding is zero bytes."""
    import torch  # noqa: PLC0415  torch: start-up time

    rows, cols = scale.shape
    row_blocks, col_blocks = -(-rows // 128), -(-cols // 4)
    padded = scale
    if (rows, cols) != (row_blocks * 128, col_blocks * 4):
        raw = scale.view(torch.uint8) if scale.element_size() == 1 else scale
        padded = raw.new_zeros((row_blocks * 128, col_blocks * 4))
        padded[:rows, :cols] = raw
        padded = padded.view(scale.dtype)
    blocks = padded.view(row_blocks, 128, col_blocks, 4).permute(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def _padded_k_major(grid, kb: int):
    """A (outer x kb) grid as the op's [L4, outer] tensor, strides (1, L4): L4 = kb rounded up
    to a multiple of 4, rows past kb zero and unused."""
    padded = grid.new_zeros((grid.shape[0], -(-kb // 4) * 4))
    padded[:, :kb] = grid
    return padded.t()


def v2_scale_operand(scale, recipe: str, side: str):
    """A case's scale (its form's grid: a is M x K, b is K x N) in the layout aten._scaled_mm_v2
    wants for `recipe`, as a wrapper does: 1x128 blocks outer-dim-major (a [M, K/128] strides
    (1, M), b [N, K/128] strides (1, N)), 128x128 blocks K-block-major and padded ([L4, M/128]
    or [L4, N/128], strides (1, L4)), microscaling scales swizzled (b's rows are N). Other
    recipes' scales go as they are. Returns the list of scale tensors the op takes."""
    blocks = scale[0] if isinstance(scale, (tuple, list)) else scale
    rest = list(scale[1:]) if isinstance(scale, (tuple, list)) else []
    if recipe == "BlockWise1x128":
        grid = blocks if side == "a" else blocks.t()
        return [grid.t().contiguous().t(), *rest]
    if recipe == "BlockWise128x128":
        grid = blocks if side == "a" else blocks.t()
        return [_padded_k_major(grid, grid.shape[1]), *rest]
    if recipe in ("BlockWise1x32", "BlockWise1x16"):
        return [to_blocked(blocks if side == "a" else blocks.t()), *rest]
    return [blocks, *rest]


def v2_call_codes(recipe_a: str, recipe_b: str, scale_a, scale_b) -> tuple:
    """(recipes_a, swizzles_a, recipes_b, swizzles_b): the int lists of one aten._scaled_mm_v2
    call. A second-level scale (NVFP4's global) is TensorWise and not swizzled."""

    def side(recipe, scale):
        swizzle = SWIZZLE_CODES["SWIZZLE_32_4_4" if recipe in ("BlockWise1x32", "BlockWise1x16") else "NO_SWIZZLE"]
        levels = len(scale) if isinstance(scale, (tuple, list)) else 1
        return [RECIPE_CODES[recipe]] + [RECIPE_CODES["TensorWise"]] * (levels - 1), [swizzle] + [0] * (levels - 1)

    recipes_a, swizzles_a = side(recipe_a, scale_a)
    recipes_b, swizzles_b = side(recipe_b, scale_b)
    return recipes_a, swizzles_a, recipes_b, swizzles_b


def _inner(a) -> int:
    """K of an operand a: fp4 operands pack two values per element."""
    import torch  # noqa: PLC0415  torch: start-up time

    packed = getattr(torch, "float4_e2m1fn_x2", None)
    return a.shape[-1] * (2 if packed is not None and a.dtype == packed else 1)


def scaled_mm_v2(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """aten._scaled_mm_v2 with plain int recipe and swizzle lists, recipes inferred from the
    scale shapes and scales put in the op's layout (v2_scale_operand). Ints, not
    ScalingType members: Dynamo traces this call (it skips torch.nn.functional.scaled_mm on
    torch 2.11), so compiled cases reach Inductor."""
    import torch  # noqa: PLC0415  torch: start-up time

    recipe_a, recipe_b = scale_recipe_names(scale_a, scale_b, a.shape[0], _inner(a), b.shape[-1])
    codes_a, swizzle_a, codes_b, swizzle_b = v2_call_codes(recipe_a, recipe_b, scale_a, scale_b)
    return torch.ops.aten._scaled_mm_v2(
        a,
        b,
        v2_scale_operand(scale_a, recipe_a, "a"),
        codes_a,
        swizzle_a,
        v2_scale_operand(scale_b, recipe_b, "b"),
        codes_b,
        swizzle_b,
        bias,
        out_dtype,
        [],
        use_fast_accum,
    )


def scaled_mm_v2_functional(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """torch.nn.functional.scaled_mm as users write it: ScalingType / SwizzleType members, the
    scales in the op's layout as scaled_mm_v2 puts them. Where Dynamo cannot trace the call
    (torch 2.11: "Attempted to call function marked as skipped") its compiled cases show that."""
    import torch  # noqa: PLC0415  torch: start-up time

    functional = torch.nn.functional
    recipe_a, recipe_b = scale_recipe_names(scale_a, scale_b, a.shape[0], _inner(a), b.shape[-1])
    recipes, swizzles = functional.ScalingType, functional.SwizzleType

    def members(recipe, scale):
        # Attribute access, as users write ScalingType.BlockWise1x32; a global scale is TensorWise.
        levels = len(scale) if isinstance(scale, (tuple, list)) else 1
        swizzled = recipe in ("BlockWise1x32", "BlockWise1x16")
        first = [getattr(recipes, recipe)], [swizzles.SWIZZLE_32_4_4 if swizzled else swizzles.NO_SWIZZLE]
        return first[0] + [recipes.TensorWise] * (levels - 1), first[1] + [swizzles.NO_SWIZZLE] * (levels - 1)

    types_a, swizzle_a = members(recipe_a, scale_a)
    types_b, swizzle_b = members(recipe_b, scale_b)
    return functional.scaled_mm(
        a,
        b,
        v2_scale_operand(scale_a, recipe_a, "a"),
        types_a,
        v2_scale_operand(scale_b, recipe_b, "b"),
        types_b,
        swizzle_a=swizzle_a,
        swizzle_b=swizzle_b,
        bias=bias,
        output_dtype=out_dtype,
        use_fast_accum=use_fast_accum,
    )


def _empty_sum(shape, bias, out_dtype, device):
    """The output at K = 0: every dot product is an empty sum, so the bias alone (torch._scaled_mm
    leaves such an output uninitialised on the CPU)."""
    import torch  # noqa: PLC0415  torch: start-up time

    out = torch.zeros(shape, dtype=torch.float32, device=device)
    return (out if bias is None else out + bias.to(torch.float32)).to(out_dtype)


def _fp8_linear(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, lift: bool):
    import torch  # noqa: PLC0415  torch: start-up time

    tokens = a.flatten(0, -2)  # not reshape(-1, K): at K = 0 the -1 is ambiguous and raises
    output_shape = [*a.shape[:-1], b.shape[1]]
    if tokens.shape[1] == 0:
        return _empty_sum(output_shape, bias, out_dtype, a.device)
    count = tokens.shape[0]
    if count < TOKEN_PADDING:
        tokens = torch.cat([tokens, tokens.new_zeros((TOKEN_PADDING - count, tokens.shape[1]))])
    if lift:
        # 0-D scales as [1]: both sides then have the same rank whatever the checkpoint stored.
        scale_a = scale_a.view(1) if scale_a.dim() == 0 else scale_a
        scale_b = scale_b.view(1) if scale_b.dim() == 0 else scale_b
    out = _first(
        torch._scaled_mm(
            tokens, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum
        )
    )
    return torch.narrow(out, 0, 0, count).view(*output_shape)


def fp8_linear(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A serving framework's per-tensor fp8 linear: activations flattened to tokens, tiny token
    counts padded, 0-D scales lifted with .view(1), output narrowed and reshaped back."""
    return _fp8_linear(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, lift=True)


def fp8_linear_no_lift(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """fp8_linear without the .view(1) lift: a 0-D scale meets a [1] scale as it was stored."""
    return _fp8_linear(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, lift=False)


def fp8_linear_rowwise(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A serving framework's per-token fp8 linear: activations flattened to tokens and their
    rowwise scale with them, whether it arrives as [B*T, 1] or as [B, T, 1] (amax(dim=-1,
    keepdim=True) of a 3-D activation); per-channel weight scales; output reshaped back."""
    import torch  # noqa: PLC0415  torch: start-up time

    tokens = a.flatten(0, -2)
    if tokens.shape[1] == 0:
        return _empty_sum([*a.shape[:-1], b.shape[1]], bias, out_dtype, a.device)
    out = _first(
        torch._scaled_mm(
            tokens,
            b,
            scale_a=scale_a.reshape(-1, 1),
            scale_b=scale_b.reshape(1, -1),
            bias=bias,
            out_dtype=out_dtype,
            use_fast_accum=use_fast_accum,
        )
    )
    return out.view(*a.shape[:-1], b.shape[1])


def scaled_grouped_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False, offs=None):
    """torch._scaled_grouped_mm with rowwise scales (verdict/grouped.py: the three layouts and
    their `offs`, the int32 ends of the groups along M, or along K for 2-D x 2-D)."""
    import torch  # noqa: PLC0415  torch: start-up time

    return torch._scaled_grouped_mm(
        a, b, scale_a, scale_b, offs=offs, bias=bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum
    )


def int8_w8a8(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """int8 W8A8: torch._int_mm (int32 accumulate) then the per-token / per-channel scale epilogue
    that Inductor fuses."""
    import torch  # noqa: PLC0415  torch: start-up time

    out = torch._int_mm(a, b).to(torch.float32) * scale_a * scale_b
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype)


def int8_bmm(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    """A batched int8 W8A8 matmul as serving paths write it for a weight shared by the batch: the
    [B, T, K] activation's tokens flattened onto torch._int_mm (int8 x int8, int32 accumulate;
    torch has no int8 bmm that accumulates wider than int8), then the per-token / per-channel
    scale epilogue on the [B, T, N] product."""
    import torch  # noqa: PLC0415  torch: start-up time

    tokens = a.flatten(0, -2)
    out = torch._int_mm(tokens, b).to(torch.float32)
    if scale_a.numel() > 1:  # per token: [M, 1] or [B, T, 1]
        scale_a = scale_a.reshape(-1, 1)
    out = out * scale_a.to(torch.float32) * scale_b.to(torch.float32)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(out_dtype).reshape(*a.shape[:-1], b.shape[-1])


BUILTIN_IMPLS: dict[str, KernelFn] = {
    "aten_scaled_mm": aten_scaled_mm,
    "scaled_mm_v2": scaled_mm_v2,
    "scaled_mm_v2_functional": scaled_mm_v2_functional,
    "fp8_linear": fp8_linear,
    "fp8_linear_no_lift": fp8_linear_no_lift,
    "int8_w8a8": int8_w8a8,
    "int8_bmm": int8_bmm,
    "fp8_linear_rowwise": fp8_linear_rowwise,
    "scaled_grouped_mm": scaled_grouped_mm,
}
assert set(BUILTIN_IMPLS) == set(BUILTIN_KERNELS)


def unavailable_reason(kernel: KernelSpec) -> str | None:
    """Why this torch cannot run a built-in kernel at all (a run-time skip), or None."""
    import torch  # noqa: PLC0415  torch: start-up time

    missing = pack_unavailable(kernel.name) if kernel.fn is None else None
    if missing:
        return missing
    if kernel.user_code:
        return None
    if kernel.name == "scaled_mm_v2" and not hasattr(torch.ops.aten, "_scaled_mm_v2"):
        return f"torch {torch.__version__} has no aten._scaled_mm_v2"
    if kernel.name == "scaled_mm_v2_functional":
        if not hasattr(torch.nn.functional, "scaled_mm") or _scaling_type() is None:
            return f"torch {torch.__version__} has no torch.nn.functional.scaled_mm"
    if kernel.name == "scaled_grouped_mm" and not hasattr(torch, "_scaled_grouped_mm"):
        return f"torch {torch.__version__} has no torch._scaled_grouped_mm"
    if kernel.family == "int8" and not hasattr(torch, "_int_mm"):
        return f"torch {torch.__version__} has no torch._int_mm"
    if kernel.family == "fp8" and not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm"
    return None


def custom_op(fn) -> object | None:
    """The torch.library op behind a kernel (an OpOverload, OpOverloadPacket or a
    torch.library.custom_op object), or None for a plain function."""
    import torch  # noqa: PLC0415  torch: start-up time

    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return fn
    if isinstance(getattr(fn, "_opoverload", None), torch._ops.OpOverload):
        return fn
    return None


_IMPORT_DIRS: list[str] = []  # where the matrix's kernels import from (add_import_dirs)
_ADDED_DIRS: list[str] = []  # those of them that were not on sys.path before


def add_import_dirs(dirs) -> None:
    """Put the directories at the front of sys.path, as pytest's default (prepend) import mode
    puts a test file's directory: `impl: mykernels:fn` then imports from beside the matrix or
    from the rootdir without PYTHONPATH. A child process started later (spawn) inherits them;
    it imports torch without them (added_import_dirs), as this process did."""
    dirs = [str(d) for d in dirs]
    _IMPORT_DIRS[:] = dirs + [d for d in _IMPORT_DIRS if d not in dirs]  # this run's first
    for directory in reversed(dirs):
        if directory not in sys.path:
            sys.path.insert(0, directory)
            if directory not in _ADDED_DIRS:
                _ADDED_DIRS.append(directory)


def added_import_dirs() -> list[str]:
    return [directory for directory in _ADDED_DIRS if directory in sys.path]


# What scaffold/base_ref.py leaves in a directory it extracted a git ref into: a matrix there is
# the baseline env's, whose kernel modules must be that copy's, not the working tree's.
BASE_MARK = ".scaledmm-base-ref"


def base_copy(spec_path) -> Path | None:
    """The extracted copy of a git ref that holds the matrix file, or None."""
    if not isinstance(spec_path, (str, os.PathLike)):
        return None
    for directory in Path(os.path.realpath(spec_path)).parents:
        if (directory / BASE_MARK).is_file():
            return directory
    return None


def outside_base_copy(module_name: str, base: Path) -> str | None:
    """Where `module_name` was imported from, when that is not under `base`."""
    found = getattr(sys.modules.get(module_name), "__file__", None)
    if found and Path(os.path.realpath(found)).is_relative_to(base):
        return None
    return found or "no file (a namespace package or a built-in module)"


def load_impl(reference: str) -> KernelFn:
    module_name, _, attr_path = reference.partition(":")
    obj = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            shadowed = _shadowed_file(module_name)
            if shadowed is None:
                raise
            where = getattr(sys.modules.get(module_name), "__file__", None) or "a module imported earlier"
            raise AttributeError(
                f"module '{module_name}' is {where}, imported before the matrix's kernels, not {shadowed}: give"
                " your kernel module a name of its own"
            ) from None
    if not callable(obj):
        raise TypeError(f"{reference} is not callable")
    return obj


def _shadowed_file(module_name: str) -> str | None:
    """The project's file that `module_name` names in an import directory, when the module
    imported under that name is another one (the standard library's queue for a queue.py)."""
    found = os.path.realpath(getattr(sys.modules.get(module_name), "__file__", None) or "")
    for directory in [d for d in _IMPORT_DIRS if d in sys.path]:
        base = os.path.join(directory, *module_name.split("."))
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate) and os.path.realpath(candidate) != found:
                return candidate
    return None


# How the harness calls a kernel: these positionally, then keywords.
POSITIONAL = ("a", "b", "scale_a", "scale_b")
REQUIRED_KEYWORDS = ("bias", "out_dtype")
OPTIONAL_KEYWORDS = ("use_fast_accum",)
CALL = "kernel(a, b, scale_a, scale_b, bias=..., out_dtype=...[, use_fast_accum=...])"


def _signature(fn) -> inspect.Signature | None:
    """The signature of a plain callable; None for what cannot be introspected (torch ops,
    builtins), which is then called with every keyword."""
    # A torch op exists only once torch is imported: no torch import for plain functions.
    if "torch" in sys.modules and custom_op(fn) is not None:
        return None
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def accepts_keyword(fn, name: str) -> bool:
    sig = _signature(fn)
    if sig is None:
        return True
    for param in sig.parameters.values():
        if param.kind == param.VAR_KEYWORD:
            return True
        if param.name == name and param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            return True
    return False


def call_keywords(fn, bias, out_dtype, use_fast_accum: bool) -> dict:
    """The keywords of one call: use_fast_accum only where the signature takes it."""
    keywords = {"bias": bias, "out_dtype": out_dtype}
    if accepts_keyword(fn, "use_fast_accum"):
        keywords["use_fast_accum"] = use_fast_accum
    return keywords


def contract_call(spec: KernelSpec, part: str = "fn") -> tuple[tuple, tuple, str]:
    """(positional names, required keywords, call text) of how the harness calls one part of a
    kernel (verdict/contracts.py): `fn` (the kernel, or the apply step of a `prepare` kernel),
    `prepare`, or `module` (the factory)."""
    dynamic = spec.activation == "dynamic"
    first = ("x",) if dynamic else ("a", "scale_a")
    if part in ("prepare", "module"):
        return ("b", "scale_b"), REQUIRED_KEYWORDS, f"{part}(b, scale_b, bias=..., out_dtype=...)"
    if spec.contract == "prepare":
        names = (*first, "weight")
        return names, (), f"kernel({', '.join(names)})"
    if dynamic:
        return ("x", "b", "scale_b"), REQUIRED_KEYWORDS, "kernel(x, b, scale_b, bias=..., out_dtype=...)"
    return POSITIONAL, REQUIRED_KEYWORDS, CALL


def signature_problem(fn, positional_names: Sequence[str] = POSITIONAL, required=REQUIRED_KEYWORDS) -> str | None:
    """Why the harness cannot call `fn` with `positional_names` positionally and the `required`
    keywords, naming the parameter; None when it can."""
    sig = _signature(fn)
    if sig is None:
        return None
    params = list(sig.parameters.values())
    kinds = {p.kind for p in params}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if inspect.Parameter.VAR_POSITIONAL not in kinds and len(positional) < len(positional_names):
        missing = positional_names[len(positional)]
        return f"has no parameter for {missing!r} (the harness passes {', '.join(positional_names)} positionally)"
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        for name in required:
            if not accepts_keyword(fn, name):
                return f"has no parameter {name!r} (the harness passes it by keyword)"
    keywords = call_keywords(fn, None, None, False) if required else {}
    if any(p.name == "forms" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        keywords["forms"] = ()
    if accepts_keyword(fn, "out_dtype"):
        keywords["out_dtype"] = None
    try:
        sig.bind(*([None] * len(positional_names)), **keywords)
    except TypeError as exc:
        # e.g. a required parameter the harness does not know, or a keyword taken positionally
        named = [p.name for p in params if f"'{p.name}'" in str(exc)]
        what = f" {named[0]!r}" if named else ""
        return f"cannot be called as {CALL}: parameter{what}: {exc}"
    return None


def kernel_callable(kernel: KernelSpec) -> KernelFn | None:
    """The callable behind a declaration without raising: None when it cannot be loaded (the
    run reports that as a usage error in resolve_kernels)."""
    if kernel.fn is not None:
        return kernel.fn
    ref = kernel.module if kernel.contract == "module" else kernel.impl
    if callable(ref):
        return ref
    if ref is None:
        return BUILTIN_IMPLS.get(kernel.name)
    try:
        return load_impl(ref)
    except Exception:
        return None


def kernel_accepts_fast_accum(kernel: KernelSpec) -> bool:
    """Whether cases with use_fast_accum=True can be given to the kernel (a static fact of its
    signature, the same in every process)."""
    if not kernel.user_code:
        return True  # every built-in takes it
    try:
        fn = prepare_callable(kernel) if kernel.contract == "prepare" else kernel_callable(kernel)
    except Exception:
        fn = None
    return fn is None or accepts_keyword(fn, "use_fast_accum")


def _describe(fn) -> str:
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(fn)


def resolve_kernels(spec_path, kernels: tuple[KernelSpec, ...]) -> dict[str, KernelFn]:
    """Name -> callable for every kernel of the matrix; a kernel that cannot be loaded, or whose
    signature the harness cannot call, is a usage error naming the matrix key (or, for a hook's
    kernel, the hook and the kernel)."""
    resolved = {}
    for index, kernel in enumerate(kernels):
        _refuse_builtin_name(spec_path, index, kernel)
        if kernel.contract == "module" or kernel.prepare is not None:
            resolved[kernel.name] = _resolve_weights_once(spec_path, index, kernel)
        else:
            resolved[kernel.name] = _resolve_call(spec_path, index, kernel)
    return resolved


def _refuse_builtin_name(spec_path: Path | str, index: int, kernel: KernelSpec) -> None:
    """Refuses user code declared under a built-in kernel's name (a usage error)."""
    if kernel.user_code and kernel.name in BUILTIN_IMPLS:
        # Case ids, baselines and the documented refusals all go by the name: user code
        # under a built-in's name would be compared and judged as the built-in.
        where = "pytest_scaledmm_kernels" if kernel.fn is not None else spec_path
        key = kernel.name if kernel.fn is not None else f"kernels[{index}].name"
        raise MatrixError(
            where, key, f"{kernel.name!r} is a built-in kernel's name; give your kernel a name of its own"
        )


def _resolve_weights_once(spec_path: Path | str, index: int, kernel: KernelSpec) -> KernelFn:
    """The callable a `module` or `prepare` kernel runs: its module factory, or its apply step
    once its prepare step is checked; each part loaded and checked in turn."""
    where, key = _where(spec_path, index, kernel)
    if kernel.contract == "module":
        return _resolve_part(where, key, kernel, "module", kernel.module)
    _resolve_part(where, key, kernel, "prepare", kernel.prepare)
    return _resolve_part(where, key, kernel, "fn", kernel.fn or kernel.impl)


def _resolve_part(where: Path | str, key: str, kernel: KernelSpec, part: str, ref: Any) -> KernelFn:
    """One part of a weights-once kernel (`ref`: a callable or a `module:qualname`), loaded, its
    signature checked against how the harness calls that part and its module against the
    baseline's copy; a usage error at the part's key otherwise."""
    part_key = key if kernel.fn is not None else f"{key}.{'impl' if part == 'fn' else part}"
    loaded = _load_reference(where, part_key, ref)
    _check_call(where, part_key, kernel, loaded, part)
    if isinstance(ref, str):
        _check_base_copy(where, part_key, ref)
    return loaded


def _resolve_call(spec_path: Path | str, index: int, kernel: KernelSpec) -> KernelFn:
    """The callable of a one-function kernel (the hook's fn, a built-in or an `impl`), its
    signature checked; a usage error at its key otherwise."""
    where: Path | str
    fn: KernelFn
    if kernel.fn is not None:  # declared through the pytest_scaledmm_kernels hook
        where, key, fn = "pytest_scaledmm_kernels", kernel.name, kernel.fn
    elif kernel.impl is None:
        where, key = spec_path, f"kernels[{index}]"
        if kernel.name not in BUILTIN_IMPLS:
            raise MatrixError(spec_path, key, f"built-in kernel {kernel.name!r} is not available")
        fn = BUILTIN_IMPLS[kernel.name]
    else:
        where, key = spec_path, f"kernels[{index}].impl"
        fn = _load_reference(where, key, kernel.impl)
        _check_base_copy(spec_path, key, kernel.impl)
    _check_call(where, key, kernel, fn)
    return fn


def _load_reference(where: Path | str, key: str, ref: Any) -> KernelFn:
    """`ref` itself when callable, else what its `module:qualname` names; a usage error at `key`
    when it cannot be loaded."""
    try:
        return ref if callable(ref) else load_impl(ref)
    except Exception as exc:  # any import-time failure of user code is reported, not raised
        raise MatrixError(where, key, f"cannot load {ref!r}: {type(exc).__name__}: {exc}") from None


def _check_call(where: Path | str, key: str, kernel: KernelSpec, fn: KernelFn, part: str = "fn") -> None:
    """Refuses `fn` (a usage error at `key`) when the harness cannot call it as it calls `part`
    of the kernel (contract_call)."""
    names, required, text = contract_call(kernel, part)
    problem = signature_problem(fn, names, required)
    if problem:
        raise MatrixError(where, key, f"kernel {kernel.name!r} ({_describe(fn)}) {problem}; the harness calls {text}")


def _check_base_copy(spec_path, key: str, reference: str) -> None:
    """In the baseline env, a kernel module imported from anywhere but the extracted copy (the
    working tree's, installed or on PYTHONPATH) would be judged as the base ref's: refused."""
    base = base_copy(spec_path)
    if base is None:
        return
    module_name = reference.partition(":")[0]
    found = outside_base_copy(module_name, base)
    if found is not None:
        raise MatrixError(
            spec_path,
            key,
            f"module {module_name!r} is {found}, not the copy of the git ref in {base}: the baseline would run"
            " another tree's kernel (install that copy, or put its src/ on PYTHONPATH, not the working tree's)",
        )


def _where(spec_path, index: int, kernel: KernelSpec) -> tuple:
    if kernel.fn is not None or callable(kernel.module) or callable(kernel.prepare):
        return "pytest_scaledmm_kernels", kernel.name
    return spec_path, f"kernels[{index}]"


def prepare_callable(kernel: KernelSpec) -> KernelFn | None:
    """The prepare step of a `prepare` kernel (loaded by name, as resolve_kernels checked), or None."""
    if kernel.prepare is None:
        return None
    return kernel.prepare if callable(kernel.prepare) else load_impl(kernel.prepare)
