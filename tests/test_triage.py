"""The triage ladder: for one failing case per signature, which layer breaks, whether the
quantized path is at fault, and which knobs make it pass."""

import os

from case_factory import case_params

from matrices import SYNTHETIC_YAML
from pytest_scaledmm.execution import triage
from pytest_scaledmm.matrix.case_params import Case
from pytest_scaledmm.verdict.outcome import Outcome

TRIAGE_MATRIX = (
    """\
version: 1
kernels:
  - {name: rank, impl: 'planted_kernels:asserts_rank_under_compile'}
axes:
  scale_a: [tensor_0d]
  scale_b: [tensor_1d]
  mode: [aot_eager]
  m: [4, 8]
  k: [32]
  n: [16]
"""
    # One value each, and the extreme shapes kept out: two cases, one signature.
    + SYNTHETIC_YAML
    + """limits: {max_operand_elements: 4096}
profiles:
  default: {cases: 2}
"""
)


def test_triage_names_the_layer_and_the_workaround_once_per_signature(matrix_project):
    matrix_project.write_matrix(TRIAGE_MATRIX)
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=2)
    assert triage.SHARED_DIR_ENV not in os.environ  # the run's claims directory went with it
    first, second = sorted(matrix_project.report()["cases"], key=lambda c: "see" in c.get("triage", {}))
    found = first["triage"]
    assert second["triage"] == {"see": first["id"]}  # one ladder per signature
    assert found["layer"] == "dynamo"  # backend="eager" already fails: Dynamo tracing
    assert found["quantized_path"] is True  # the plain bf16 matmul passes
    assert [w["rung"] for w in found["workarounds"]] == ["scales one rank"]
    assert "scale_a.view(1)" in found["workarounds"][0]["knob"]
    rungs = {r["name"]: r["outcome"] for r in found["rungs"]}
    assert rungs["backend=eager"] == "COMPILE_ONLY_ERROR" and rungs["bf16 unquantized"] == "PASS"
    out = result.stdout.str()
    assert "breaks in dynamo" in out and "workaround: give both scales rank 1: scale_a.view(1)" in out


def test_the_ladder_for_an_inductor_case():
    case = Case("x", case_params(kernel="k", mode="max-autotune", scale_b="rowwise", m=1, k=16))
    names = [r["name"] for r in triage.rungs_for(case, "cuda:0")]
    assert names == [
        "backend=eager",
        "backend=aot_eager",
        "backend=inductor",
        "bf16 unquantized",
        "fresh inductor cache",
        "gemm=ATEN",
        "gemm=TRITON",
        "scales one rank",
    ]
    assert "gemm=TRITON" not in [r["name"] for r in triage.rungs_for(case, "cpu")]
    one_rank = triage.rungs_for(case, "cpu")[-1]
    assert one_rank["params"] == {"scale_a": "tensor_1x1"}  # a 0-D scale next to a 2-D one
    steps = [
        {"name": "backend=eager", "purpose": "layer", "knob": "", "outcome": "PASS"},
        {"name": "backend=aot_eager", "purpose": "layer", "knob": "", "outcome": "PASS"},
        {"name": "backend=inductor", "purpose": "layer", "knob": "", "outcome": "COMPILE_ONLY_ERROR"},
        {"name": "bf16 unquantized", "purpose": "quantized", "knob": "", "outcome": "PASS"},
        {"name": "gemm=ATEN", "purpose": "knob", "knob": "aten only", "outcome": "PASS"},
        {"name": "gemm=TRITON", "purpose": "knob", "knob": "triton only", "outcome": "COMPILE_ONLY_ERROR"},
    ]
    result = triage.conclude(case, Outcome("COMPILE_ONLY_ERROR", "sig", "inductor"), steps, 1.0)
    assert result["layer"] == "inductor"
    assert [w["rung"] for w in result["workarounds"]] == ["backend=eager", "backend=aot_eager", "gemm=ATEN"]
    assert "breaks in inductor" in triage.one_line(result)


class _Runner:
    """A runner whose every rung passes, counting the rungs it ran."""

    def __init__(self):
        self.rungs = 0

    def rung(self, case, rung):
        self.rungs += 1
        return {"outcome": "PASS", "signature": None, "layer": None, "seconds": 0.0}


def _failing(case_id: str) -> tuple[Case, Outcome]:
    return Case(case_id, case_params(scale_b="tensor_1d", mode="inductor")), Outcome(
        "COMPILE_ONLY_ERROR", "InductorError: one cause", "inductor"
    )


def test_workers_sharing_a_directory_triage_each_signature_once_in_the_run(tmp_path):
    """Two xdist workers' Triage objects: the second to meet a signature points at the first's
    case instead of running its own ladder; without a shared directory each process triages."""
    first_runner, second_runner = _Runner(), _Runner()
    first = triage.Triage(first_runner, "cpu", 600, str(tmp_path))
    second = triage.Triage(second_runner, "cpu", 600, str(tmp_path))
    found = first(*_failing("case-on-gw0"))
    assert first_runner.rungs > 0 and "see" not in found
    assert second(*_failing("case-on-gw1")) == {"see": "case-on-gw0"}
    assert second_runner.rungs == 0
    assert second(*_failing("another-on-gw1")) == {"see": "case-on-gw0"}  # remembered here too
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".claim-")] == []  # no temp left

    alone = triage.Triage(_Runner(), "cpu", 600, None)
    assert "see" not in alone(*_failing("case-on-gw1"))


def test_an_unusable_claims_directory_leaves_each_process_to_triage_on_its_own(tmp_path):
    missing = tmp_path / "gone"
    assert triage.claim_signature(str(missing), "MISMATCH: x", "a") is None
    assert triage.claim_signature(str(missing), "MISMATCH: x", "b") is None
    assert triage.claim_signature(str(tmp_path), "MISMATCH: x", "a") is None
    assert triage.claim_signature(str(tmp_path), "MISMATCH: x", "b") == "a"
    assert triage.claim_signature(str(tmp_path), "MISMATCH: y", "b") is None
