"""The summary's declaration hints (reports/declaration_hints.py): the YAML lines that make the
inputs torch._scaled_mm refuses UNSUPPORTED for a kernel that wraps it, printed per kernel, and
pasted back into the matrix they make the run green; a kernel that refuses in words of its own
or computes wrong values gets none."""

import pytest
import yaml
from torch_facts import eager_takes_half_tensorwise_scales

from matrices import WITHOUT_M65536
from pytest_scaledmm.reports.declaration_hints import HEADING

# Narrow enough to run in seconds, wide enough to draw bf16 and fp16 scales and every scale pair.
AXES = {
    # One operand dtype pair: torch refuses some pairs on some devices, a hint of its own.
    "dtype_a": ["e4m3fn"],
    "dtype_b": ["e4m3fn"],
    "out_dtype": ["bf16"],
    "mode": ["eager", "aot_eager"],
    "m": [16],
    "k": [32, 64],
    "n": [32],
    "operand_layout": ["dense"],
    "special_scale": ["none"],
}


def _matrix(kernels, cases=30, **axes):
    return yaml.safe_dump(
        {
            "version": 1,
            "kernels": kernels,
            "axes": {**AXES, **axes},
            "profiles": {"default": {"cases": cases}},
            "limits": WITHOUT_M65536,
        },
        sort_keys=False,
    )


def _hints(result) -> dict:
    """Kernel -> its printed declaration lines, as the summary shows them."""
    lines = result.outlines
    if HEADING not in lines:
        return {}
    found: dict = {}
    kernel = None
    for line in lines[lines.index(HEADING) + 1 :]:
        if line.startswith("    "):
            found[kernel].append(line.strip())
        elif line.startswith("  ") and line.rstrip().endswith(":"):
            kernel = line.strip().split(" ", 1)[0]
            found[kernel] = []
        else:
            break
    return found


def test_pasting_the_printed_declarations_makes_the_run_green(matrix_project, monkeypatch):
    if eager_takes_half_tensorwise_scales():
        pytest.skip("this torch's eager torch._scaled_mm takes bf16 per-tensor scales: nothing to declare")
    step_summary = matrix_project.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    kernel = {"name": "plain", "impl": "planted_declaration_kernels:plain"}
    matrix_project.write_matrix(_matrix([kernel]))
    first = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "first.json")
    assert first.ret == 1
    hints = _hints(first)
    assert list(hints) == ["plain"]
    # CI's step summary holds the same lines, as a YAML block.
    assert "```yaml\n" + "\n".join(hints["plain"]) + "\n```" in step_summary.read_text()
    declared = yaml.safe_load("\n".join(hints["plain"]))
    # bf16 and fp16 scales are what torch refuses here, and the hint says fp32 only.
    assert declared["scale_dtypes"] == ["fp32"]
    refused = [c for c in matrix_project.report("first.json")["cases"] if c["outcome"] != "PASS"]
    assert any(c["params"].get("scale_dtype") in ("bf16", "fp16") for c in refused)

    matrix_project.write_matrix(_matrix([{**kernel, **declared}]))
    second = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "second.json")
    assert second.ret == 0, "\n".join(second.outlines[-40:])
    assert HEADING not in second.outlines
    assert step_summary.read_text().count(HEADING) == 1  # the first run's only
    outcomes = {c["outcome"] for c in matrix_project.report("second.json")["cases"]}
    assert "PASS" in outcomes and outcomes <= {"PASS", "UNSUPPORTED", "BOUNDARY_PARITY", "LENIENT"}


def test_no_hint_for_wrong_values_or_a_refusal_in_the_kernels_own_words(matrix_project):
    kernels = [
        {"name": "plain", "impl": "planted_declaration_kernels:plain"},
        {"name": "doubled", "impl": "planted_declaration_kernels:doubled"},
        {"name": "own_words", "impl": "planted_declaration_kernels:own_words"},
    ]
    # Tensorwise scales only: torch refuses nothing here but the scales' dtype.
    tensorwise = ["tensor_0d", "tensor_1d"]
    matrix_project.write_matrix(_matrix(kernels, cases=36, scale_a=tensorwise, scale_b=tensorwise))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    assert result.ret == 1
    cases = matrix_project.report("report.json")["cases"]
    assert any(c["params"]["kernel"] == "doubled" and c["outcome"] == "MISMATCH" for c in cases)
    assert any(c["params"]["kernel"] == "own_words" and c["outcome"] == "REFUSED" for c in cases)
    # The same inputs that torch refuses for `plain` earn it its hint, and only it; where eager
    # takes them, only the compiled side refuses (torch's own discrepancy): no hint.
    if eager_takes_half_tensorwise_scales():
        assert _hints(result) == {}
        plain = [c for c in cases if c["params"]["kernel"] == "plain" and c["params"].get("scale_dtype") == "bf16"]
        assert plain and {c["outcome"] for c in plain} == {"COMPILE_ONLY_ERROR"}
    else:
        assert _hints(result) == {"plain": ["scale_dtypes: [fp32]"]}
