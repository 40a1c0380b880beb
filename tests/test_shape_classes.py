"""Shapes by class: the extreme shape classes a matrix's axes leave out (M past 65535, a model's K,
a K % 512 tail past 4096, N % 8 != 0) are added per kernel where its declarations admit them, with
the other dimensions small and a listed K or N kept; kernels wrong only there
(tests/planted_shape_kernels.py) are caught by a matrix that lists only them, their twin clean."""

import json
import subprocess
import sys

import yaml
from case_factory import failing_call

from matrices import IN_PROCESS

SHAPE_KERNELS = ("rows_past_grid_limit", "drops_k_tail_past_4096", "zero_n_vector_tail")
# The class each planted kernel is wrong at, as the case id spells its sizes.
WRONG_AT = {"rows_past_grid_limit": "m65536", "drops_k_tail_past_4096": "k11008", "zero_n_vector_tail": "n36"}
EXTREME_IDS = ("m65536k", "k14336n", "k11008n", "n36-")
WRONG_WHEN = {
    "rows_past_grid_limit": lambda p: p.m > 65535,
    "drops_k_tail_past_4096": lambda p: p.k > 4096 and p.k % 512,
    "zero_n_vector_tail": lambda p: p.n % 8,
}


def kernels_only(*entries, cases: int = 8, **axes) -> str:
    """A matrix that lists kernels only (and, given, axes), the rest the plugin's defaults."""
    document = {"version": 1, "kernels": list(entries), "profiles": {"default": {"cases": cases}}}
    if axes:
        document["axes"] = axes
    return yaml.safe_dump(document, sort_keys=False)


def shape_kernel(name: str, **declared) -> dict:
    return {"name": name, "impl": f"planted_shape_kernels:{name}", **declared}


def sizes(case_id: str) -> tuple[int, int, int]:
    """(M, K, N) of a case id (its `m<M>k<K>n<N>` part)."""
    part = next(p for p in case_id.split("-") if p.startswith("m") and "k" in p and "n" in p)
    m, rest = part[1:].split("k", 1)
    k, n = rest.split("n", 1)
    return int(m), int(k), int(n)


def test_a_listed_k_stays_and_the_classes_it_leaves_out_are_added(matrix_project):
    matrix_project.write_matrix(kernels_only(shape_kernel("correct_shapes"), k=[128], n=[64]))
    ids = matrix_project.collect()
    shapes = {sizes(case_id) for case_id in ids}
    # The extremes, each with the other dimensions small; M past 65535 on the listed K and N.
    assert (65536, 128, 64) in shapes
    assert (1, 14336, 64) in shapes and (1, 11008, 64) in shapes
    assert (1, 128, 36) in shapes
    # Every other case keeps the listed K and N (0 is the empty slice's).
    others = {(m, k, n) for m, k, n in shapes if m != 65536 and k not in (14336, 11008) and n != 36}
    assert others and all(k in (0, 128) and n in (0, 64) for _, k, n in others)


def test_a_class_the_axes_list_is_not_added_again(matrix_project):
    matrix_project.write_matrix(kernels_only(shape_kernel("correct_shapes"), k=[128, 4096], n=[20, 64]))
    shapes = {sizes(case_id) for case_id in matrix_project.collect()}
    assert not any(k == 14336 for _, k, _ in shapes)  # 4096 is listed: a model's K multiple of 512
    assert not any(n == 36 for *_, n in shapes)  # 20 is listed: N % 8 != 0
    assert any(k == 11008 for _, k, _ in shapes)  # no listed K past 4096 has a K % 512 tail


def test_declarations_that_refuse_a_class_get_none_of_its_cases(matrix_project):
    refusing = shape_kernel("correct_shapes", max_m=4096, k_multiple=512, n_multiple=8)
    matrix_project.write_matrix(kernels_only(refusing, k=[512], n=[64]))
    shapes = {sizes(case_id) for case_id in matrix_project.collect()}
    assert not any(m > 4096 for m, _, _ in shapes)
    assert not any(k == 11008 for _, k, _ in shapes)
    assert not any(n == 36 for *_, n in shapes)
    assert (1, 14336, 64) in shapes  # a multiple of 512: admitted


def test_builtin_kernels_get_the_classes_their_cpu_models_take(matrix_project):
    matrix_project.write_matrix(kernels_only("aten_scaled_mm", "int8_w8a8", cases=40))
    shapes: dict[str, set] = {}
    for case_id in matrix_project.collect():
        shapes.setdefault(case_id.split("-")[0].rstrip("e45m23x"), set()).add(sizes(case_id))
    for short in ("fp8", "w8a8"):
        found = shapes[short]
        assert any(m == 65536 for m, _, _ in found), short
        assert any(k == 14336 for _, k, _ in found) and any(k == 11008 for _, k, _ in found), short
        assert any(n == 36 for *_, n in found), short


def test_planted_shape_kernels_are_caught_their_twin_clean_and_the_coverage_names_the_classes(matrix_project, tmp_path):
    entries = [shape_kernel(name) for name in ("correct_shapes", *SHAPE_KERNELS)]
    matrix_project.write_matrix(kernels_only(*entries))
    selection = " or ".join(EXTREME_IDS)
    result = matrix_project.run("--scaledmm-matrix", *IN_PROCESS, "-k", selection, "--scaledmm-report", "report.json")
    cases = matrix_project.report()["cases"]
    failing: dict = {}
    for case in cases:
        if case["outcome"] != "PASS":
            failing.setdefault(case["params"]["kernel"], []).append(case)
    assert set(failing) == set(SHAPE_KERNELS), failing
    for kernel, found in failing.items():
        # The case at the class, or one whose call sequence called the kernel where it is wrong
        # (K 14336 then 14320, which leaves a 512-slice tail).
        called = [failing_call(case["params"], (case.get("extra") or {}).get("sequence")) for case in found]
        assert any(WRONG_AT[kernel] in case["id"] for case in found) or any(map(WRONG_WHEN[kernel], called))
    twin = [case for case in cases if case["params"]["kernel"] == "correct_shapes"]
    assert len(twin) == 4 and all(case["outcome"] == "PASS" for case in twin)
    dimensions = matrix_project.report()["coverage"]["dimensions"]
    assert dimensions["correct_shapes"]["shapes_added"] == ["m65536", "k14336", "k11008", "n36"]
    result.stdout.fnmatch_lines(["coverage correct_shapes *shapes added (classes the axes leave out): m65536, k14336*"])
    # The finding replayed alone, in a fresh process.
    finding = failing["drops_k_tail_past_4096"][0]["id"]
    replay = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--scaledmm-matrix", *IN_PROCESS]
        + [f"matrix.yaml::{finding}", "--scaledmm-report", str(tmp_path / "alone.json")],
        cwd=matrix_project.path,
        capture_output=True,
        text=True,
    )
    alone = json.loads((tmp_path / "alone.json").read_text())["cases"]
    assert replay.returncode == 1, replay.stdout[-2000:]
    assert [(case["id"], case["outcome"]) for case in alone] == [(finding, "MISMATCH")]
