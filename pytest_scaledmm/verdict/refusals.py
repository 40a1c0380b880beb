"""When a refusal is earned: the documented refusals of the built-in ops, a kernel's declared
support, and the errors that are bugs whoever raises them.

A case whose eager and compiled calls raise alike is judged here (classify.classify), in this order:

1. INTERNAL_ERROR: either side raised an internal assert ("INTERNAL ASSERT FAILED", "please
   report a bug to PyTorch", a bare ``torch._check(cond)`` without a message) or a CUDA / HIP /
   cuBLAS error other than a documented not-supported status. A bug is not a capability, so it
   fails even when both sides agree; filed as UNSUPPORTED it would read as "capability gained"
   once fixed. A class of its own, so that a gate or a reader tells it from a refusal.
2. UNSUPPORTED, earned one of two ways:
   - the case lies outside the kernel's declared support (its ``scale_forms``, ``dtypes``,
     ``scale_pairs``, ``dtype_pairs``, ``out_dtypes``, ``bias_out_dtypes`` and shape limits
     ``min_m``, ``max_m``, ``m_multiple``, ``k_multiple``, ``n_multiple``), for any kernel; or
   - the kernel is a built-in and its eager error is a documented refusal of the op it calls
     (REFUSALS: a regex on the exception type and message, one entry per documented constraint).
3. REFUSED otherwise, a failure: a user kernel refusing a case inside its declared support (a
   user kernel that declares nothing supports every case the matrix gives it), or a built-in
   raising something its op does not document. When the error is a documented refusal of an op
   the kernel may wrap, the detail names the declaration that would make the case unsupported.

A kernel that raises SystemExit, KeyboardInterrupt or another BaseException that is not an
Exception is a CRASH before any of this (pipeline.py): it tried to end the process.

What is read of a kernel is its Support: plain data, so that a repro script carries it and judges
as the run did.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .case_axes import CaseParams
from .outcome import INTERNAL_ERROR, REFUSED, UNSUPPORTED, ErrorInfo, Outcome, signature_of
from .support_fields import JUDGED_FIELDS, Declared, declared_values

V2_BUILTINS = ("scaled_mm_v2", "scaled_mm_v2_functional")  # aten._scaled_mm_v2, by its two call forms
FP8_BUILTINS = ("aten_scaled_mm", *V2_BUILTINS, "fp8_linear", "fp8_linear_no_lift", "fp8_linear_rowwise")
GROUPED_BUILTINS = ("scaled_grouped_mm",)  # torch._scaled_grouped_mm
INT8_BUILTINS = ("int8_w8a8", "int8_bmm")  # torch._int_mm (int8_bmm on the flattened tokens)
RAW_OPS = ("aten_scaled_mm", *V2_BUILTINS, "int8_w8a8")  # no token flattening: 2-D operands only


@dataclass(frozen=True)
class Refusal:
    key: str  # short and stable: a boundary case's expected_refusal (matrix/support.py) names it
    kernels: tuple  # built-in kernels whose op documents it
    types: tuple  # exception class names (the root cause's, or Dynamo's wrapper's)
    pattern: re.Pattern
    constraint: str  # what the op does not support, in a reader's words
    declare: str = ""  # what a user kernel wrapping the op would declare to make it UNSUPPORTED


def _entry(
    key: str, kernels: Iterable[str], types: Iterable[str], pattern: str, constraint: str, declare: str = ""
) -> Refusal:
    return Refusal(key, tuple(kernels), tuple(types), re.compile(pattern, re.S), constraint, declare)


_RT, _VAL, _NI = "RuntimeError", "ValueError", "NotImplementedError"

REFUSALS = (
    # No recipe for this pair of scale forms or layouts (tensorwise with rowwise, blockwise where
    # the build lacks it): Blas.cpp / ScaledBlas.cpp get_joint_scaling (RuntimeError, ValueError
    # since 2.8), the CPU implementation of 2.13 (ValueError), the meta function (RuntimeError).
    _entry(
        "scale_pair",
        FP8_BUILTINS,
        (_RT, _VAL),
        r"Invalid (blockwise )?scaling configuration",
        "no recipe for this pair of scale forms",
        "scale_forms",
    ),
    # Releases up to 2.6 on CUDA: a non-tensorwise scale must be 2-D.
    _entry(
        "scale_rank",
        FP8_BUILTINS,
        (_RT,),
        r"For non-TensorWise scaling, scale tensors must be 2-dimensional",
        "non-tensorwise scales must be 2-D",
        "scale_forms",
    ),
    # Rowwise scales must be contiguous (CUDA), with unit stride along dim 1 (CPU 2.13, ValueError).
    _entry(
        "rowwise_layout",
        FP8_BUILTINS,
        (_RT, _VAL),
        r"must be contiguous for row-?wise scaling|expected scale_[ab]\.stride\(1\) to be 1|"
        r"scale_[ab] must be contiguous",
        "rowwise scales must be contiguous",
        "scale_forms",
    ),
    # scaled_mm_v2's per-recipe checks of scale shape and strides (CPU, CUDA and meta, ValueError;
    # on the H200, torch 2.11: "scale_a must have strides (1, 127); got [0, 0]").
    _entry(
        "recipe_layout",
        V2_BUILTINS,
        (_VAL, _RT),
        r"scale_[ab] must have (shape|strides|\d+ Float element)|scale [ab] must have shape",
        "the scale's shape or strides do not fit its recipe",
        "scale_forms",
    ),
    # Microscaling (MX: e8m0 over 1x32, NVFP4: e4m3 over 1x16 of fp4) needs a CUDA capability
    # 10.x card: the CPU refuses any swizzle (ValueError, torch 2.13); torch 2.11 checks the
    # swizzle in Python; on sm90 NVFP4 ends in CUBLAS_STATUS_NOT_SUPPORTED (library_status).
    # The sm90 message of swizzled MX is not yet recorded: the last alternative is the family
    # it is expected in, to be narrowed once an H200 run shows it.
    _entry(
        "needs_sm100",
        V2_BUILTINS,
        (_VAL, _RT, _NI),
        r"CPU does not support swizzle|scale_[ab] must be swizzled to SWIZZLE_32_4_4|"
        r"(MX|MXFP8|mxfp8|NVFP4|nvfp4|[Ff]loat8_e8m0fnu|[Ff]loat4_e2m1fn_x2|[Bb]lock-?wise)[^\n]{0,80}"
        r"(only supported|requires|not supported|is supported only)[^\n]{0,80}"
        r"(sm_?1\d\d|SM1\d\d|capability 1\d|Blackwell|CUDA 12\.8)",
        "microscaled (MX, NVFP4) scales on this device (they need a CUDA capability 10.x card)",
        "archs",
    ),
    # Blockwise recipes without fast accumulation (cuBLASLt, sm90).
    _entry(
        "blockwise_fast_accum",
        FP8_BUILTINS,
        (_RT, _VAL),
        r"scaled_gemm doesn't support fast accum with \w+ blockwise scaling",
        "fast accumulation with blockwise scales",
    ),
    # cuBLASLt fp8 GEMMs: K and N multiples of 16 (Blas.cpp, RuntimeError; ScaledBlas.cpp's v2
    # op, ValueError; the meta function on a GPU). mat1's K is checked first, so a case with a
    # misaligned K says so, and mat2's message means N.
    _entry(
        "k_alignment",
        FP8_BUILTINS,
        (_RT, _VAL),
        r"trailing dimension of mat1 to be divisible by 16|self\.size\(1\) to be divisible by 16",
        "K must be a multiple of 16",
        "k_multiple: 16",
    ),
    _entry(
        "n_alignment",
        FP8_BUILTINS,
        (_RT, _VAL),
        r"mat2 shape \(\d+x\d+\) must be divisible by 16|both dimensions of mat2 to be divisible by 16",
        "N (and K) must be multiples of 16",
        "k_multiple: 16, n_multiple: 16",
    ),
    # cuBLASLt has no e5m2 x e5m2 kernel (ValueError since 2.6, RuntimeError before).
    _entry(
        "e5m2_pair",
        FP8_BUILTINS,
        (_VAL, _RT),
        r"Multiplication of two Float8_e5m2 matrices is not supported",
        "e5m2 x e5m2",
        "dtypes without e5m2 on both sides",
    ),
    # Bias: none with fp32 output, bf16 / fp16 bias matching the output (Blas.cpp; ValueError
    # from the v2 op).
    _entry(
        "bias_dtype",
        FP8_BUILTINS,
        (_RT, _VAL),
        r"Bias is not supported when out_dtype is set to Float32|"
        r"Bias must be (either Half or BFloat16|BFloat16 or Half|BFloat16 to compute|Float16 to compute)",
        "bias with fp32 output, or a bias dtype other than the output's",
    ),
    # Rowwise scaling computes bf16 (and fp16 since 2.7) output only (CUTLASS kernel; hipBLASLt).
    _entry(
        "rowwise_out_dtype",
        FP8_BUILTINS,
        (_VAL, _RT),
        r"Only bf16( and fp16)? high precsi?ion output types are supported for row-?wise scaling|"
        r"rowwise _scaled_mm only supports BFloat16 output",
        "rowwise scaling with this output dtype",
    ),
    # Device support: sm89+ / MI300+; ROCm releases without a dtype or recipe.
    _entry(
        "device",
        FP8_BUILTINS,
        (_RT,),
        r"torch\._scaled_mm is only supported on CUDA devices with compute capability",
        "this GPU (fp8 GEMMs need sm89 or newer, or MI300)",
        "archs",
    ),
    _entry(
        "rocm",
        FP8_BUILTINS,
        (_RT, _VAL, _NI),
        r"is only supported for ROCm \d|Block-wise scaling for Float8_e8m0fnu (is only supported|requires ROCm)|"
        r"Per-row scaling is not supported for this platform",
        "this ROCm release or platform",
        "archs",
    ),
    # Operand layouts cuBLASLt has no kernel for: a row-major b (Blas.cpp / ScaledBlas.cpp and the
    # meta function, which Inductor's lowering also runs on the CPU: "mat_b must be col_major").
    # cuBLASLt on the H200 (torch 2.11): "Only multiplication of row-major and column-major
    # matrices is supported by cuBLASLt".
    _entry(
        "operand_layout",
        FP8_BUILTINS,
        (_RT, _VAL),
        r"mat(2|_b) must be col.?major|mat(1|_a) must be row.?major|mat2 must be (column|col).?major|"
        r"Only multiplication of row-major and column-major matrices is supported by cuBLASLt",
        "this operand layout (a row-major b)",
        "operand layouts without b_row_major",
    ),
    # A scale on the host beside GPU operands (H200, torch 2.11: eager _scaled_mm and the int8
    # epilogue refuse it).
    _entry(
        "scale_device",
        FP8_BUILTINS + INT8_BUILTINS,
        (_RT,),
        r"Expected all tensors to be on the same device|found at least two devices",
        "a scale on another device than the operands",
        "operand layouts without scale_on_host",
    ),
    # No kernel for this backend in this torch: CPU fp8 _scaled_mm before 2.8 (NotImplementedError).
    # torch._scaled_grouped_mm has no CPU kernel (torch 2.13).
    _entry(
        "backend",
        FP8_BUILTINS + INT8_BUILTINS + GROUPED_BUILTINS,
        (_NI, _RT),
        r"Could not run 'aten::_(scaled_mm|scaled_mm_v2|int_mm|scaled_grouped_mm)' "
        r"with arguments from the '\w+' backend|\"(baddbmm|bmm|addmm|mm)_cuda\" not implemented for 'Int'",
        "this device in this torch release (no kernel for the backend)",
        "archs, min_torch",
    ),
    # A library status saying "not supported", and builds without this GPU's code.
    _entry(
        "library_status",
        FP8_BUILTINS + INT8_BUILTINS,
        (_RT,),
        r"CUBLAS_STATUS_NOT_SUPPORTED|HIPBLAS_STATUS_NOT_SUPPORTED|CUBLAS_STATUS_ARCH_MISMATCH|"
        r"no kernel image is available for execution on the device",
        "this configuration on this GPU (the library reports it not supported)",
        "archs",
    ),
    # The raw ops take 2-D operands (fp8_linear flattens tokens first).
    _entry(
        "operand_rank",
        RAW_OPS,
        (_RT, _VAL),
        r"mat[12] must be a matrix|Inputs must be 2D|Expected (self|mat2) to be of dimension 2|"
        r"[ab] must be a 2D tensor",
        "operands other than 2-D",
    ),
    # torch._int_mm on CUDA: M > 16, K and N multiples of 8 (Blas.cpp _int_mm_out_cuda).
    _entry("int8_min_m", INT8_BUILTINS, (_RT,), r"self\.size\(0\) needs to be greater than 16", "M <= 16", "min_m: 17"),
    _entry(
        "int8_alignment",
        INT8_BUILTINS,
        (_RT,),
        r"(self|mat2)\.size\(1\) needs to be greater than (0|16) and a multiple of 8",
        "K or N not a multiple of 8",
        "k_multiple: 8, n_multiple: 8",
    ),
    _entry(
        "int8_build",
        INT8_BUILTINS,
        (_RT,),
        r"_int_mm_out_cuda not compiled for",
        "this CUDA build (_int_mm needs CUDA 11.7+)",
        "archs",
    ),
)

# TORCH_INTERNAL_ASSERT, and a bare torch._check(cond) (torch's own invariants carry no message;
# a kernel's refusal should say what it refuses).
_INTERNAL = re.compile(
    r"INTERNAL ASSERT FAILED|please report a bug to PyTorch|Expected cond to be True, but got False", re.I
)
_DEVICE_ERROR = re.compile(
    r"CUDA error|CUDA driver error|CUBLAS_STATUS_\w+|cuBLAS error|HIP error|HIPBLAS_STATUS_\w+|hipblaslt error|"
    r"device-side assert|illegal memory access|cudaError\w+|unspecified launch failure",
    re.I,
)
_NOT_SUPPORTED_STATUS = re.compile(
    r"CUBLAS_STATUS_NOT_SUPPORTED|HIPBLAS_STATUS_NOT_SUPPORTED|CUBLAS_STATUS_ARCH_MISMATCH|"
    r"no kernel image is available for execution on the device"
)


def _names(error: ErrorInfo) -> set:
    """Short class names of an error: its own, its root cause's, without Dynamo's Observed prefix."""
    names = set()
    for qualified in (error.type, error.root_type):
        name = qualified.rsplit(".", 1)[-1]
        if name.startswith("Observed"):
            name = name[len("Observed") :]
            names.add(name[: -len("Error")] if name.endswith("ErrorError") else name)
        names.add(name)
    return names


def _text(error: ErrorInfo) -> str:
    return f"{error.message}\n{error.root_message}"


def matching_refusal(error: ErrorInfo, kernel: str | None = None) -> Refusal | None:
    """The documented refusal this error is (of `kernel`'s op, or of any built-in op)."""
    names, text = _names(error), _text(error)
    for refusal in REFUSALS:
        if kernel is not None and kernel not in refusal.kernels:
            continue
        if names & set(refusal.types) and refusal.pattern.search(text):
            return refusal
    return None


def documented_refusal(kernel: str, eager: ErrorInfo) -> Refusal | None:
    """The built-in kernel's documented refusal that its eager error is, or None."""
    return matching_refusal(eager, kernel)


def internal_error(eager: ErrorInfo, compiled: ErrorInfo) -> str | None:
    """What makes this pair of errors a bug on its face, or None."""
    for side, error in (("eager", eager), ("compiled", compiled)):
        text = _text(error)
        found = _INTERNAL.search(text)
        if found:
            return f"{side} raised an internal assert ({found.group(0)})"
        device = _DEVICE_ERROR.search(text)
        if device and not _NOT_SUPPORTED_STATUS.search(text):
            return f"{side} raised a device error that is not a documented not-supported status ({device.group(0)})"
    return None


class DeclaredKernel(Protocol):
    """What Support.of reads of a kernel given as a matrix entry (matrix.spec.KernelSpec): its name
    and how it is given; its declarations are read by their Support field names."""

    @property
    def name(self) -> str: ...

    @property
    def impl(self) -> str | None: ...

    @property
    def fn(self) -> Callable[..., Any] | None: ...


@dataclass(frozen=True)
class Support(Declared):
    """What a kernel declares (`Declared`, kept as tuples), and whether it is a built-in: all that
    judge reads of a kernel. `Support.of` takes a KernelSpec (or a Support); None stays None."""

    name: str
    builtin: bool

    @classmethod
    def of(cls, kernel: Support | DeclaredKernel | None) -> Support | None:
        if kernel is None or isinstance(kernel, Support):
            return kernel
        # A built-in has neither an impl reference nor a hook-declared callable.
        builtin = kernel.impl is None and kernel.fn is None and getattr(kernel, "module", None) is None
        return cls(kernel.name, builtin, **declared_values(kernel))

    def to_json(self) -> dict:
        """What judge reads: the name, whether a built-in, the judged declarations."""
        return {"name": self.name, "builtin": self.builtin, **{name: getattr(self, name) for name in JUDGED_FIELDS}}


def _pairs(declared: Iterable[Iterable[str]]) -> set[tuple[str, ...]]:
    return {tuple(pair) for pair in declared}  # lists once a repro script reads them from JSON


Break = tuple[str, str]  # (the declaration's key, what breaks it)


def _in_list(key: str, axes: tuple[str, ...]) -> DeclaredRule:
    """A declaration listing the values an axis (each of `axes`) may take."""

    def check(kernel: Support, params: CaseParams) -> list[Break]:
        declared = getattr(kernel, key)
        found = []
        for axis in axes:
            value = getattr(params, axis)
            if declared and value not in declared:
                found.append((key, f"{axis} {value} is not in its {key} {list(declared)}"))
        return found

    return DeclaredRule(key, check, axes, LISTED)


def _in_pairs(key: str, a: str, b: str) -> DeclaredRule:
    """A declaration listing the (a, b) pairs two axes may take together."""

    def check(kernel: Support, params: CaseParams) -> list[Break]:
        declared = getattr(kernel, key)
        pair = getattr(params, a), getattr(params, b)
        if declared and pair not in _pairs(declared):
            return [(key, f"{pair[0]} x {pair[1]} is not in its {key}")]
        return []

    return DeclaredRule(key, check, (a, b), PAIRED)


def bias_outside(allowed: Sequence[str] | None, params: CaseParams) -> bool:
    """Whether a case's bias lies outside the out dtypes a bias is taken with (None: any), written
    once: a kernel's declaration and a built-in's measured op model are judged by it."""
    return params.bias and allowed is not None and params.out_dtype not in allowed


def _bias_out_dtypes(kernel: Support, params: CaseParams) -> list[Break]:
    out, allowed = params.out_dtype, kernel.bias_out_dtypes
    if allowed is not None and bias_outside(allowed, params):
        return [
            (
                "bias_out_dtypes",
                f"a bias with out_dtype {out} is outside its bias_out_dtypes {list(allowed)}",
            )
        ]
    return []


def _pair_rules(kernel: Support, params: CaseParams) -> list[Break]:
    pair, out = (params.scale_a, params.scale_b), params.out_dtype
    found = []
    for rule_pair, rule_outs, rule_bias in kernel.pair_rules or ():
        if tuple(rule_pair) != pair:
            continue
        if rule_outs and out not in rule_outs:
            found.append(
                (
                    "pair_rules",
                    f"out_dtype {out} is not in the out_dtypes {list(rule_outs)} of its pair {pair[0]} x {pair[1]}",
                )
            )
        if params.bias and rule_bias is False:
            found.append(("pair_rules", f"its pair {pair[0]} x {pair[1]} takes no bias"))
    return found


@dataclass(frozen=True)
class SizeLimit:
    """A limit on one size of a case, written once: a kernel's declaration (Support) and a
    built-in's measured op model (matrix/support.py OpModel.size_limits) are judged by it."""

    field: str  # the declaration's name: min_m, max_m, m_multiple, k_multiple, n_multiple
    dim: str  # m, k or n; M counts tokens (B*T for a 3-D activation)
    bound: str  # "min", "max" or "multiple"

    def outside(self, size: int, limit: int) -> bool:
        if self.bound == "min":
            return size < limit
        if self.bound == "max":
            return size > limit
        return bool(size % limit)

    def declared_rule(self) -> DeclaredRule:
        def check(kernel: Support, params: CaseParams) -> list[Break]:
            limit, size = getattr(kernel, self.field), getattr(params, self.dim)
            if limit is not None and self.outside(size, limit):
                return [(self.field, f"{self.dim.upper()} = {size} is outside its {self.field}: {limit}")]
            return []

        return DeclaredRule(self.field, check)


SIZE_LIMITS = (
    SizeLimit("min_m", "m", "min"),
    SizeLimit("max_m", "m", "max"),
    SizeLimit("m_multiple", "m", "multiple"),
    SizeLimit("k_multiple", "k", "multiple"),
    SizeLimit("n_multiple", "n", "multiple"),
)
SIZE_LIMIT_OF = {limit.field: limit for limit in SIZE_LIMITS}


@dataclass(frozen=True)
class DeclaredRule:
    """One declaration a kernel may make (a Support field) and its check: what of a case lies
    outside it. A new declaration is one row of DECLARED_RULES and its Support field;
    tests/test_support_rules.py fails a field no row reads."""

    field: str
    check: Callable[[Support, CaseParams], list[Break]]
    # The case axes a value list (LISTED) or a pair list (PAIRED) names: what a declaration
    # hint (reports/declaration_hints.py) reads off the cases; () for the other rules.
    axes: tuple[str, ...] = ()
    shape: str = ""


LISTED, PAIRED = "values", "pairs"


# In the order their breaks are listed.
DECLARED_RULES: tuple[DeclaredRule, ...] = (
    _in_list("scale_forms", ("scale_a", "scale_b")),
    _in_list("dtypes", ("dtype_a", "dtype_b")),
    _in_pairs("scale_pairs", "scale_a", "scale_b"),
    _in_pairs("dtype_pairs", "dtype_a", "dtype_b"),
    _in_list("out_dtypes", ("out_dtype",)),
    DeclaredRule("bias_out_dtypes", _bias_out_dtypes),
    _in_list("scale_layouts", ("scale_layout",)),
    _in_list("operand_layouts", ("operand_layout",)),
    _in_list("scale_dtypes", ("scale_dtype",)),
    DeclaredRule("pair_rules", _pair_rules),
    *(limit.declared_rule() for limit in SIZE_LIMITS),
)


def declared_breaks(kernel: Support | DeclaredKernel | None, params: CaseParams) -> list[tuple[str, str]]:
    """Every declaration of `kernel` (a KernelSpec or Support) that the case lies outside, as
    (the declaration's key, what breaks it), in DECLARED_RULES' order."""
    kernel = Support.of(kernel)
    if kernel is None:
        return []
    return [found for rule in DECLARED_RULES for found in rule.check(kernel, params)]


def outside_declared_support(kernel: Support | DeclaredKernel | None, params: CaseParams) -> str | None:
    """The first declaration of `kernel` (a KernelSpec or Support) that the case lies outside, or None."""
    found = declared_breaks(kernel, params)
    return found[0][1] if found else None


def judge(
    kernel: Support | DeclaredKernel | None, params: CaseParams | None, eager: ErrorInfo, compiled: ErrorInfo
) -> Outcome:
    """The outcome of a case that eager and compiled refuse alike; see the module docstring.
    `kernel` is the case's KernelSpec or Support; None for a harness rung (a plain matmul), whose
    alike refusals stay UNSUPPORTED unless they are internal errors."""
    kernel = Support.of(kernel)
    signature = signature_of(eager)
    bug = internal_error(eager, compiled)
    if bug:
        return Outcome(
            INTERNAL_ERROR, signature, "eager", f"eager and compiled raise alike, and {bug}: a bug, not a refusal"
        )
    if kernel is None or params is None:
        return Outcome(UNSUPPORTED, signature, "eager", "eager and compiled refuse alike")
    outside = outside_declared_support(kernel, params)
    if outside:
        return Outcome(
            UNSUPPORTED, signature, "eager", f"eager and compiled refuse alike, outside the declared support: {outside}"
        )
    if kernel.builtin:
        refusal = documented_refusal(kernel.name, eager)
        if refusal is not None:
            return Outcome(
                UNSUPPORTED,
                signature,
                "eager",
                f"eager and compiled refuse alike; a documented refusal: {refusal.constraint}",
            )
        return Outcome(
            REFUSED,
            signature,
            "eager",
            f"eager and compiled refuse alike, but built-in kernel {kernel.name} does not document this refusal",
        )
    detail = (
        "eager and compiled refuse alike, inside the kernel's declared support; declare what it does not support "
        f"({', '.join(JUDGED_FIELDS)}) to make such a case UNSUPPORTED"
    )
    refusal = matching_refusal(eager)
    if refusal is not None:
        hint = f": declare {refusal.declare}" if refusal.declare else ""
        detail += f". The error is a documented refusal of a built-in op ({refusal.constraint}){hint}"
    return Outcome(REFUSED, signature, "eager", detail)
