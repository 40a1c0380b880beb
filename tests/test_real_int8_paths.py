"""The shipped int8 kernels reach torch's own int8 paths: int8_bmm runs torch._int_mm on the int8
tokens (no int32 widening before a bmm), and an activation of one token comes, among the
operand layouts, with stride 0 in its size-1 dimensions, as Inductor emits it
(pytorch#195066). A kernel that takes its leading dimension from that stride is caught by a
matrix that lists only it; its twin that reads K there is clean."""

from collections import Counter
from pathlib import Path

import pytest
import yaml

from matrices import WITHOUT_M65536_YAML
from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.spec import parse_spec
from pytest_scaledmm.verdict.draw import make_inputs

ROOT = Path(__file__).resolve().parents[1]
TOKEN_STRIDE0 = "a_token_stride0"
FAILED = ("MISMATCH", "EAGER_ERROR", "COMPILE_ONLY_ERROR", "ERROR_PARITY", "CONTRACT_VIOLATION")


def _aten_ops_called(fn, *args, **kwargs) -> Counter:
    """The aten overloads `fn` dispatches, counted."""
    from torch.utils._python_dispatch import TorchDispatchMode

    called: Counter = Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            called[str(func)] += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn(*args, **kwargs)
    return called


def _int8_operands(batches: int, tokens: int, k: int, n: int):
    import torch

    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (batches, tokens, k), dtype=torch.int8, generator=generator)
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=generator).t()
    scale_a = torch.rand(batches * tokens, 1, generator=generator) + 0.5
    scale_b = torch.rand(1, n, generator=generator) + 0.5
    return a, b, scale_a, scale_b


def test_int8_bmm_runs_int_mm_on_the_int8_tokens_eagerly():
    import torch

    from pytest_scaledmm.matrix.kernels import int8_bmm

    a, b, scale_a, scale_b = _int8_operands(2, 5, 32, 16)
    called = _aten_ops_called(int8_bmm, a, b, scale_a, scale_b, out_dtype=torch.float32)
    assert called["aten._int_mm.default"] == 1, called
    assert not [op for op in called if "bmm" in op], called
    exact = (a.double() @ b.double()) * scale_a.double().reshape(2, 5, 1) * scale_b.double()
    out = int8_bmm(a, b, scale_a, scale_b, out_dtype=torch.float32)
    torch.testing.assert_close(out.double(), exact, rtol=1e-6, atol=1e-6)


def test_int8_bmm_compiles_to_int_mm_under_inductor():
    import torch
    from torch._inductor.utils import run_and_get_code

    from pytest_scaledmm.matrix.kernels import int8_bmm

    a, b, scale_a, scale_b = _int8_operands(2, 5, 32, 16)
    torch._dynamo.reset()
    compiled = torch.compile(int8_bmm, fullgraph=True)
    _, code = run_and_get_code(compiled, a, b, scale_a, scale_b, out_dtype=torch.float32)
    source = "\n".join(code)
    assert "_int_mm" in source
    assert "bmm" not in source


def _shipped_default_cases():
    spec = parse_spec(ROOT / "matrix.yaml", (ROOT / "matrix.yaml").read_text())
    return generate_cases(spec, spec.profile("default"), "cpu")[0]


def _int8_bmm_cases():
    """The cases of a matrix of int8_bmm alone with 2-D and 3-D activations."""
    document = {"version": 1, "kernels": ["int8_bmm"], "axes": {"activation_rank": [2, 3]}}
    text = yaml.safe_dump({**document, "profiles": {"default": {"cases": 40}}})
    spec = parse_spec(Path("matrix.yaml"), text)
    return generate_cases(spec, spec.profile("default"), "cpu")[0]


def test_the_token_stride0_layout_is_a_single_token_with_stride_0_in_its_size_1_dims():
    # The default profile's kernels take 2-D operands only; int8_bmm gives the 3-D [1, 1, K] token.
    cases = [c for c in [*_shipped_default_cases(), *_int8_bmm_cases()] if c.params.operand_layout == TOKEN_STRIDE0]
    assert cases
    ranks = set()
    for case in cases:
        assert case.params.m == 1, case.id
        assert "-tok0-" in case.id
        inputs = make_inputs(case.params, 1, "cpu")
        size_one = [stride for size, stride in zip(inputs.a.shape, inputs.a.stride()) if size == 1]
        assert size_one and set(size_one) == {0}, (case.id, inputs.a.shape, inputs.a.stride())
        ranks.add(inputs.a.dim())
    assert ranks == {2, 3}


KERNELS_ONLY = """\
version: 1
kernels:
  - {{name: {name}, impl: "planted_layout_kernels:{name}"}}
profiles:
  default: {{cases: 12}}
"""


def _run_kernels_only(matrix_project, name: str) -> list:
    # The kernel alone, every axis at its default; the limit keeps only the M = 65536 extreme out
    # (seconds a call on the CPU; the bug is at M = 1).
    matrix_project.write_matrix(KERNELS_ONLY.format(name=name) + WITHOUT_M65536_YAML)
    matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", "-q")
    return matrix_project.report()["cases"]


@pytest.mark.slow
def test_a_kernel_that_takes_lda_from_a_size_1_stride_is_caught_by_a_matrix_of_only_it(matrix_project):
    records = _run_kernels_only(matrix_project, "lda_from_stride")
    token = [r for r in records if r["params"].get("operand_layout") == TOKEN_STRIDE0]
    assert token, [r["id"] for r in records]
    assert any(r["outcome"] == "MISMATCH" for r in token), [(r["id"], r["outcome"]) for r in token]
    # Only there: every other layout hands it lda >= K.
    others = [r for r in records if r["params"].get("operand_layout") != TOKEN_STRIDE0]
    assert others and not [r["id"] for r in others if r["outcome"] in FAILED]


@pytest.mark.slow
def test_its_twin_that_reads_k_for_a_size_1_dim_is_clean(matrix_project):
    records = _run_kernels_only(matrix_project, "lda_from_shape")
    assert any(r["params"].get("operand_layout") == TOKEN_STRIDE0 and r["outcome"] == "PASS" for r in records)
    assert not [(r["id"], r["outcome"]) for r in records if r["outcome"] in FAILED]
