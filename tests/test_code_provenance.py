"""The code that ran is in the report: each kernel's module and the project modules it imports
(transitively), and the plugin's sources, as sha256 digests in the matrix block. `scaledmm merge`
refuses shards that ran different code; compare and gate say when a kernel's code changed."""

import hashlib
import json
import textwrap

from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.cli import main

# A kernel module of the project, what it imports from the project (a module, a package and its
# submodule), and what it does not import.
PROJECT = {
    "kern.py": """
        import planted_kernels  # the tests' directory: not the project's
        import torch

        from helpers import same


        def mine(a, b, scale_a, scale_b, *, bias=None, out_dtype, use_fast_accum=False):
            return same(planted_kernels.correct(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype))
    """,
    "helpers.py": """
        from sub.deep import identity


        def same(out):
            return identity(out)
    """,
    "sub/__init__.py": "",
    "sub/deep.py": """
        def identity(out):
            return out
    """,
    "unrelated.py": "VALUE = 1\n",
}
KERNEL_FILES = {"kern.py", "helpers.py", "sub/__init__.py", "sub/deep.py"}
# Two cases of the project's kernel: one per shard of two.
MATRIX = matrix_text([planted("mine", module="kern")], {"out_dtype": ["bf16", "fp16"]})


def _write_project(root):
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(matrix_project, *args):
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", *args)
    assert result.ret == 0, result.stdout.str()[-2000:]
    return result


def test_the_report_records_each_kernels_code_and_the_plugins(matrix_project):
    _write_project(matrix_project.path)
    matrix_project.write_matrix(matrix_text([planted("mine", module="kern"), "aten_scaled_mm"], cases=2))
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json")
    code = matrix_project.report()["matrix"]["code"]
    plugin = code["plugin"]
    assert len(plugin) == 64 and int(plugin, 16) >= 0
    mine = code["kernels"]["mine"]
    # The kernel's module and the project modules it imports, not torch's nor the tests' own.
    assert mine["files"] == {name: _sha(matrix_project.path / name) for name in KERNEL_FILES}
    assert len(mine["sha256"]) == 64 and mine["sha256"] != plugin
    # A built-in kernel is the plugin's code.
    assert code["kernels"]["aten_scaled_mm"] == {"sha256": plugin, "builtin": True}


def test_merge_refuses_shards_that_ran_different_code(matrix_project, tmp_path, capsys):
    _write_project(matrix_project.path)
    matrix_project.write_matrix(MATRIX)
    _run(matrix_project, "--scaledmm-shard", "1/2", "--scaledmm-report", "s1.json")
    # A fix in a module the kernel imports, and only the second shard run again.
    (matrix_project.path / "sub" / "deep.py").write_text("def identity(out):\n    return out * 1\n")
    _run(matrix_project, "--scaledmm-shard", "2/2", "--scaledmm-report", "s2.json")
    s1, s2 = (matrix_project.path / f"s{i}.json" for i in (1, 2))
    merged = tmp_path / "merged.json"
    capsys.readouterr()
    assert main(["merge", str(merged), str(s1), str(s2)]) == 2
    out, err = capsys.readouterr()
    old, new = (json.loads(s.read_text())["matrix"]["code"]["kernels"]["mine"]["sha256"][:12] for s in (s1, s2))
    assert out == "" and err.splitlines() == [
        f"scaledmm merge: error: the shards ran different code: kernel mine's code differs ({old} in {s1}; {new} in"
        f" {s2}; changed: sub/deep.py): run every shard with the same code"
    ]
    assert not merged.exists()  # nothing merged
    # Run again with the same code, the shards merge.
    _run(matrix_project, "--scaledmm-shard", "1/2", "--scaledmm-report", "s1.json")
    assert main(["merge", str(merged), str(s1), str(s2)]) == 0
    assert json.loads(merged.read_text())["matrix"]["code"] == json.loads(s2.read_text())["matrix"]["code"]


def _code(kernel_digest="a" * 64, plugin="p" * 64, files=None):
    return {
        "plugin": plugin,
        "kernels": {
            "mine": {"sha256": kernel_digest, "files": files or {"kern.py": kernel_digest}},
            "aten_scaled_mm": {"sha256": plugin, "builtin": True},
        },
    }


def _with_code(code, torch="2.13.0", cases=None):
    data = report(
        cases or [case("c1", "PASS", kernel="mine"), case("c2", "PASS", kernel="aten_scaled_mm")], torch=torch
    )
    if code is not None:
        data["matrix"]["code"] = code
    return data


def test_merge_refuses_a_shard_that_does_not_record_its_code(tmp_path, capsys):
    ids = ["c1", "c2"]
    from pytest_scaledmm.reports.report import ids_sha256

    paths = []
    for index, (cid, code) in enumerate((("c1", _code()), ("c2", None)), start=1):
        data = _with_code(code, cases=[case(cid, "PASS")])
        data["schema_version"] = 4 if code else 3
        data["shard"] = {
            "index": index,
            "count": 2,
            "cases": 1,
            "total_cases": 2,
            "total_ids_sha256": ids_sha256(ids),
            "ids_sha256": ids_sha256([cid]),
        }
        paths.append(write(tmp_path / f"s{index}.json", data))
    assert main(["merge", str(tmp_path / "merged.json"), *map(str, paths)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"scaledmm merge: error: the shards cannot be shown to have run the same code: {paths[1]} does not record"
        " the code that ran (a report of an earlier version): run every shard with this version"
    ]


def test_compare_and_gate_say_when_a_kernels_code_changed(tmp_path, capsys):
    baseline = write(tmp_path / "baseline.json", _with_code(_code(), torch="2.11.0"))
    changed = _code("b" * 64, plugin="q" * 64, files={"kern.py": "b" * 64, "helpers.py": "c" * 64})
    candidate = write(tmp_path / "candidate.json", _with_code(changed))
    kernel = "kernel mine: its code changed between torch2.11.0/cpu and torch2.13.0/cpu (kern.py, helpers.py)"
    plugin = (
        "the plugin's sources changed between torch2.11.0/cpu and torch2.13.0/cpu"
        " (pytest-scaledmm 0.1.0 and 0.1.0), and with them the built-in kernels aten_scaled_mm"
    )
    assert main(["compare", str(baseline), str(candidate)]) == 0
    out = capsys.readouterr().out
    assert f"note: {kernel}" in out and f"note: {plugin}" in out
    # The gate judges the change: it passes (no case newly fails) and says what changed.
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gate passed") and f"  note: {kernel}\n" in out and f"  note: {plugin}\n" in out
    # The same code: not a word about it.
    same = write(tmp_path / "same.json", _with_code(_code()))
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(same)]) == 0
    assert "code" not in capsys.readouterr().out


def test_a_baseline_without_code_is_still_read_and_says_so(tmp_path, capsys):
    older = _with_code(None, torch="2.11.0")
    older["schema_version"] = 3
    baseline = write(tmp_path / "baseline.json", older)
    candidate = write(tmp_path / "candidate.json", _with_code(_code()))
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(candidate)]) == 0
    assert (
        "  note: torch2.11.0/cpu does not record the code that ran (a report of an earlier version):"
        " whether a kernel's code changed cannot be told\n"
    ) in capsys.readouterr().out


def test_a_malformed_code_block_is_one_error_naming_the_key(tmp_path, capsys):
    code = _code()
    code["kernels"]["mine"]["sha256"] = 5
    bad = write(tmp_path / "bad.json", _with_code(code))
    assert main(["compare", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"scaledmm compare: error: {bad}: key 'matrix.code.kernels.mine.sha256' must be a string or null, not an integer"
    ]
