"""Which GEMM kernel Inductor chose for a case, read from the code it generated.

`output_code()` collects the code of every graph Inductor compiles (or loads from its cache)
while it is open, through the hook torch._inductor.utils.run_and_get_code uses
(GraphLowering.save_output_code), so the case's own compile is read: nothing is compiled twice.
An AOTInductor package is read from its C++ sources instead (`package_code`).

`kernel_choice(codes)` names the GEMM kernels in that code and gives one short label:
  aten                   an ATen call (cuBLAS, or the CPU's ATen op): extern_kernels._scaled_mm,
                         aoti_torch_cuda__scaled_mm_out, torch.ops.aten._scaled_mm.default
  triton-template        an Inductor Triton GEMM template (triton_tem_fused__scaled_mm_0)
  triton-persistent-tma  a Triton template that builds TMA descriptors (the persistent TMA ones)
  cutlass                a CUTLASS template
  decomposed             no GEMM call or template: the product is done by generated pointwise
                         or reduction kernels
  unknown                nothing recognisable (or no code was captured)
Several different GEMM kernels in one case give their labels joined by "+".

stdlib and torch only: repro scripts embed this module.
"""

from __future__ import annotations

import contextlib
import re
import zipfile
from collections.abc import Iterator

ATEN, TRITON_TEMPLATE, PERSISTENT_TMA, CUTLASS, DECOMPOSED, UNKNOWN = (
    "aten",
    "triton-template",
    "triton-persistent-tma",
    "cutlass",
    "decomposed",
    "unknown",
)
LABELS = (ATEN, TRITON_TEMPLATE, PERSISTENT_TMA, CUTLASS, DECOMPOSED, UNKNOWN)

# ATen ops that are a matrix product (an extern call of any other op is an epilogue or a copy).
GEMM_OPS = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "matmul",
    "_scaled_mm",
    "_scaled_mm_v2",
    "_int_mm",
    "_scaled_grouped_mm",
    "_grouped_mm",
    "_weight_int8pack_mm",
    "_addmm_activation",
}
_EXTERN = re.compile(r"\bextern_kernels\.(\w+)\s*\(")
_AOTI_SHIM = re.compile(r"\baoti_torch_(cpu|cuda|xpu|mps)_(\w+?)(?:_out)?\s*\(")
_FALLBACK = re.compile(r"\btorch\.ops\.aten\.(\w+)\.\w+\s*\(")
_TEMPLATE = re.compile(r"\b(triton_tem_\w+)")
_TMA = re.compile(
    r"make_tensor_descriptor|tensormap_create|_experimental_descriptor_load|load_tensor_descriptor|TensorDescriptor"
)
_CUTLASS = re.compile(r"\b(\w*cutlass\w*_(?:fused_)?\w*mm\w*|cuda_fused_\w+)")
_GENERATED = re.compile(r"\b((?:triton_(?:poi|per|red)|cpp_fused)_\w+)")


def kernel_choice(codes: list) -> dict:
    """{"label": one of LABELS (or several joined by "+"), "kernels": the raw names found, in
    order of first appearance}."""
    text = "\n".join(code for code in codes if isinstance(code, str))
    found: dict = {}  # raw name -> label

    def add(name: str, label: str) -> None:
        found.setdefault(name, label)

    for match in _EXTERN.finditer(text):
        if match.group(1) in GEMM_OPS:
            add(f"extern_kernels.{match.group(1)}", ATEN)
    for match in _AOTI_SHIM.finditer(text):
        if match.group(2) in GEMM_OPS:
            add(match.group(0).rstrip("( \t"), ATEN)
    for match in _FALLBACK.finditer(text):
        if match.group(1) in GEMM_OPS:
            add(f"torch.ops.aten.{match.group(1)}", ATEN)
    tma = bool(_TMA.search(text))
    for match in _TEMPLATE.finditer(text):
        add(match.group(1), PERSISTENT_TMA if tma else TRITON_TEMPLATE)
    for match in _CUTLASS.finditer(text):
        add(match.group(1), CUTLASS)
    if not found:
        generated = list(dict.fromkeys(m.group(1) for m in _GENERATED.finditer(text)))
        label = DECOMPOSED if generated else UNKNOWN
        return {"label": label, "kernels": generated}
    labels = [label for label in LABELS if label in found.values()]
    return {"label": "+".join(labels), "kernels": list(found)}


@contextlib.contextmanager
def output_code() -> Iterator[list]:
    """The code of every graph Inductor compiles or loads from its cache while open (a list
    filled in place); an earlier hook (run_and_get_code around this) still gets the code."""
    try:
        from torch._inductor.graph import GraphLowering  # noqa: PLC0415  lazy: torch-free collection
    except Exception:
        yield []
        return
    if not hasattr(GraphLowering, "save_output_code"):  # an older torch: label "unknown"
        yield []
        return
    codes: list = []
    raw = GraphLowering.__dict__.get("save_output_code")  # restored as it was (a staticmethod or None)
    before = GraphLowering.save_output_code

    def save(code: str) -> None:
        codes.append(code)
        if before is not None:
            before(code)

    GraphLowering.save_output_code = staticmethod(save)
    try:
        yield codes
    finally:
        GraphLowering.save_output_code = raw


def package_code(path: str) -> list:
    """The C++ and Python sources inside an AOTInductor package (its wrapper names the GEMM calls)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return [
                archive.read(name).decode("utf-8", "replace")
                for name in archive.namelist()
                if name.endswith((".cpp", ".py"))
            ]
    except (OSError, zipfile.BadZipFile):
        return []


def label_of(choice: dict | None) -> str | None:
    """A record's chosen-kernel label, or None when it has none (not an Inductor mode, an older report)."""
    if isinstance(choice, dict) and isinstance(choice.get("label"), str):
        return choice["label"]
    return None
