"""Kernels for tests/test_contracts.py at the edges of the kernel contracts: a wrapper that forwards
every keyword, a prepare step that changes the caller's weight scale, a module that keeps a stale
activation scale."""

import torch


def kwargs_wrapper(a, b, scale_a, scale_b, **kwargs):
    """The most common wrapper shape: forwards every keyword to torch._scaled_mm."""
    return torch._scaled_mm(a, b, scale_a, scale_b, **kwargs)


def keep(a, scale_a, weight):
    b, scale_b, bias, out_dtype = weight
    return torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)


def doubling_prepare(b, scale_b, *, bias=None, out_dtype):
    """Wrong: scales the caller's weight scale in place and keeps it (outputs are 2x the
    product of the weights it was given)."""
    scale_b.mul_(2)
    return b, scale_b, bias, out_dtype


class StaleScale(torch.nn.Module):
    """Wrong: calibrates its per-tensor activation scale on the first call and keeps it."""

    def __init__(self, b, scale_b, bias, out_dtype):
        super().__init__()
        self.b, self.scale_b, self.bias, self.out_dtype, self.scale = b, scale_b, bias, out_dtype, None

    def forward(self, x):
        t = x.reshape(-1, x.shape[-1]).float()
        if self.scale is None:
            self.scale = (t.abs().amax() / 448.0).clamp_min(1e-12)
        q = (t / self.scale).clamp(-448, 448).to(torch.float8_e4m3fn)
        out = torch._scaled_mm(
            q,
            self.b,
            self.scale.reshape(()),
            self.scale_b.reshape(()).float(),
            bias=self.bias,
            out_dtype=self.out_dtype,
        )
        return out.reshape(*x.shape[:-1], self.b.shape[-1])


def stale_scale(b, scale_b, *, bias=None, out_dtype):
    return StaleScale(b, scale_b, bias, out_dtype)
