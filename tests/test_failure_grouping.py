"""How failures are grouped and shown: a normalised root cause per line with one real example
(numbers kept); a MISMATCH by kernel and by what is off; shape classes only the failures have;
a user kernel's own faults pointed at its file and line; compare and the gate wording one change
alike."""

import json
import sys

import yaml
from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted, synthetic
from pytest_scaledmm.cli import main
from pytest_scaledmm.verdict.outcome import ErrorInfo, normalise_message, signature_of

KERNELS = """
import torch


def right(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = (a.float() @ b.float()) * scale_a.float() * scale_b.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


def twofold(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = right(a, b, scale_a, scale_b, bias=bias, out_dtype=torch.float32)
    if bias is None:
        return (2 * out).to(out_dtype)  # a scale applied twice
    out[:, :4] = float("inf")  # an overflow in the bias epilogue
    return out.to(out_dtype)


def banded(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = right(a, b, scale_a, scale_b, bias=bias, out_dtype=torch.float32)
    if bias is None:
        out[:, 16:] *= 3  # the second column block read with another block's scale
    else:
        out[::3, ::5] += 1e4 * out.abs().max()  # scattered garbage, far past the bound
    return out.to(out_dtype)


def wrong_past_16(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = right(a, b, scale_a, scale_b, bias=bias, out_dtype=torch.float32)
    return (out * (2 if a.shape[0] > 16 else 1)).to(out_dtype)


def bad_broadcast(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = a.float() @ b.float()
    out = out * scale_a.float().reshape(1, -1)  # a per-token scale laid along N
    return (out * scale_b.float()).to(out_dtype)


def data_branch(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
    out = (a.float() @ b.float()) * scale_a.float() * scale_b.float()
    if scale_a.max().item() > 1e9:
        raise ValueError("scale too large")
    return out.to(out_dtype)
"""


def _line(text: str) -> int:
    """The line of KERNELS holding `text`, as its file numbers it."""
    return next(i for i, line in enumerate(KERNELS.splitlines(), 1) if text in line)


AXES = synthetic({"scale_a": ["tensor_0d"], "scale_b": ["tensor_0d"], "mode": ["aot_eager"], "k": [32]})


def _project(pytester, kernels, axes):
    (pytester.path / "mykernels.py").write_text(KERNELS)
    count = len(kernels)
    for values in axes.values():
        count *= len(values)
    document = {"version": 1, "kernels": kernels, "axes": {**AXES, **axes}, "profiles": {"default": {"cases": count}}}
    (pytester.path / "matrix.yaml").write_text(yaml.safe_dump(document, sort_keys=False))


def _run(pytester, *args):
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore",
        "--scaledmm-matrix",
        "matrix.yaml",
        "--scaledmm-report",
        "report.json",
        *args,
    )
    return result, json.loads((pytester.path / "report.json").read_text())


def _summary(result) -> list[str]:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "scaled-mm matrix" in line)
    return lines[start:]


def test_two_kernels_with_four_mismatch_causes_are_four_lines_each_naming_its_kernel(pytester):
    _project(
        pytester,
        [{"name": "twofold", "impl": "mykernels:twofold"}, {"name": "banded", "impl": "mykernels:banded"}],
        {"bias": [True, False], "m": [4, 8], "n": [32]},
    )
    result, data = _run(pytester, *IN_PROCESS)
    result.assert_outcomes(failed=8)
    causes = {g["root_cause"]: g["count"] for g in data["signatures"]}
    assert causes == {
        "kernel twofold: values off the reference by one constant factor": 2,
        "kernel twofold: values off the reference non-finite where the reference is finite": 2,
        "kernel banded: values off the reference in a band of columns": 2,
        "kernel banded: values off the reference, error over 1000x the bound": 2,
    }
    summary = "\n".join(_summary(result))
    for cause in causes:
        assert f"2 x MISMATCH [eager+compiled] {cause}" in summary
    # Each line's example is one real case with its numbers.
    assert "eager+compiled: max |err|/tol = " in summary and " x reference (case twofold." in summary
    assert "columns 16-31 of 32" in summary
    assert "elements non-finite" in summary


def test_all_names_the_shape_class_only_the_failures_have(pytester):
    # 5's other M (15) is right too: only 17 and 33 fail.
    _project(pytester, [{"name": "past16", "impl": "mykernels:wrong_past_16"}], {"m": [4, 5, 17, 33], "n": [16]})
    result, data = _run(pytester, *IN_PROCESS)
    result.assert_outcomes(failed=2, passed=2)
    (group,) = data["signatures"]
    assert group["shape_classes"] == ["m17-127"]
    assert "         all: shape m17-127" in _summary(result)


def test_a_signature_is_shown_with_one_real_message_numbers_kept(pytester):
    _project(
        pytester,
        [{"name": "bcast", "impl": "mykernels:bad_broadcast"}],
        {"scale_a": ["rowwise"], "m": [4, 8], "n": [16]},
    )
    result, data = _run(pytester, *IN_PROCESS)
    result.assert_outcomes(failed=2)
    (group,) = data["signatures"]
    # The key stays normalised; the example is the message as raised.
    assert group["root_cause"] == (
        "RuntimeError: The size of tensor a (N) must match the size of tensor b (N) at non-singleton dimension N"
    )
    first = data["cases"][0]
    assert group["example"] == first["id"]
    m = first["params"]["m"]
    expected = (
        f"RuntimeError: The size of tensor a (16) must match the size of tensor b ({m}) at non-singleton"
        f" dimension 1 (case {first['id']})"
    )
    assert group["example_message"] + f" (case {group['example']})" == expected
    assert f"         e.g. {expected}" in _summary(result)


def test_a_user_kernels_python_bug_points_at_its_file_and_line(pytester):
    _project(
        pytester, [{"name": "bcast", "impl": "mykernels:bad_broadcast"}], {"scale_a": ["rowwise"], "m": [4], "n": [16]}
    )
    result, data = _run(pytester, "--scaledmm-isolate=no", "--scaledmm-repro-dir", "repros")
    result.assert_outcomes(failed=1)
    where = f"{pytester.path / 'mykernels.py'}:{_line('reshape(1, -1)')} in bad_broadcast"
    (record,) = data["cases"]
    assert record["eager_error"]["source"] == where
    out = result.stdout.str()
    # The summary, the case's own failure text and triage all name the line.
    assert f"         in user code: {where}" in out
    assert f"  in user code: {where}" in out
    assert f"the fault is in the kernel's code, {where}" in out
    assert "the fault is in the quantized path" not in out
    # Its own refusal, not a change of torch.
    assert "model mismatch: the op changed" not in out
    assert (
        f"kernel bcast (user kernel): 1 valid case(s) inside its declared support raise in its own code at {where}"
        in out
    )
    (script,) = (pytester.path / "repros").glob("repro_*.py")
    ran = pytester.run(sys.executable, str(script))
    assert ran.ret == 10, ran.stdout.str()
    assert f"(at {where})" in ran.stdout.str()


def test_a_user_kernels_compile_only_branch_points_at_its_file_and_line(pytester):
    _project(pytester, [{"name": "branchy", "impl": "mykernels:data_branch"}], {"m": [4, 8], "n": [16]})
    result, data = _run(pytester, "--scaledmm-isolate=no", "--scaledmm-repro-dir", "repros")
    result.assert_outcomes(failed=2)
    where = f"{pytester.path / 'mykernels.py'}:{_line('.item() > 1e9')} in data_branch"
    assert {r["compiled_error"]["source"] for r in data["cases"]} == {where}
    (group,) = data["signatures"]
    assert group["outcome"] == "COMPILE_ONLY_ERROR" and group["source"] == where
    out = result.stdout.str()
    assert f"         in user code: {where}" in out
    assert f"  in user code: {where}" in out
    assert f"torch's plain bf16 matmul passes: the fault is in the kernel's code, {where}" in out
    (script,) = (pytester.path / "repros").glob("repro_*.py")
    ran = pytester.run(sys.executable, str(script))
    assert ran.ret == 10, ran.stdout.str()
    assert f"(at {where})" in ran.stdout.str()


# -- compare and the gate word one change alike ----------------------------------------------

PREFIX = "InductorError <- AssertionError: " + "the lowering of scaled_mm expects " * 5


def _parity(cid, which):
    record = case(cid, "ERROR_PARITY", f"eager ValueError: refused <> compiled {PREFIX}{which}")
    record.update(
        {
            "layer": "inductor",
            "root_cause": f"{PREFIX}{which}",
            "met": "eager: ValueError: refused",
            "eager_error": {"type": "builtins.ValueError", "message": "refused", "root_type": "builtins.ValueError"},
            "compiled_error": {
                "type": "torch._inductor.exc.InductorError",
                "message": f"lowering of {which} at 64",
                "root_type": "builtins.AssertionError",
                "root_message": f"{which}: stride 64, got 128",
            },
        }
    )
    return record


def test_compare_and_gate_word_a_change_the_same_way(tmp_path, capsys):
    ids = [f"c{i}" for i in range(8)]
    baseline = write(tmp_path / "base.json", report([case(cid, "PASS") for cid in ids], torch="2.11.0"))
    # Four causes alike but for their last words: never cut to the same text.
    candidate = write(
        tmp_path / "cand.json",
        report(
            [_parity(cid, ("scale_a", "scale_b", "bias", "out")[i % 4]) for i, cid in enumerate(ids)], torch="2.13.0"
        ),
    )
    assert main(["compare", str(baseline), str(candidate)]) == 0
    compared = capsys.readouterr().out
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 1
    gated = capsys.readouterr().out
    for which, first in (("scale_a", "c0"), ("scale_b", "c1"), ("bias", "c2"), ("out", "c3")):
        change = f"PASS -> ERROR_PARITY: {PREFIX}{which}"
        example = f"InductorError <- AssertionError: {which}: stride 64, got 128 (case {first})"
        assert f"       2 x {change}" in compared
        assert f"           e.g. {example}" in compared
        assert f"  regression: 2 cases {change} (e.g. {example})" in gated
    # The eager refusal it met is detail, never the wording of the change.
    assert "eager ValueError" not in compared and "eager ValueError" not in gated


def test_markdown_words_the_change_as_the_terminal_does(tmp_path):
    baseline = write(tmp_path / "base.json", report([case("c0", "PASS")], torch="2.11.0"))
    candidate = write(tmp_path / "cand.json", report([_parity("c0", "bias")], torch="2.13.0"))
    assert main(["compare", str(baseline), str(candidate), "--markdown", str(tmp_path / "s.md")]) == 0
    markdown = (tmp_path / "s.md").read_text()
    assert "bias: stride 64, got 128 \\(case c0\\)" in markdown
    assert "eager ValueError: refused &lt;&gt;" not in markdown.split("### regression")[1]


def test_failures_grouped_by_signature(matrix_project):
    axes = {"scale_a": ["tensor_0d", "tensor_1d"], "scale_b": ["tensor_1x1", "rowwise"]}
    matrix_project.write_matrix(matrix_text([planted("asserts_rank_under_compile")], axes))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=4)
    report = matrix_project.report()
    (group,) = report["signatures"]
    assert group["count"] == 4 and group["outcome"] == "COMPILE_ONLY_ERROR"
    assert group["example"] in {c["id"] for c in report["cases"]}
    assert "1 failing root cause(s), by tier:" in result.stdout.str()
    result.stdout.fnmatch_lines(["*4 x COMPILE_ONLY_ERROR*scale ranks differ*"])


def test_signature_strips_sizes_addresses_and_paths():
    one = normalise_message(
        "mat1 and mat2 shapes cannot be multiplied (4x32 and 31x16) at 0x7f3a in /usr/lib/x.py line 12"
    )
    two = normalise_message("mat1 and mat2 shapes cannot be multiplied (8x64 and 63x8) at 0x1 in /opt/y/z.py line 99")
    assert one == two
    error = ErrorInfo(
        "torch._dynamo.exc.TorchRuntimeError", "wrapped", "builtins.RuntimeError", "dynamo", "size s0 vs s1"
    )
    assert signature_of(error) == "TorchRuntimeError <- RuntimeError: size s? vs s?"


def test_a_sequence_step_that_fails_as_a_first_call_too_is_grouped_with_that_failure():
    from pytest_scaledmm.reports.causes import mismatch_cause

    plain = {"outcome": "MISMATCH", "params": {"kernel": "k"}, "errors": {"eager": {"ok": False, "ratio": 3.0}}}
    step = "later call of a sequence (another output dtype): values off the reference"

    def stepped(first_call):
        check = {"ok": False, "ratio": 3.0, "problem": step}
        extra = {"sequence": {"failed": "out_dtype=fp16", "as_first_call": first_call}}
        return {"outcome": "MISMATCH", "params": {"kernel": "k"}, "errors": {"eager": check}, "extra": extra}

    # Failing as a first call too: the failure at those parameters, the line of the plain case.
    assert mismatch_cause(stepped("MISMATCH")) == mismatch_cause(plain)
    # Passing as a first call: the state the earlier calls left, a line of its own.
    assert mismatch_cause(stepped("PASS")) == f"kernel k: {step}"
