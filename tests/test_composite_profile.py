"""Composite profiles (`profiles: [a, b]`): one run of the union of other profiles' cases, each
part made with its own axes, kernels and budget; ids unique, notes merged per kernel, a bad
composite one usage error naming the file and the key."""

from pathlib import Path

import pytest

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.spec import load_spec

REPO = Path(__file__).parent.parent
AXES = {
    "scale_a": ["tensor_0d", "tensor_1d"],
    "scale_b": ["tensor_0d", "tensor_1d"],
    "mode": ["eager", "aot_eager"],
    "out_dtype": ["bf16", "fp16"],
    "m": [4, 8],
}
PROFILES = {
    "left": {"cases": 6, "kernels": ["correct"], "axes": {"mode": ["eager"]}},
    # ignores_scale_b fails (MISMATCH): the run's outcomes are not all the same.
    "right": {"cases": 8, "kernels": ["correct", "ignores_scale_b"], "axes": {"mode": ["aot_eager"], "m": [4]}},
    "same_as_left": {"cases": 6, "kernels": ["correct"], "axes": {"mode": ["eager"]}},
    "both": {"profiles": ["left", "right"]},
    "twice": {"profiles": ["left", "same_as_left"]},
}
MATRIX = matrix_text([planted("correct"), planted("ignores_scale_b")], AXES, profiles=PROFILES)


def _spec(tmp_path: Path, text: str = MATRIX):
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return load_spec(path)


def _outcomes(report: dict) -> dict:
    return {c["id"]: c["outcome"] for c in report["cases"]}


def test_a_composite_run_is_its_parts_run_separately(matrix_project):
    matrix_project.write_matrix(MATRIX)
    reports = {}
    for name in ("left", "right", "both"):
        result = matrix_project.run(
            "--scaledmm-matrix", "--scaledmm-profile", name, "--scaledmm-report", f"{name}.json", *IN_PROCESS
        )
        assert result.ret == (0 if name == "left" else 1), result.stdout.str()[-2000:]
        reports[name] = matrix_project.report(f"{name}.json")
    both = reports["both"]
    ids = [c["id"] for c in both["cases"]]
    # Each part: its budget (6, 8), and the guaranteed values past it.
    parts = {name: len(reports[name]["cases"]) for name in ("left", "right")}
    assert parts["left"] >= 6 and parts["right"] >= 8
    total = parts["left"] + parts["right"]
    assert len(ids) == len(set(ids)) == total
    assert set(ids) == set(_outcomes(reports["left"])) | set(_outcomes(reports["right"]))
    assert _outcomes(both) == {**_outcomes(reports["left"]), **_outcomes(reports["right"])}
    assert both["matrix"]["profile"] == "both" and both["matrix"]["cases"] == total
    assert both["session"]["complete"] and both["session"]["generated"] == both["session"]["recorded"] == total
    generation = both["matrix"]["generation"]
    assert generation["parts"] == parts and generation["duplicates"] == 0
    assert generation["drawn"] + generation["covering_rows"] + generation["guaranteed"] == total
    # Pairwise coverage of the union: scale pair x mode adds up (the parts' modes differ); scale
    # form x shape class of `correct` is in both parts and counts once.
    pairs = {name: reports[name]["coverage"]["pairwise"] for name in reports}
    pair_mode = "scale_pair x mode"
    assert (
        pairs["both"][pair_mode]["possible"]
        == pairs["left"][pair_mode]["possible"] + pairs["right"][pair_mode]["possible"]
    )
    assert pairs["both"][pair_mode]["covered"] == pairs["both"][pair_mode]["possible"]
    assert pairs["both"]["scale_form x shape_class"] == pairs["right"]["scale_form x shape_class"]


def test_composite_ids_are_the_parts_in_order_and_a_repeated_id_is_dropped(tmp_path):
    spec = _spec(tmp_path)
    left = [c.id for c in generate_cases(spec, spec.profile("left"), "cpu")[0]]
    right = [c.id for c in generate_cases(spec, spec.profile("right"), "cpu")[0]]
    assert [c.id for c in generate_cases(spec, spec.profile("both"), "cpu")[0]] == left + right
    cases, notes = generate_cases(spec, spec.profile("twice"), "cpu")
    assert [c.id for c in cases] == left  # same axes, same ids: the first part's are kept
    assert notes["parts"] == {"left": 6, "same_as_left": 6} and notes["duplicates"] == 6
    assert spec.profile("twice").cases == 12  # the budget is the parts' summed


def test_the_notes_of_a_kernel_in_several_parts_are_merged(tmp_path):
    """aten_scaled_mm in both parts: possible pairs and boundary reasons unioned, counters summed,
    each part's budget warning kept (naming the part), left-out GPU modes unioned."""
    axes = {
        "scale_a": ["tensor_0d", "tensor_1d", "rowwise"],
        "scale_b": ["tensor_0d", "rowwise"],
        "m": [4, 8],
        "k": [32],
        "n": [16],
    }
    profiles = {
        "one": {"cases": 10, "axes": {"mode": ["eager", "triton-gemm"]}},
        "two": {"cases": 12, "axes": {"mode": ["aot_eager"], "scale_a": ["tensor_0d"], "scale_b": ["tensor_0d"]}},
        "all": {"profiles": ["one", "two"]},
    }
    spec = _spec(tmp_path, matrix_text(["aten_scaled_mm"], axes, profiles=profiles))
    parts = {name: generate_cases(spec, spec.profile(name), "cpu") for name in ("one", "two")}
    cases, notes = generate_cases(spec, spec.profile("all"), "cpu")
    one, two = parts["one"][1], parts["two"][1]
    assert len(cases) == len(parts["one"][0]) + len(parts["two"][0])
    for key in ("covering_rows", "drawn", "boundary", "special", "truncated"):
        assert notes[key] == one[key] + two[key], key
    for key in ("scale_pair_mode", "form_class"):
        union = {tuple(x) for part in (one, two) for x in part["possible"]["aten_scaled_mm"][key]}
        merged = [tuple(x) for x in notes["possible"]["aten_scaled_mm"][key]]
        assert len(merged) == len(set(merged)) and set(merged) == union, key
    assert notes["boundary_reasons"]["aten_scaled_mm"] == sorted(
        set(one["boundary_reasons"]["aten_scaled_mm"]) | set(two["boundary_reasons"]["aten_scaled_mm"])
    )
    assert notes["families"] == list(dict.fromkeys(one["families"] + two["families"]))
    assert notes["left_out_modes"] == ["triton-gemm"]
    assert notes["warnings"] == one["warnings"] + two["warnings"]
    assert any("for profile 'two', whose budget is 12" in w for w in notes["warnings"])
    assert not any("'all'" in w for w in notes["warnings"])  # budgets are per part


def _bad(profiles: dict) -> str:
    return matrix_text([planted("correct")], profiles={"default": {"cases": 1}, **profiles})


BAD = [
    ({"u": {"profiles": ["default"], "cases": 3}}, "profiles.u.cases", "'cases' does not go with 'profiles'"),
    ({"u": {"profiles": ["default"], "axes": {"m": [4]}}}, "profiles.u.axes", "'axes' does not go with 'profiles'"),
    (
        {"u": {"profiles": ["default", "nope"]}},
        "profiles.u.profiles[1]",
        "no such profile 'nope' (defined: default, u)",
    ),
    (
        {"u": {"profiles": ["default"]}, "v": {"profiles": ["u"]}},
        "profiles.v.profiles[0]",
        "'u' is itself a composite profile; list its parts instead (default)",
    ),
    ({"u": {"profiles": ["default", "u"]}}, "profiles.u.profiles[1]", "'u' is this profile itself"),
    ({"u": {"profiles": ["default", "default"]}}, "profiles.u.profiles[1]", "'default' is listed twice (also at [0])"),
    ({"u": {"profiles": []}}, "profiles.u.profiles", "should be non-empty"),
    ({"u": {}}, "profiles.u", "'cases' is a required property"),
]


@pytest.mark.parametrize("profiles, key, message", BAD, ids=[key + "-" + message[:12] for _, key, message in BAD])
def test_a_bad_composite_is_one_usage_error_naming_the_file_and_the_key(matrix_project, profiles, key, message):
    matrix_project.write_matrix(_bad(profiles))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-profile", "default")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    lines = [line for line in err.splitlines() if f"key '{key}'" in line]
    assert len(lines) == 1 and "matrix.yaml: " in lines[0] and message in lines[0], err
    assert "Traceback" not in err + result.stdout.str()


def test_a_bad_composite_is_a_matrix_error_when_loaded(tmp_path):
    with pytest.raises(MatrixError, match=r"key 'profiles\.u\.profiles\[1\]': 'u' is this profile itself"):
        _spec(tmp_path, _bad({"u": {"profiles": ["default", "u"]}}))


def test_case_lookup_shards_and_explore_items_of_a_composite(matrix_project):
    matrix_project.write_matrix(MATRIX)
    both = matrix_project.collect("--scaledmm-profile", "both")
    right = matrix_project.collect("--scaledmm-profile", "right")
    # A case of one part replays under the composite's name.
    result = matrix_project.run(
        "--scaledmm-matrix",
        "--scaledmm-profile",
        "both",
        "--scaledmm-case",
        right[-1],
        "--scaledmm-report",
        "one.json",
        *IN_PROCESS,
    )
    assert len(matrix_project.report("one.json")["cases"]) == 1
    # Unknown in `left`: the profiles that have it are named, the part and the composite.
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-profile", "left", "--scaledmm-case", right[0])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "it is a case of profile right, both: add --scaledmm-profile right" in result.stderr.str()
    shards = [matrix_project.collect("--scaledmm-profile", "both", "--scaledmm-shard", f"{i}/2") for i in (1, 2)]
    assert sorted(shards[0] + shards[1]) == sorted(both) and not set(shards[0]) & set(shards[1])
    result = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-profile", "both", "--scaledmm-explore", "--collect-only", "-q"
    )
    names = [line.split("::", 1)[1] for line in result.outlines if "::explore[" in line]
    assert names == ["explore[left:correct]", "explore[right:correct]", "explore[right:ignores_scale_b]"]


@pytest.mark.parametrize("arch", ["cpu", "sm90"])
def test_the_shipped_frontier_profile_is_the_three_frontier_profiles(arch):
    spec = load_spec(REPO / "matrix.yaml")
    frontier = spec.profile("frontier")
    names = [part.name for part in frontier.parts]
    assert names == ["frontier-api", "frontier-grouped", "frontier-compile"]
    assert frontier.cases == sum(spec.profile(name).cases for name in names)
    ids = [c.id for name in names for c in generate_cases(spec, spec.profile(name), arch)[0]]
    cases, notes = generate_cases(spec, frontier, arch)
    assert [c.id for c in cases] == list(dict.fromkeys(ids))
    assert len(cases) == len({c.id for c in cases})
    assert list(notes["parts"]) == names


def test_a_matrix_without_profiles_runs_a_default_of_forty_cases_per_kernel(tmp_path):
    path = tmp_path / "matrix.yaml"
    kernels = "".join(f'  - {{name: {name}, impl: "planted_kernels:correct"}}\n' for name in "ab")
    path.write_text(f"version: 1\nkernels:\n{kernels}")
    spec = load_spec(path)
    assert list(spec.profiles) == ["default"] and spec.profile("default").cases == 80
    cases, _ = generate_cases(spec, spec.profile("default"))
    assert len(cases) >= 80
    assert {case.params.kernel for case in cases} == {"a", "b"}
