"""torch.library.opcheck of a custom-op kernel on a case's inputs.

A custom op's schema, fake (meta) implementation and behaviour under dynamic shapes are what
torch.compile relies on; opcheck tests them against the real kernel. A wrong fake shows up in
the matrix as a compiled failure far from its cause, so it gets its own outcome, OPCHECK_FAILED.
The run checks once per case family (execution/opcheck_cache.py); a repro script checks its case.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

import torch

from .case_axes import CaseParams
from .draw import CaseInputs
from .outcome import ErrorInfo, describe_exception, signature_of

_FALLBACK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
_FAILED_UTIL = re.compile(r"(test_\w+) failed")


@dataclass
class OpcheckResult:
    family: str
    ran: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)  # test util -> why it was not run
    error: ErrorInfo | None = None
    failed_util: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def signature(self) -> str:
        util = self.failed_util or "opcheck"
        return f"opcheck {util}: {signature_of(self.error)}" if self.error else ""

    def to_json(self) -> dict:
        data = asdict(self)
        data["error"] = asdict(self.error) if self.error else None
        return data


def opcheck_params(params: CaseParams) -> CaseParams:
    """The case's parameters for its opcheck inputs: opcheck compares outputs exactly, so NaN
    from a special scale value would fail it on its own."""
    return params.with_values(special_scale="none", special_operand="none")


@cache
def _schema_check_refusal(dtype_name: str, device: str) -> str | None:
    """test_schema compares inputs before and after the call with torch.allclose, which some
    dtypes (fp8 on several releases) do not implement: a limitation of the checker, not the op."""

    dtype = getattr(torch, dtype_name)
    probe = torch.ones(2, device=device).to(dtype)
    try:
        torch.allclose(probe, probe, equal_nan=True)
    except Exception as exc:  # whatever the checker would hit
        return f"torch.allclose does not support {dtype_name} on {device}: {type(exc).__name__}"
    return None


def run_opcheck(op: Callable[..., Any], inputs: CaseInputs, family: str) -> OpcheckResult:
    """opcheck's default test utils on `inputs` (inputs.CaseInputs), less test_schema where its
    comparison cannot handle the operands' dtype."""

    result = OpcheckResult(family)
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None:
        result.skipped["opcheck"] = f"torch {torch.__version__} has no torch.library.opcheck"
        return result
    utils = list(getattr(torch.library, "_OPCHECK_DEFAULT_UTILS", _FALLBACK_UTILS))
    device = str(inputs.a.device)
    for tensor in (inputs.a, inputs.b):
        refusal = _schema_check_refusal(str(tensor.dtype).replace("torch.", ""), device)
        if refusal and "test_schema" in utils:
            utils.remove("test_schema")
            result.skipped["test_schema"] = refusal
    args = (inputs.a, inputs.b, inputs.scale_a, inputs.scale_b)
    kwargs = {"bias": inputs.bias, "out_dtype": inputs.out_dtype, "use_fast_accum": inputs.use_fast_accum}
    result.ran = utils
    try:
        opcheck(op, args, kwargs, test_utils=utils)
    except Exception as exc:  # OpCheckError, or the op raising on the checker's inputs
        result.error = describe_exception(exc, "opcheck")
        found = _FAILED_UTIL.search(str(exc))
        result.failed_util = found.group(1) if found else None
    return result
