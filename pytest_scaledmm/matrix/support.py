"""What each kernel accepts: the support model that puts valid cases first (OpInfo's
`sample_inputs`) and refused ones on purpose in a boundary slice (its `error_inputs`).

A model answers one question of a case's parameters: which refusals its kernel gives, as short
stable keys (`breaks`), none for a valid configuration. A user kernel's model is its declaration
(scale_forms, dtypes, scale_pairs, dtype_pairs, out_dtypes, bias_out_dtypes, shape limits; the
keys are the declaration's names). A built-in's model is what its op was measured to accept eagerly
(`scripts/measure_support.py`: every scale pair x layout x shape class, dtype pair, output dtype,
bias and fast accumulation), per device kind: `cpu` (torch 2.13) and `gpu` (an H200, sm90, torch
2.11; other GPUs were not measured and use it too). Its keys are those of verdict/refusals.py's
REFUSALS table. A model never depends on the torch version, so that the cases (and their ids) are
the same under every torch version on one machine; what a torch range refuses besides is in
TORCH_RANGE_REFUSALS, read only to explain a model mismatch.

Scales are matched to torch's recipes by shape, as the op does: a recipe says which block of each
operand one scale element covers, and a scale fits it when it has one element per block (a
`[1, 1]` scale fits TensorWise, and RowWise too when M = 1). The op takes the first accepted
(recipe_a, recipe_b) pair that both scales fit. No torch import here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ..verdict.case_axes import CaseParams
from ..verdict.refusals import SIZE_LIMIT_OF, V2_BUILTINS, Support, bias_outside, declared_breaks
from ..verdict.scale_forms import FORMS, WHOLE, scale_form
from .compile_modes import compile_mode
from .schema import KERNEL_AXES, SHAPE_LIMITS

BLOCK = 128  # the blockwise recipes' block, and the K and N tile that shape classes count in

# torch's scale recipes: the block of a (M x K) and of b (K x N) that one scale element covers.
RECIPES = {
    "TensorWise": ((WHOLE, WHOLE), (WHOLE, WHOLE)),
    "RowWise": ((1, WHOLE), (WHOLE, 1)),
    "BlockWise1x128": ((1, BLOCK), (BLOCK, 1)),
    "BlockWise128x128": ((BLOCK, BLOCK), (BLOCK, BLOCK)),
    "BlockWise1x32": ((1, 32), (32, 1)),
    "BlockWise1x16": ((1, 16), (16, 1)),
}
BLOCKWISE = ("BlockWise1x128", "BlockWise128x128")
# aten._scaled_mm_v2's blockwise pairings (DeepSeek-style): 1x128 x 128x128, 128x128 x 1x128, 1x128 x 1x128.
V2_BLOCK_PAIRS = (
    ("BlockWise1x128", "BlockWise128x128"),
    ("BlockWise128x128", "BlockWise1x128"),
    ("BlockWise1x128", "BlockWise1x128"),
)
# Packed fp4 operand dtypes: only with the microscaling form that names them.
FP4_DTYPES = tuple(sorted({d for form in FORMS for d in (form.operand_dtypes or ()) if d.startswith("fp4")}))
_TT = ("TensorWise", "TensorWise")
_RR = ("RowWise", "RowWise")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@lru_cache(maxsize=65536)
def scale_memory(form_id: str, side: str, layout: str, m: int, k: int, n: int) -> tuple:
    """(shape, strides, storage offset in elements) of a case's scale, as verdict/draw.py lays
    it out: row-major, or outer-dim-major for column-major forms; `noncontiguous` doubles the
    strides, `expanded` zeroes them, `offset` starts one copy into the storage."""
    form = scale_form(form_id)
    rows, cols = (m, k) if side == "a" else (k, n)
    shape: tuple[int, ...] = tuple(form.shape(side, rows, cols))
    strides: tuple[int, ...]
    if len(shape) == 2:
        strides = (1, shape[0]) if form.column_major else (shape[1], 1)
    else:
        strides = (1,) * len(shape)
    if layout == "noncontiguous":
        strides = tuple(2 * s for s in strides)
    elif layout == "expanded" and shape:
        strides = (0,) * len(shape)
    numel = 1
    for size in shape:
        numel *= size
    return shape, strides, numel if layout == "offset" else 0


def _dense(shape: tuple, strides: tuple) -> bool:
    """Row-major contiguous, or outer-dim-major (the layout of block scales); sizes of 1 ignored."""
    if len(shape) < 2:
        return True
    row_major = (shape[1] == 1 or strides[1] == 1) and (shape[0] == 1 or strides[0] == shape[1])
    outer_major = (shape[0] == 1 or strides[0] == 1) and (shape[1] == 1 or strides[1] == shape[0])
    return row_major or outer_major


@lru_cache(maxsize=65536)
def fitted_recipes(form_id: str, side: str, layout: str, m: int, k: int, n: int) -> tuple:
    """The recipes whose shape the scale has, each with whether its memory is dense enough for it
    (a one-element scale always is)."""
    shape, strides, _ = scale_memory(form_id, side, layout, m, k, n)
    rows, cols = (m, k) if side == "a" else (k, n)
    numel = 1
    for size in shape:
        numel *= size
    found = []
    for name, blocks in RECIPES.items():
        if name == "TensorWise":
            if numel == 1:
                found.append((name, True))
            continue
        block = blocks[0] if side == "a" else blocks[1]
        grid = tuple(1 if extent is WHOLE else _ceil(size, extent) for size, extent in zip((rows, cols), block))
        if len(shape) == 2 and shape == grid:
            found.append((name, _dense(shape, strides)))
    return tuple(found)


@dataclass(frozen=True)
class OpModel:
    """What a built-in kernel's op accepts on one kind of device, measured. Each field that is set
    is a rule; the key it gives is a REFUSALS key of verdict/refusals.py."""

    source: str  # where the facts come from
    # Accepted (recipe_a, recipe_b) pairs, in the order the op tries them; None: any scale (an
    # epilogue that broadcasts it).
    recipe_pairs: tuple | None = None
    strided_key: str = "scale_pair"  # a recipe's shape, but memory neither row- nor outer-dim-major
    # Pairs the kernel asks for but the op refuses, with the key it refuses them with.
    refused_pairs: tuple = ()
    rowwise_unit_stride: bool = False  # RowWise needs stride(1) == 1 on both scales (rowwise_layout)
    blockwise_m_multiple: int = 0  # BlockWise1x128 x BlockWise128x128 needs M a multiple of this
    scale_offset_multiple: int = 0  # a scale's storage offset a multiple of this many elements
    # (declaration name, limit, key) of each size limit (refusals.SIZE_LIMITS judges it), e.g.
    # ("k_multiple", 16, "k_alignment").
    size_limits: tuple[tuple[str, int, str], ...] = ()
    e5m2_pair: bool = False  # e5m2 x e5m2 refused
    bias_out_dtypes: tuple | None = None  # the output dtypes a bias is taken with
    blockwise_fast_accum: bool = False  # fast accumulation refused with a blockwise recipe
    raw_operands: bool = False  # 2-D operands only (operand_rank)
    # The kernel puts block scales in the op's layout itself (scaled_mm_v2's wrappers): their
    # layout axis does not matter, but K a multiple of 128 and a 128x128 side's outer dim (M of
    # a, N of b) do (recipe_layout: the op's scale shapes count whole blocks).
    converts_block_layouts: bool = False
    # Microscaled recipes (MX, NVFP4: verdict/scale_forms.py), taken on these archs only;
    # elsewhere needs_sm100. Kernels without them refuse such scales as scale_pair.
    microscaling_archs: tuple | None = None
    # Pairs taken only with one block of 128 along M and K; beyond, scale_pair.
    single_block_pairs: tuple = ()
    no_backend: bool = False  # no kernel for this device at all (backend)
    # The bias dtype must be the output's (bf16 for an fp8 output), never fp32 (bias_dtype); read
    # only from cases with a `bias_dtype` axis.
    bias_matches_out: bool = False
    fp8_out_recipes: tuple | None = None  # the recipe pairs that give an fp8 output (rowwise_out_dtype)
    col_major_b: bool = False  # b must be column-major (operand_layout: b_row_major refused)
    same_device_scales: bool = False  # scales on the operands' device (scale_device: scale_on_host refused)
    host_scalar_ok: bool = False  # but a 0-D scale on the host is taken as a scalar


# The key each rule gives, and whether it reads M, K or N (then generation looks for sizes).
SIZE_KEYS = frozenset(
    {
        "scale_pair",
        "rowwise_layout",
        "recipe_layout",
        "blockwise_fast_accum",
        "library_status",
        "k_alignment",
        "n_alignment",
        "int8_min_m",
        "int8_alignment",
        *SHAPE_LIMITS,
        "needs_sm100",  # reads the scale forms, as scale_pair does: decided with them, not with the free axes
    }
)


def fitted(model: OpModel, case: CaseParams, side: str) -> dict:
    """fitted_recipes of one side's scale as the kernel sees them: block recipes always dense
    where it converts them."""
    form = case.scale_a if side == "a" else case.scale_b
    found = dict(fitted_recipes(form, side, case.scale_layout, case.m, case.k, case.n))
    if model.converts_block_layouts:
        found.update({recipe: True for recipe in found if recipe in BLOCKWISE})
    return found


def scale_memory_of(case: CaseParams, side: str) -> tuple:
    form = case.scale_a if side == "a" else case.scale_b
    return scale_memory(form, side, case.scale_layout, case.m, case.k, case.n)


def _chosen(model: OpModel, case: CaseParams) -> tuple | None:
    if model.recipe_pairs is None:
        return None  # the op takes any scale: it chooses no recipe
    side_a, side_b = fitted(model, case, "a"), fitted(model, case, "b")
    return next(((a, b) for a, b in model.recipe_pairs if side_a.get(a) and side_b.get(b)), None)


def chosen_recipes(model: OpModel, params: CaseParams) -> tuple | None:
    """The (recipe_a, recipe_b) pair the op takes for this case's scales, or None."""
    return _chosen(model, params)


def _microscaling_break(model: OpModel, case: CaseParams, arch: str) -> str | None:
    """The key of a case with microscaled scales or fp4 operands, None when it has neither or
    the kernel takes it here: the same microscaling form on both sides with its operand dtypes
    (else scale_pair), on an arch that has the recipes (else needs_sm100)."""
    forms = [scale_form(case.scale_a), scale_form(case.scale_b)]
    dtypes = [case.dtype_a, case.dtype_b]
    micro = [form for form in forms if form.scale_dtype != "fp32"]
    packed = [d for d in dtypes if d in FP4_DTYPES]
    if not micro and not packed:
        return None
    if model.microscaling_archs is None or len(micro) != 2 or forms[0] != forms[1]:
        return "scale_pair"
    if any(d not in (forms[0].operand_dtypes or ()) for d in dtypes):
        return "scale_pair"
    return None if arch in model.microscaling_archs else "needs_sm100"


# One rule: the OpModel fields it reads and its check, (model, case, chosen recipe pair) -> the
# refusal keys it gives (verdict/refusals.py REFUSALS keys). A new rule is one row here and its
# field on OpModel; tests/test_support_rules.py fails a field no row reads.
RuleCheck = Callable[[OpModel, CaseParams, "tuple | None"], "list[str]"]


@dataclass(frozen=True)
class OpRule:
    fields: tuple[str, ...]
    check: RuleCheck


def _recipe_rule(model: OpModel, case: CaseParams, recipe: tuple | None) -> list[str]:
    if model.recipe_pairs is None:
        return []
    if recipe is None:
        side_a, side_b = fitted(model, case, "a"), fitted(model, case, "b")
        refused = next((key for (a, b), key in model.refused_pairs if a in side_a and b in side_b), None)
        shaped = any(a in side_a and b in side_b for a, b in model.recipe_pairs)
        return [refused or (model.strided_key if shaped else "scale_pair")]
    if recipe == _RR and model.rowwise_unit_stride:
        for side in ("a", "b"):
            shape, strides, _ = scale_memory_of(case, side)
            if len(shape) == 2 and strides[1] != 1:
                return ["rowwise_layout"]
    return []


def _host_scale_rule(model: OpModel, case: CaseParams, recipe: tuple | None) -> list[str]:
    if not (model.same_device_scales and case.operand_layout == "scale_on_host"):
        return []
    # A 0-D host scale is a scalar to an elementwise epilogue (int8); the fp8 GEMMs refuse any.
    form = scale_form(case.scale_a)
    return ["scale_device"] if form.per_tensor and not (model.host_scalar_ok and form.rank == 0) else []


def _bias_matches_out_rule(model: OpModel, case: CaseParams, recipe: tuple | None) -> list[str]:
    if not (case.bias and model.bias_matches_out and case.bias_dtype is not None):
        return []
    out, bias = case.out_dtype, case.bias_dtype
    return ["bias_dtype"] if bias == "fp32" or (bias != "out" and out in ("bf16", "fp16") and bias != out) else []


def _fp8_out_rule(model: OpModel, case: CaseParams, recipe: tuple | None) -> list[str]:
    fp8_out = case.out_dtype not in (None, "bf16", "fp16", "fp32")
    if not fp8_out or model.fp8_out_recipes is None or recipe is None:
        return []
    return [] if recipe in model.fp8_out_recipes else ["rowwise_out_dtype"]


def _blockwise(recipe: tuple | None) -> bool:
    return recipe is not None and any(r in BLOCKWISE for r in recipe)


def _recipe_layout_rule(model: OpModel, case: CaseParams, recipe: tuple | None) -> list[str]:
    if recipe is None or not _blockwise(recipe) or not model.converts_block_layouts:
        return []
    sizes = (case.m, case.n)
    whole = case.k % BLOCK == 0 and all(size % BLOCK == 0 for r, size in zip(recipe, sizes) if r == "BlockWise128x128")
    return [] if whole else ["recipe_layout"]


def _scale_offset_rule(model: OpModel, case: CaseParams, recipe: tuple | None) -> list[str]:
    if not (model.scale_offset_multiple and case.scale_layout == "offset"):
        return []
    for index, side in enumerate(("a", "b")):
        if model.converts_block_layouts and recipe is not None and recipe[index] in BLOCKWISE:
            continue  # the kernel copies it
        if scale_memory_of(case, side)[2] % model.scale_offset_multiple:
            return ["library_status"]
    return []


def _size_limits_rule(model: OpModel, case: CaseParams, recipe: tuple | None) -> list[str]:
    return [
        key
        for name, limit, key in model.size_limits
        if SIZE_LIMIT_OF[name].outside(getattr(case, SIZE_LIMIT_OF[name].dim), limit)
    ]


def op_limit(model: OpModel, name: str) -> int | None:
    """The op's limit of this declaration name (min_m, k_multiple, ...), or None."""
    return next((limit for field_name, limit, _ in model.size_limits if field_name == name), None)


# Read before the scales' recipes, whatever the scales are.
FIRST_RULES: tuple[OpRule, ...] = (
    OpRule(("no_backend",), lambda model, case, recipe: ["backend"] if model.no_backend else []),
    OpRule(
        ("raw_operands",),
        lambda model, case, recipe: ["operand_rank"] if model.raw_operands and case.activation_rank == 3 else [],
    ),
)
# Microscaled scales and fp4 operands (_microscaling_break) are decided between the two tables.
MICROSCALING_FIELDS = ("microscaling_archs",)
# The rules for fp32 scales, in the order their keys are listed.
RECIPE_RULES: tuple[OpRule, ...] = (
    OpRule(
        ("e5m2_pair",),
        lambda model, case, recipe: ["e5m2_pair"] if model.e5m2_pair and case.dtype_a == case.dtype_b == "e5m2" else [],
    ),
    OpRule(("size_limits",), _size_limits_rule),
    OpRule(("recipe_pairs", "refused_pairs", "strided_key", "rowwise_unit_stride"), _recipe_rule),
    OpRule(
        ("col_major_b",),
        lambda model, case, recipe: (
            ["operand_layout"] if model.col_major_b and case.operand_layout == "b_row_major" else []
        ),
    ),
    OpRule(("same_device_scales", "host_scalar_ok"), _host_scale_rule),
    OpRule(
        ("bias_out_dtypes",),
        lambda model, case, recipe: ["bias_dtype"] if bias_outside(model.bias_out_dtypes, case) else [],
    ),
    OpRule(("bias_matches_out",), _bias_matches_out_rule),
    OpRule(("fp8_out_recipes",), _fp8_out_rule),
    OpRule(
        ("single_block_pairs",),
        lambda model, case, recipe: (
            ["scale_pair"] if recipe in model.single_block_pairs and (case.m > BLOCK or case.k > BLOCK) else []
        ),
    ),
    OpRule(("converts_block_layouts",), _recipe_layout_rule),
    OpRule(
        ("blockwise_fast_accum",),
        lambda model, case, recipe: (
            ["blockwise_fast_accum"]
            if _blockwise(recipe) and model.blockwise_fast_accum and case.use_fast_accum
            else []
        ),
    ),
    OpRule(
        ("blockwise_m_multiple",),
        lambda model, case, recipe: (
            ["library_status"]
            if recipe == ("BlockWise1x128", "BlockWise128x128")
            and model.blockwise_m_multiple
            and case.m % model.blockwise_m_multiple
            else []
        ),
    ),
    OpRule(("scale_offset_multiple",), _scale_offset_rule),
)


def _op_breaks(model: OpModel, params: CaseParams, arch: str = "cpu") -> list:
    """The refusal keys a built-in's measured op model gives a case: a fold over FIRST_RULES, the
    microscaling check, then RECIPE_RULES (fp32 scales only), each key once, in that order."""
    case = params
    found = [key for rule in FIRST_RULES for key in rule.check(model, case, None)]
    micro = _microscaling_break(model, case, arch)
    if micro is not None:
        return found + [micro]
    if scale_form(case.scale_a).scale_dtype != "fp32":
        return found  # microscaled, taken on this arch: the recipe rules are for fp32 scales
    recipe = _chosen(model, case)
    found += [key for rule in RECIPE_RULES for key in rule.check(model, case, recipe)]
    return list(dict.fromkeys(found))


_CPU = "measured on the CPU, torch 2.13 (scripts/measure_support.py)"
_GPU = "measured on an H200 (sm90), torch 2.11 (scripts/measure_support.py); other GPUs not measured"
_CPU_SCALED_MM = OpModel(_CPU, recipe_pairs=(_TT, _RR), rowwise_unit_stride=True)
# torch._scaled_mm on sm90 took 128x128 x 1x128 only where both scales are one block along K
# and M (scripts/measure_support.py); with whole blocks it, and 1x128 x 1x128, are "Invalid
# scaling configuration." (H200, torch 2.11, scripts/h200_frontier_probe.py).
_GPU_SCALED_MM = OpModel(
    _GPU,
    recipe_pairs=(_TT, _RR, ("BlockWise1x128", "BlockWise128x128"), ("BlockWise128x128", "BlockWise1x128")),
    single_block_pairs=(("BlockWise128x128", "BlockWise1x128"),),
    blockwise_m_multiple=4,
    scale_offset_multiple=4,
    size_limits=(("k_multiple", 16, "k_alignment"), ("n_multiple", 16, "n_alignment")),
    e5m2_pair=True,
    bias_out_dtypes=("bf16", "fp16", "e4m3fn"),
    blockwise_fast_accum=True,
    bias_matches_out=True,
    fp8_out_recipes=(_TT,),
    col_major_b=True,
    same_device_scales=True,
)

# aten._scaled_mm_v2 through the v2 kernels, which put block scales in the op's layout and
# swizzle microscaled ones: tensorwise and rowwise on the CPU (a strided rowwise scale refused by
# its own check); on sm90 also the three blockwise pairings (H200, torch 2.11: correct eager and
# under Inductor, scripts/h200_frontier_probe.py). MX and NVFP4 need sm100 (the CPU refuses the
# swizzle; sm90 refuses them), so only sm100 takes them (not measured there).
_V2_CPU = replace(_CPU_SCALED_MM, raw_operands=True, strided_key="rowwise_layout", microscaling_archs=())
_V2_GPU = replace(
    _GPU_SCALED_MM,
    raw_operands=True,
    recipe_pairs=(_TT, _RR, *V2_BLOCK_PAIRS),
    strided_key="rowwise_layout",
    blockwise_m_multiple=0,
    single_block_pairs=(),
    converts_block_layouts=True,
    microscaling_archs=("sm100",),
)

# torch._int_mm on CUDA: M > 16, K and N multiples of 8 (int8_w8a8's rules; int8_bmm, the same
# op at M = all tokens, is not measured on a GPU itself).
_INT_MM_GPU = OpModel(
    _GPU,
    size_limits=(("k_multiple", 8, "int8_alignment"), ("n_multiple", 8, "int8_alignment"), ("min_m", 17, "int8_min_m")),
    same_device_scales=True,
    host_scalar_ok=True,
)

# (built-in kernel, device kind) -> its op's model.
BUILTIN_MODELS: dict[tuple[str, str], OpModel] = {
    # CPU: tensorwise and rowwise recipes only; a rowwise scale needs stride(1) == 1.
    ("aten_scaled_mm", "cpu"): replace(_CPU_SCALED_MM, raw_operands=True),
    # cuBLASLt: also 1x128 x 128x128 blocks (and 128x128 x 1x128), M a multiple of 4 for the
    # former (the outer-dim-major scale_a's columns 16-byte aligned); scale pointers 16-byte
    # aligned (CUBLAS_STATUS_NOT_SUPPORTED otherwise: every `offset` layout of an odd-sized scale);
    # K and N multiples of 16; no e5m2 x e5m2; no bias with fp32 output; no fast accumulation
    # with block scales.
    ("aten_scaled_mm", "gpu"): replace(_GPU_SCALED_MM, raw_operands=True),
    # The recipes the v2 wrapper infers (kernels.scale_recipes): tensorwise and rowwise are taken;
    # its block recipes are refused on both devices; strided rowwise scales by its own check.
    ("scaled_mm_v2", "cpu"): _V2_CPU,
    ("scaled_mm_v2", "gpu"): _V2_GPU,
    # The same op through torch.nn.functional.scaled_mm: what eager accepts is the same.
    ("scaled_mm_v2_functional", "cpu"): _V2_CPU,
    ("scaled_mm_v2_functional", "gpu"): _V2_GPU,
    # The serving wrapper calls torch._scaled_mm on tokens (per-tensor scales only, declared).
    ("fp8_linear", "cpu"): _CPU_SCALED_MM,
    ("fp8_linear", "gpu"): _GPU_SCALED_MM,
    ("fp8_linear_no_lift", "cpu"): _CPU_SCALED_MM,
    ("fp8_linear_no_lift", "gpu"): _GPU_SCALED_MM,
    ("fp8_linear_rowwise", "cpu"): _CPU_SCALED_MM,
    ("fp8_linear_rowwise", "gpu"): _GPU_SCALED_MM,
    # torch._scaled_grouped_mm: no CPU kernel (torch 2.13: NotImplementedError, eager and
    # compiled); on an H200 rowwise e4m3 with bf16 output, sizes in multiples of 16 (declared).
    ("scaled_grouped_mm", "cpu"): OpModel(_CPU, no_backend=True),
    ("scaled_grouped_mm", "gpu"): OpModel(
        "measured on an H200 (sm90), torch 2.11 (scripts/h200_frontier_probe.py); other GPUs not measured"
    ),
    # torch._int_mm: anything on the CPU; on CUDA M > 16, K and N multiples of 8.
    ("int8_w8a8", "cpu"): OpModel(_CPU, raw_operands=True),
    # int8_bmm flattens its tokens onto torch._int_mm: the same op at M = all tokens.
    ("int8_bmm", "cpu"): OpModel(_CPU),
    ("int8_bmm", "gpu"): _INT_MM_GPU,
    ("int8_w8a8", "gpu"): replace(_INT_MM_GPU, raw_operands=True),
}

# Refusals of a torch range that the models leave out (they would change the cases between torch
# versions): (device kind, kernels, torch specifier, key). A valid case refused so under such a
# torch is an explained model mismatch.
TORCH_RANGE_REFUSALS = (
    ("cpu", ("aten_scaled_mm", *V2_BUILTINS, "fp8_linear", "fp8_linear_no_lift"), "<2.8", "backend"),
    ("gpu", ("aten_scaled_mm", *V2_BUILTINS, "fp8_linear", "fp8_linear_no_lift"), "<2.7", "scale_rank"),
    ("gpu", ("aten_scaled_mm", *V2_BUILTINS, "fp8_linear", "fp8_linear_no_lift"), "<2.7", "rowwise_out_dtype"),
)


def device_kind(arch: str) -> str:
    """The device kind a model is measured for: `cpu`, else `gpu`."""
    return "cpu" if arch == "cpu" else "gpu"


@dataclass(frozen=True)
class SupportModel:
    """One kernel's model on one target arch: `breaks(params)` lists the refusal keys of a case."""

    kernel: str
    arch: str
    declared: Support  # what the kernel declares (a built-in: its static declaration)
    op: OpModel | None = None  # a built-in's measured op model
    divisors: tuple = field(default=())  # the multiples its rules test sizes against

    @property
    def source(self) -> str:
        return self.op.source if self.op is not None else "the kernel's declaration"

    def breaks(self, params: CaseParams) -> list:
        """The refusal keys of this case, each once, in the order they are checked; [] = valid."""
        found = [key for key, _ in declared_breaks(self.declared, params)]
        if self.op is not None:
            found += _op_breaks(self.op, params, self.arch)
        return list(dict.fromkeys(found))

    def size_features(self, dim: str, value: int) -> tuple:
        """What of a size the rules read: sizes with the same features behave alike for the model
        (generation tries one of each when it asks whether a shape class can be valid)."""
        limits = [getattr(self.declared, key) for key in ("min_m", "max_m")] if dim == "m" else []
        if dim == "m" and self.op is not None:
            limits.append(op_limit(self.op, "min_m"))
        return (
            value == 1,
            value <= BLOCK,
            value % 4 == 0,
            _ceil(value, BLOCK) % 4 == 0,
            *(value % d == 0 for d in self.divisors),
            *(value < limit for limit in limits if limit),
            *(value > limit for limit in limits if limit),
        )


def support_model(kernel, arch: str) -> SupportModel:
    """The model of a KernelSpec on a target arch (a built-in's measured op model for the arch's
    device kind; a user kernel's declaration)."""
    declared = Support.of(kernel)
    if declared is None:
        raise TypeError("support_model needs a kernel, not None")
    op = BUILTIN_MODELS.get((kernel.name, device_kind(arch))) if declared.builtin else None
    divisors = {getattr(declared, key) for key in ("m_multiple", "k_multiple", "n_multiple")}
    if op is not None:
        divisors |= {limit for name, limit, _ in op.size_limits if SIZE_LIMIT_OF[name].bound == "multiple"}
        divisors |= {op.blockwise_m_multiple, op.scale_offset_multiple}
    return SupportModel(kernel.name, arch, declared, op, tuple(sorted(d for d in divisors if d and d > 1)))


def explained_by_torch_range(kernel: str, arch: str, torch_version: str, key: str | None) -> bool:
    """Whether a valid case refused with `key` under this torch is a refusal of its torch range
    (TORCH_RANGE_REFUSALS)."""
    if not key or not torch_version:
        return False
    try:
        version = Version(Version(torch_version.split("+")[0]).base_version)
    except InvalidVersion:
        return False
    return any(
        kind == device_kind(arch) and kernel in kernels and refusal == key and version in SpecifierSet(spec)
        for kind, kernels, spec, refusal in TORCH_RANGE_REFUSALS
    )


# -- compile-mode families -------------------------------------------------------------------------

FAMILIES = ("no-inductor", "inductor", "autotune", "cudagraphs", "dynamic")


def mode_family(name: str) -> str:
    """The family of a compile mode (matrix/compile_modes.py): Dynamo without Inductor, default
    Inductor, autotuning, CUDA graphs (reduce-overhead, max-autotune), dynamic shapes. A boundary
    case of each refusal reason runs under each family."""
    row = compile_mode(name)
    if not row.uses_inductor:
        return "no-inductor"
    if row.dynamic:
        return "dynamic"
    cudagraphs = (row.options or {}).get("triton.cudagraphs", row.mode in ("reduce-overhead", "max-autotune"))
    if cudagraphs:
        return "cudagraphs"
    return "autotune" if row.autotunes else "inductor"


def families_of(modes) -> dict[str, list]:
    """Family -> its modes among `modes`, families in FAMILIES order."""
    found: dict[str, list] = {}
    for mode in modes:
        found.setdefault(mode_family(mode), []).append(mode)
    return {family: found[family] for family in FAMILIES if family in found}


# The values of an axis that break fewest rules, most neutral first.
_NEUTRAL_VALUES: dict[str, list[Any]] = {
    "bias": [False],
    "use_fast_accum": [False],
    "scale_layout": ["contiguous"],
    "activation_rank": [2],
    "dtype_a": ["e4m3fn", "e4m3fnuz"],
    "dtype_b": ["e4m3fn", "e4m3fnuz"],
    "out_dtype": ["bf16", "fp16"],
    "special_scale": ["none"],
}


def neutral_order(axis: str, values: list) -> list:
    """An axis's values with those that break fewest rules first (no bias, no fast accumulation,
    contiguous scales, 2-D activations, e4m3 and bf16)."""
    prefer = _NEUTRAL_VALUES.get(axis) or ([KERNEL_AXES[axis][1]] if axis in KERNEL_AXES else [])
    return [v for v in prefer if v in values] + [v for v in values if v not in prefer]
