"""Warnings torch gives while it is imported that say nothing about the user's code or the
matrix: filtered for those imports alone, by category, message and the torch module raising
them; the user's own warnings, and torch's later ones, are untouched."""

from __future__ import annotations

import contextlib
import importlib
import warnings

# (category, message regex): torch built without NumPy says so at import though nothing here
# needs NumPy; Inductor's import reaches torch.utils.mkldnn, which still uses TorchScript.
TORCH_IMPORT_NOISE = (
    (UserWarning, r"Failed to initialize NumPy"),
    (DeprecationWarning, r"`torch\.jit\.script(_method)?` is deprecated"),
)


@contextlib.contextmanager
def quiet_torch_imports():
    with warnings.catch_warnings():
        for category, message in TORCH_IMPORT_NOISE:
            warnings.filterwarnings("ignore", message=message, category=category, module=r"torch(\.|$)")
        yield


def import_torch(inductor: bool = False) -> None:
    """Import torch (and Inductor's compiler, when asked) without their import-time noise. An
    import that fails is left to the code that needs the module, which says what is missing."""
    modules = ["torch"] + (
        ["torch._dynamo", "torch._functorch.aot_autograd", "torch._inductor.compile_fx"] if inductor else []
    )
    with quiet_torch_imports():
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:
                return
