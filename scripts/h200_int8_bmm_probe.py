"""What int8_bmm (matrix/kernels.py: torch._int_mm on the flattened tokens) does on this device,
eagerly and compiled: one line per shape and mode, the error's first line where it raises.

    python scripts/h200_int8_bmm_probe.py
"""

import time

import torch

from pytest_scaledmm.matrix.kernels import int8_bmm

SHAPES = [(2, 8, 32, 16), (2, 17, 48, 40), (1, 1, 32, 16), (4, 64, 128, 128), (2, 32, 20, 24), (1, 256, 256, 256)]
MODES = ["eager", "inductor", "max-autotune-no-cudagraphs"]


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print("torch", torch.__version__, device, torch.cuda.get_device_name(0) if device == "cuda" else "")
    for batches, tokens, k, n in SHAPES:
        a = torch.randint(-128, 128, (batches, tokens, k), dtype=torch.int8, device=device)
        b = torch.randint(-128, 128, (k, n), dtype=torch.int8, device=device)
        scale_a, scale_b = torch.rand(batches * tokens, 1, device=device), torch.rand(1, n, device=device)
        exact = (a.double() @ b.double()) * scale_a.double().reshape(batches, tokens, 1) * scale_b.double()
        for mode in MODES:
            torch._dynamo.reset()
            began = time.perf_counter()
            try:
                fn = (
                    int8_bmm
                    if mode == "eager"
                    else torch.compile(int8_bmm, fullgraph=True, mode=None if mode == "inductor" else mode)
                )
                out = fn(a, b, scale_a, scale_b, out_dtype=torch.float32)
                error = float((out.double() - exact).abs().max() / exact.abs().max().clamp_min(1e-30))
                said = f"ok rel err {error:.2e}"
            except Exception as exc:
                said = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]}"
            print(f"B{batches} T{tokens} K{k} N{n} {mode}: {said} ({time.perf_counter() - began:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
