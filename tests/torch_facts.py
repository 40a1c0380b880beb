"""What the installed torch does, probed where a test's expectation depends on it (builds of one
release differ)."""

import functools


@functools.cache
def eager_takes_half_tensorwise_scales() -> bool:
    """Whether eager torch._scaled_mm takes bf16 per-tensor scales on the CPU (some builds do, their
    meta function never: the compiled side then refuses alone, torch's own discrepancy)."""
    import torch

    a = torch.ones(16, 32).to(torch.float8_e4m3fn)
    b = torch.ones(32, 16).to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.tensor(1.0, dtype=torch.bfloat16)
    try:
        torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)
    except (RuntimeError, ValueError):
        return False
    return True


@functools.cache
def cpu_scaled_mm_leaves_empty_k_unwritten() -> bool:
    """Whether torch._scaled_mm on the CPU leaves its output unwritten at K = 0 (it must be zeros):
    some of a few calls come back non-zero."""
    import torch

    a = torch.ones(16, 0).to(torch.float8_e4m3fn)
    b = torch.ones(0, 256).to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.tensor(1.0)
    for _ in range(8):
        torch.full((16, 256), float("nan"), dtype=torch.float16)  # leaves its block to be reused
        out = torch._scaled_mm(a, b, one, one, out_dtype=torch.float16)
        if bool((out != 0).any()):
            return True
    return False
