"""Helpers for tests that run cases without a pytest session around them.

`run_matrix` parses a matrix text and calls run_case on each case, which is what the plugin
does per item minus the session: a few tenths of a second per case on a CPU.

`warm_torch` imports, once in the outer test process, what torch imports lazily while
compiling and running opcheck. pytester's in-process runs drop the modules imported during a
run, and some torch modules (torch._inductor.test_operators) register an op library on import:
a second import in the same process raises.
"""

import functools
from pathlib import Path

import torch


@functools.lru_cache(maxsize=None)
def warm_torch() -> None:
    import planted_kernels

    a = torch.randn(4, 32).to(torch.float8_e4m3fn)
    b = torch.randn(16, 32).to(torch.float8_e4m3fn).t()
    scale = torch.ones(())
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        fn = torch.compile(planted_kernels.correct_custom_op, backend=backend, fullgraph=True)
        fn(a, b, scale, scale, None, torch.bfloat16, False)
    torch._dynamo.reset()
    # float32 operands: test_schema cannot compare fp8 tensors on the CPU.
    args = (a.float(), b.float(), scale, scale)
    torch.library.opcheck(planted_kernels.correct_custom_op, args, {"out_dtype": torch.float32})


def run_matrix(text: str, profile: str = "default", declared_kernels=()) -> list:
    """[(case, outcome)] for every case of the profile, run in this process on the CPU."""
    from pytest_scaledmm.matrix.cases import generate_cases
    from pytest_scaledmm.matrix.kernels import resolve_kernels
    from pytest_scaledmm.execution.run import RunContext, run_case
    from pytest_scaledmm.matrix.spec import parse_spec

    spec = parse_spec(Path("matrix.yaml"), text, declared_kernels=declared_kernels)
    cases, _ = generate_cases(spec, spec.profile(profile))
    ctx = RunContext(
        device="cpu",
        run_seed=spec.seed,
        kernel_specs={k.name: k for k in spec.kernels},
        kernels=resolve_kernels(spec.path, spec.kernels),
    )
    return [(case, run_case(case, ctx)) for case in cases]
