"""Run cases without a pytest session around them.

`run_matrix` parses a matrix text and calls run_case on each case, which is what the plugin
does per item minus the session: a few tenths of a second per case on a CPU. What torch imports
lazily while compiling and running opcheck is loaded once, up front, by conftest.py.
"""

from pathlib import Path


def run_matrix(text: str, profile: str = "default", declared_kernels=()) -> list:
    """[(case, outcome)] for every case of the profile, run in this process on the CPU."""
    from pytest_scaledmm.execution.run import RunContext, run_case
    from pytest_scaledmm.execution.sequence_plan import drawn_values
    from pytest_scaledmm.matrix.cases import generate_cases
    from pytest_scaledmm.matrix.kernels import resolve_kernels
    from pytest_scaledmm.matrix.spec import parse_spec

    spec = parse_spec(Path("matrix.yaml"), text, declared_kernels=declared_kernels)
    cases, _ = generate_cases(spec, spec.profile(profile))
    ctx = RunContext(
        device="cpu",
        run_seed=spec.seed,
        kernel_specs={k.name: k for k in spec.kernels},
        kernels=resolve_kernels(spec.path, spec.kernels),
        drawn=drawn_values(cases),  # as a run's session gives it: the sequence's dtype steps
    )
    return [(case, run_case(case, ctx)) for case in cases]
