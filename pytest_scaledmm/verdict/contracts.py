"""How the harness calls a kernel, by its contract, as the function the pipeline runs eagerly and
compiles (pipeline.eager_compile_check) and the arguments it is given.

- `call`: one function, ``kernel(a, b, scale_a, scale_b, bias=..., out_dtype=...)``, compiled whole.
- `prepare`: ``weight = prepare(b, scale_b, bias=..., out_dtype=...)`` once, eagerly, outside
  compile (as torchao's ``quantize_`` builds its tensor-subclass weights); then
  ``kernel(a, scale_a, weight)`` is what runs eagerly and compiled, the weight an input of it.
- `module`: ``m = module(b, scale_b, bias=..., out_dtype=...)`` once, eagerly; ``m(a, scale_a)``
  is what runs, compiled as a module (``torch.compile(m)``), as serving stacks run their layers.

A `dynamic` activation replaces ``a, scale_a`` by ``x``, the high-precision activation (in the
output dtype) that the kernel quantises itself: x = a * scale_a exactly (draw.py builds it),
and the reference is computed from x (reference.py).

Keywords go only where the callable's signature takes them: ``use_fast_accum`` and ``forms``
(the case's scale form names, (form_a, form_b)) are optional everywhere; the apply step gets
``out_dtype`` when it takes it. The built weight object or module is the same for every call of a
case, its serving loop included: only the activation changes between calls.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .case_axes import CaseParams
from .draw import CaseInputs, make_inputs, second_call_seed
from .microscaling import is_fp4
from .pipeline import PristineInputs
from .scale_forms import WHOLE, scale_form

CONTRACTS = ("call", "prepare", "module")
OTHER_ACTIVATION_FACTOR = 0.75  # the serving loop's second activation, relative to the first


def _is_op(fn: object) -> bool:

    return isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)) or isinstance(
        getattr(fn, "_opoverload", None), torch._ops.OpOverload
    )


def _takes(fn: Callable[..., Any], name: str) -> bool:
    if _is_op(fn):
        return name != "forms"  # a torch op takes the harness's keywords, never `forms`
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return name != "forms"  # an op without a readable signature takes the harness's keywords
    # `forms` is the harness's own: only a parameter of that name asks for it, never **kwargs (a
    # wrapper forwarding them to torch would pass it on).
    return any(
        (p.kind == p.VAR_KEYWORD and name != "forms")
        or (p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in params
    )


def optional_keywords(fn: Callable[..., Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of `values` whose names `fn` takes."""
    return {name: value for name, value in values.items() if _takes(fn, name)}


@dataclass
class CaseCall:
    """What the pipeline runs: `fn(*args)`, eagerly and compiled; `names` of the arguments for
    details; `built` the weight object or module made once (None for `call`)."""

    fn: Callable
    args: tuple
    names: list
    built: Any = None


def activation_args(inputs: CaseInputs, dynamic: bool) -> tuple[Any, ...]:
    return (inputs.activation,) if dynamic else (inputs.a, inputs.scale_a)


def _function_call(kernel: Callable[..., Any], inputs: CaseInputs, keywords: dict[str, Any], dynamic: bool) -> CaseCall:
    """The call contract: the kernel called with the operands, scales and bias (a dynamic one with
    the high-precision activation in place of a and its scale), the rest by keyword."""
    extra_names = tuple(inputs.extras)  # offs, scale_result: passed by keyword after bias
    if dynamic:

        def dynamic_case(
            x: torch.Tensor,
            b: torch.Tensor,
            scale_b: torch.Tensor | tuple[torch.Tensor, ...],
            bias: torch.Tensor | None,
            *extra: torch.Tensor,
        ) -> Any:
            return kernel(x, b, scale_b, bias=bias, **keywords, **dict(zip(extra_names, extra)))

        args = (inputs.activation, inputs.b, inputs.scale_b, inputs.bias, *inputs.extras.values())
        return CaseCall(dynamic_case, args, ["x", "b", "scale_b", "bias", *extra_names])

    def scaled_mm_case(
        a: torch.Tensor,
        b: torch.Tensor,
        scale_a: torch.Tensor | tuple[torch.Tensor, ...],
        scale_b: torch.Tensor | tuple[torch.Tensor, ...],
        bias: torch.Tensor | None,
        *extra: torch.Tensor,
    ) -> Any:
        return kernel(a, b, scale_a, scale_b, bias=bias, **keywords, **dict(zip(extra_names, extra)))

    return CaseCall(scaled_mm_case, inputs.args(), ["a", "b", "scale_a", "scale_b", "bias", *extra_names])


def case_call(
    kernel: Callable[..., Any],
    inputs: CaseInputs,
    *,
    contract: str = "call",
    prepare: Callable[..., Any] | None = None,
    dynamic: bool = False,
    forms: Sequence[str] = (),
    use_fast_accum_keyword: bool = True,
    built: Any = None,
) -> CaseCall:
    """The CaseCall of one case's inputs (inputs.CaseInputs). `built`: a weight object or module
    already made for this case (the serving loop's later calls reuse the first one's)."""
    out_dtype, fast = inputs.out_dtype, inputs.use_fast_accum
    optional: dict[str, Any] = {"forms": tuple(forms)}
    if use_fast_accum_keyword:
        optional["use_fast_accum"] = fast
    first = ("x",) if dynamic else ("a", "scale_a")
    if contract == "call":
        return _function_call(kernel, inputs, {"out_dtype": out_dtype, **optional_keywords(kernel, optional)}, dynamic)
    builder = kernel if contract == "module" else prepare
    if builder is None:
        raise TypeError("a prepare contract without its build step")
    if built is None:
        # Once, eagerly, outside any compiled region: what the kernel's library does at load time.
        # On copies: a step that rewrites its inputs cannot change what the reference is of.
        b, scale_b, bias = PristineInputs((inputs.b, inputs.scale_b, inputs.bias), ["b", "scale_b", "bias"]).fresh()
        built = builder(b, scale_b, bias=bias, out_dtype=out_dtype, **optional_keywords(builder, optional))
        if contract == "module" and not callable(built):
            raise TypeError(f"the module factory returned {type(built).__name__}, not a callable module")
    if contract == "module":
        return CaseCall(built, activation_args(inputs, dynamic), list(first), built)
    keywords = optional_keywords(kernel, {"out_dtype": out_dtype, "forms": tuple(forms)})
    if keywords:

        def apply_case(*args: Any) -> Any:
            return kernel(*args, **keywords)

        return CaseCall(apply_case, (*activation_args(inputs, dynamic), built), [*first, "weight"], built)
    return CaseCall(kernel, (*activation_args(inputs, dynamic), built), [*first, "weight"], built)


def _same_layout(t: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A copy of tensor `t` (its storage, strides and offset kept) holding `values` in its view."""

    storage = t.untyped_storage().clone()
    copy = torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, t.storage_offset(), t.size(), t.stride())
    # An expanded view (stride 0) holds one element per broadcast dim: written through that one.
    broadcast = [size > 1 and stride == 0 for size, stride in zip(t.size(), t.stride())]
    target = copy.as_strided([1 if b else size for b, size in zip(broadcast, t.size())], t.stride(), t.storage_offset())
    target.copy_(values.to(t.device)[tuple(slice(0, 1) if b else slice(None) for b in broadcast)])
    return copy


def _other_values(t: torch.Tensor, flip: bool) -> torch.Tensor:
    """t's values negated (int8 clamped), rows of its token view reversed when `flip`."""

    if is_fp4(t):
        return t  # packed pairs: left as they are
    if not t.numel():  # K = 0: nothing to change (and no row view: reshape(-1, 0) is ambiguous)
        return t.detach().clone()
    shape = t.shape
    rows = t.detach().reshape(-1, shape[-1]) if t.dim() > 1 else t.detach().reshape(-1, 1)
    wide = rows.to(torch.int16) if t.dtype == torch.int8 else rows.to(torch.float64)
    wide = -wide
    if t.dtype == torch.int8:
        wide = wide.clamp(-128, 127)
    if flip:
        wide = wide.flip(0)
    return wide.to(t.dtype).reshape(shape)


def other_activation(inputs: CaseInputs, params: CaseParams) -> CaseInputs:
    """The case's inputs with another activation of the same shape and layout and the same
        weights: a negated, its tokens in reverse order where scale_a's grid allows (one scale per
        token or one for all), scale_a reordered with it and times 3/4 (x negated and times 3/4: the
    quantiser's new scale is 3/4 of the first, exact, and a kept scale is off). For the serving loop of a kernel whose
        weights are built once: the weight object stays, only the activation changes, and the
        reference stays exact."""

    row_block, _ = scale_form(params.scale_a).block("a")
    flip = params.m > 1 and row_block in (1, WHOLE)
    tokens_scaled = flip and row_block == 1

    def scale(s: torch.Tensor | tuple[torch.Tensor, ...] | None) -> torch.Tensor | tuple[torch.Tensor, ...] | None:
        # Times 3/4 too (exact): a kernel that keeps an earlier call's activation scale rounds off
        # the grid and is caught, where a power of two would map exactly again.
        if s is None or isinstance(s, tuple) or s.dtype != torch.float32:
            return s
        values = s.detach()
        if tokens_scaled and s.numel() > 1:
            values = values.reshape(-1).flip(0).reshape(s.shape)
        return _same_layout(s, values * OTHER_ACTIVATION_FACTOR)

    a = _same_layout(inputs.a, _other_values(inputs.a, flip))
    activation = None
    if inputs.activation is not None:
        x = inputs.activation
        values = x.detach().reshape(-1, x.shape[-1]).neg() * OTHER_ACTIVATION_FACTOR
        activation = _same_layout(x, (values.flip(0) if flip else values).reshape(x.shape))
    return dataclasses.replace(
        inputs, a=a, scale_a=scale(inputs.scale_a), finite_scale_a=scale(inputs.finite_scale_a), activation=activation
    )


def serving_inputs(contract: str, params: CaseParams, inputs: CaseInputs, seed: int, device: str) -> CaseInputs:
    """The serving loop's next inputs: new values of the same shape (second_call_seed) for a
    one-function kernel; another activation against the same built weights otherwise."""
    if contract == "call":
        return make_inputs(params, second_call_seed(seed), device)
    return other_activation(inputs, params)


def with_weights_of(first: CaseInputs, inputs: CaseInputs, contract: str) -> CaseInputs:
    """`inputs` (another M of the case) with the first inputs' weights when they are built once."""

    if contract == "call":
        return inputs
    return dataclasses.replace(
        inputs, b=first.b, scale_b=first.scale_b, finite_scale_b=first.finite_scale_b, bias=first.bias
    )
