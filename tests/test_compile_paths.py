"""Compile paths beyond torch.compile's defaults: AOTInductor, M marked dynamic or unbacked, one
GEMM backend at a time; and the kernel Inductor chose, per case and between reports."""

import json

import pytest
from reports_factory import case as record_of
from reports_factory import report

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.matrix import compile_modes
from pytest_scaledmm.matrix.compile_modes import MODES, compile_mode
from pytest_scaledmm.reports.compare import compare_reports
from pytest_scaledmm.reports.render import render_html, render_markdown, render_text
from pytest_scaledmm.verdict.kernel_choice import kernel_choice

ROWWISE = {"scale_a": ["rowwise"], "scale_b": ["rowwise"], "out_dtype": ["bf16"]}
NEW_MODES = ("aoti", "mark-dynamic", "mark-unbacked", "aten-gemm", "cutlass-gemm", "persistent-tma")


def run_matrix(matrix_project, kernels, axes, *options):
    matrix_project.write_matrix(matrix_text(kernels, {**ROWWISE, **axes}))
    result = matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "r.json", *options)
    records = json.loads((matrix_project.path / "r.json").read_text())["cases"]
    return result, {r["params"]["kernel"]: r for r in records}  # one case per kernel in these tests


def test_each_new_mode_is_one_row():
    names = [m.name for m in MODES]
    assert set(NEW_MODES) <= set(names)
    assert compile_mode("aoti").runner == "aoti" and compile_mode("aoti").isolated_only
    assert compile_mode("mark-dynamic").marks_m == "dynamic"
    assert compile_mode("mark-unbacked").marks_m == "unbacked"
    assert compile_mode("cutlass-gemm").options["max_autotune_gemm_backends"] == "CUTLASS"
    assert compile_mode("persistent-tma").options["triton.enable_persistent_tma_matmul"] is True
    assert compile_mode("aten-gemm").options["max_autotune_gemm_backends"] == "ATEN"
    assert all(m.runner in compile_modes.RUNNERS for m in MODES)


def test_mark_dynamic_counts_frames_and_names_a_recompile(matrix_project):
    kernels = [
        planted("correct"),
        planted("branches_on_m", module="planted_compile_kernels"),
        planted("wrong_beyond_m", module="planted_compile_kernels"),
    ]
    _, records = run_matrix(matrix_project, kernels, {"mode": ["mark-dynamic"], "m": [16]}, *IN_PROCESS)
    good = records["correct"]
    assert good["outcome"] == "PASS"
    assert good["extra"]["dynamic_m"]["marked"] == "dynamic"
    assert good["extra"]["dynamic_m"]["frames"] == 1
    assert [s["label"] for s in good["extra"]["dynamic_m"]["shapes"]] == ["m=48", "m=80"]
    assert all(s["ok"] for s in good["extra"]["dynamic_m"]["shapes"])
    assert good["timing"]["other_m_s"] > 0 and good["timing"]["compile_s"] > 0
    assert good["extra"]["kernel_choice"] == {"label": "aten", "kernels": ["extern_kernels.mm"]}

    recompiles = records["branches_on_m"]
    assert recompiles["outcome"] == "COMPILE_ONLY_ERROR"
    assert recompiles["signature"] == "recompiled 1 times under mark_dynamic"
    assert recompiles["root_cause"] == "recompiled under mark_dynamic"
    assert recompiles["extra"]["dynamic_m"]["frames"] == 2

    wrong = records["wrong_beyond_m"]
    assert wrong["outcome"] == "MISMATCH"
    assert wrong["signature"].startswith("MISMATCH: compiled at another M")
    assert not any(s["ok"] for s in wrong["extra"]["dynamic_m"]["shapes"])


def test_mark_dynamic_skips_m_of_one(matrix_project):
    _, records = run_matrix(matrix_project, [planted("correct")], {"mode": ["mark-dynamic"], "m": [1]}, *IN_PROCESS)
    assert records["correct"]["outcome"] == "SKIPPED"
    assert "Dynamo specialises sizes 0 and 1" in records["correct"]["detail"]


def test_mark_unbacked_is_recorded_and_a_data_dependent_guard_is_compile_only(matrix_project):
    if compile_mode("mark-unbacked").unavailable():
        pytest.skip(compile_mode("mark-unbacked").unavailable())
    _, records = run_matrix(
        matrix_project,
        [planted("branches_on_m", module="planted_compile_kernels")],
        {"mode": ["mark-unbacked"], "m": [16]},
        *IN_PROCESS,
    )
    record = records["branches_on_m"]
    # An unbacked M cannot take a Python branch: Dynamo cannot guard on it.
    assert record["outcome"] == "COMPILE_ONLY_ERROR"
    assert "data-dependent" in record["signature"]
    assert record["extra"]["dynamic_m"] == {"marked": "unbacked", "frames": 0, "shapes": []}


@pytest.mark.parametrize(
    "mode, reason", [("cutlass-gemm", "CUTLASS GEMM templates"), ("persistent-tma", "Triton persistent TMA templates")]
)
def test_gpu_gemm_backends_skip_on_the_cpu_with_their_reason(matrix_project, mode, reason):
    _, records = run_matrix(matrix_project, ["aten_scaled_mm"], {"mode": [mode], "m": [16]}, *IN_PROCESS)
    record = records["aten_scaled_mm"]
    assert record["outcome"] == "SKIPPED"
    assert record["detail"] == f"mode {mode} needs a GPU ({reason})"


def test_cutlass_without_its_sources_says_so(monkeypatch, tmp_path):
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config.cuda, "cutlass_dir", str(tmp_path / "absent"))
    reason = compile_mode("cutlass-gemm").unavailable()
    assert "cutlass_dir" in reason and "does not exist" in reason


def test_aoti_outside_the_isolated_child_is_skipped(matrix_project):
    _, records = run_matrix(matrix_project, ["aten_scaled_mm"], {"mode": ["aoti"], "m": [16]}, *IN_PROCESS)
    assert records["aten_scaled_mm"]["outcome"] == "SKIPPED"
    assert "runs only in the isolated child" in records["aten_scaled_mm"]["detail"]


def test_aoti_in_the_isolated_child_records_its_outcome_and_compile_time(matrix_project):
    # Slow on a CPU (the package is C++ built by the host compiler): one case.
    result, records = run_matrix(
        matrix_project,
        ["aten_scaled_mm"],
        {"mode": ["aoti"], "m": [16]},
        "--no-scaledmm-triage",
        "--scaledmm-timeout",
        "400",
    )
    record = records["aten_scaled_mm"]
    assert record["outcome"] not in ("SKIPPED", "HARNESS_ERROR"), record["detail"]
    if record["outcome"] in ("CRASH", "TIMEOUT"):
        assert record["signature"].startswith(record["outcome"])  # a dead child is still a record
        return
    if record["eager_error"] is None and record["compiled_error"] is None:
        assert record["outcome"] == "PASS"
        assert {"export_s", "package_s", "load_s", "compile_s"} <= set(record["timing"])
        assert record["extra"]["kernel_choice"] == {"label": "aten", "kernels": ["aoti_torch_cpu__scaled_mm_out"]}
    else:
        assert record["compiled_error"]["layer"] in ("export", "inductor", "aoti_load", "runtime")


def test_inductor_modes_record_the_kernel_they_chose(matrix_project):
    matrix_project.write_matrix(
        matrix_text(["aten_scaled_mm", "int8_w8a8"], {**ROWWISE, "mode": ["inductor", "aten-gemm"], "m": [16]})
    )
    matrix_project.run("--scaledmm-matrix", "matrix.yaml", "--scaledmm-report", "r.json", *IN_PROCESS)
    records = json.loads((matrix_project.path / "r.json").read_text())["cases"]
    assert sorted((r["params"]["kernel"], r["params"]["mode"]) for r in records) == [
        ("aten_scaled_mm", "aten-gemm"),
        ("aten_scaled_mm", "inductor"),
        ("int8_w8a8", "aten-gemm"),
        ("int8_w8a8", "inductor"),
    ]
    for record in records:
        choice = record["extra"]["kernel_choice"]
        # On the CPU Inductor keeps the ATen op as an extern kernel (int8's scale epilogue is fused apart).
        assert choice["label"] == "aten", record["id"]
        wanted = (
            "extern_kernels._scaled_mm" if record["params"]["kernel"] == "aten_scaled_mm" else "extern_kernels._int_mm"
        )
        assert wanted in choice["kernels"]


def test_modes_without_inductor_record_no_kernel_choice(matrix_project):
    _, records = run_matrix(matrix_project, ["aten_scaled_mm"], {"mode": ["aot_eager"], "m": [16]}, *IN_PROCESS)
    assert records["aten_scaled_mm"]["outcome"] == "PASS"
    assert "kernel_choice" not in records["aten_scaled_mm"]["extra"]


TEMPLATE = "triton_tem_fused__scaled_mm_0 = async_compile.triton('triton_tem_fused__scaled_mm_0', '''\n{}\n''')\n"


@pytest.mark.parametrize(
    "code, label, kernels",
    [
        ("extern_kernels._scaled_mm(arg0_1, arg1_1, out=buf0)", "aten", ["extern_kernels._scaled_mm"]),
        ("aoti_torch_cuda__scaled_mm_out(buf0, arg0_1)", "aten", ["aoti_torch_cuda__scaled_mm_out"]),
        (TEMPLATE.format("acc += tl.dot(a, b)"), "triton-template", ["triton_tem_fused__scaled_mm_0"]),
        (
            TEMPLATE.format("a_desc = triton.language.make_tensor_descriptor(A)"),
            "triton-persistent-tma",
            ["triton_tem_fused__scaled_mm_0"],
        ),
        ("cutlass_gemm_fused_mm_0 = async_compile.cuda(src)", "cutlass", ["cutlass_gemm_fused_mm_0"]),
        ("triton_per_fused_mul_sum_0.run(buf0)", "decomposed", ["triton_per_fused_mul_sum_0"]),
        (
            "extern_kernels.mm(a, b, out=buf0)\n" + TEMPLATE.format("tl.dot"),
            "aten+triton-template",
            ["extern_kernels.mm", "triton_tem_fused__scaled_mm_0"],
        ),
        ("extern_kernels.convolution(a, b)", "unknown", []),
        ("", "unknown", []),
    ],
)
def test_kernel_labels(code, label, kernels):
    assert kernel_choice([code]) == {"label": label, "kernels": kernels}


def _with_choice(record, label, kernels):
    record["extra"] = {"kernel_choice": {"label": label, "kernels": kernels}}
    return record


def test_compare_lists_cases_whose_chosen_kernel_changed(tmp_path):
    before = report(
        [
            _with_choice(record_of("c1", "PASS"), "aten", ["extern_kernels._scaled_mm"]),
            _with_choice(record_of("c2", "PASS"), "aten", ["extern_kernels._scaled_mm"]),
            record_of("c3", "PASS"),
        ],
        torch="2.11.0",
    )
    after = report(
        [
            _with_choice(record_of("c1", "PASS"), "triton-template", ["triton_tem_fused__scaled_mm_0"]),
            _with_choice(record_of("c2", "PASS"), "aten", ["extern_kernels._scaled_mm"]),
            _with_choice(record_of("c3", "PASS"), "triton-persistent-tma", ["triton_tem_fused__scaled_mm_0"]),
        ],
        torch="2.12.0",
    )
    comparison = compare_reports([(tmp_path / "a.json", before), (tmp_path / "b.json", after)])
    assert [(c.case_id, c.before, c.after) for c in comparison.kernel_changes] == [("c1", "aten", "triton-template")]
    assert comparison.kernel_changes[0].after_kernels == ("triton_tem_fused__scaled_mm_0",)
    assert comparison.transitions == []  # a kernel change is news, not a verdict
    text = render_text(comparison)
    assert "chosen kernel changed: 1 case(s)" in text and "aten -> triton-template" in text
    markdown = render_markdown(comparison)
    assert "Chosen kernel changed: 1" in markdown and "aten → triton-template" in markdown
    html = render_html(comparison)
    assert "Chosen kernel changed: 1" in html and "aten → triton-template" in html


def test_compare_ignores_malformed_kernel_choices(tmp_path):
    hostile = record_of("c1", "PASS")
    hostile["extra"] = {"kernel_choice": {"label": ["x"], "kernels": "y"}}
    odd = record_of("c1", "PASS")
    odd["extra"] = ["not", "a", "mapping"]
    comparison = compare_reports([(tmp_path / "a.json", report([hostile])), (tmp_path / "b.json", report([odd]))])
    assert comparison.kernel_changes == []
