"""Facts of a case's input tensors (shape, strides, offset, dtype, checksum): recorded in a repro
script when it is written, compared when it runs, so that it says when its tensors are not the
run's."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .draw import CaseInputs

INPUT_NAMES = ("a", "b", "scale_a", "scale_b", "bias")


def tensor_facts(t: torch.Tensor | tuple | None) -> dict | None:
    if t is None:
        return None
    if isinstance(t, tuple):  # a two-level (NVFP4) scale: block scales, global scale
        return {"levels": [tensor_facts(level) for level in t]}

    source = t.detach().cpu()
    if source.element_size() == 1:
        source = source.view(torch.uint8)  # packed fp4 and some fp8 dtypes have no copy kernel
    # A fresh dense copy: contiguous() keeps a stride on size-1 dims, which view() refuses.
    flat = source.clone(memory_format=torch.contiguous_format).reshape(-1)
    raw = bytes(flat.view(torch.uint8).tolist())
    return {
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "offset": int(t.storage_offset()),
        "dtype": str(t.dtype).replace("torch.", ""),
        "crc32": zlib.crc32(raw),
    }


def input_facts(inputs: CaseInputs) -> dict:
    """{name: tensor_facts} of a case's inputs (inputs.CaseInputs), in call order."""
    return {name: tensor_facts(tensor) for name, tensor in zip(INPUT_NAMES, inputs.args())}


def input_drift(facts: Mapping[str, dict | None], recorded: Mapping[str, dict | None]) -> list:
    """One line per input whose facts differ from the recorded ones."""
    return [
        f"{name}: got {facts[name]}, the run had {recorded.get(name)}"
        for name in facts
        if facts[name] != recorded.get(name)
    ]
