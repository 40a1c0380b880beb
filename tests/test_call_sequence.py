"""A case's calls after the first as a sequence (verdict/sequence.py, execution/sequence_plan.py):
another K, N, output dtype and operand dtypes where the kernel's model admits them, then the
first shape again, each against its own reference; a failing sequence shrunk in fresh children to
the shortest that fails the same call (execution/shrink.py) and replayed exactly by
--scaledmm-sequence."""

from pathlib import Path

import pytest
from case_factory import case_params, case_record

from matrices import matrix_text, planted
from pytest_scaledmm.execution.sequence_plan import planned_sequence
from pytest_scaledmm.execution.shrink import ShrinkSequence
from pytest_scaledmm.matrix.case_params import Case
from pytest_scaledmm.matrix.replay_command import replay_command, sequence_of
from pytest_scaledmm.matrix.spec import KernelSpec
from pytest_scaledmm.matrix.support import support_model
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.outcome import Outcome

STATE = "planted_state_kernels"


def _model(**declared):
    return support_model(KernelSpec("k", family="fp8", **declared), "cpu")


def test_the_plan_is_drawn_per_case_and_stays_within_the_declarations():
    params = case_record(kernel="k", m=16, k=64, n=48)
    drawn = {
        "out_dtype": ("bf16", "fp16", "fp32"),
        "dtypes": (("e4m3fn", "e4m3fn"), ("e5m2", "e4m3fn")),
        "bias": (False, True),
    }
    steps = planned_sequence("k.a", params, 7, _model(), drawn)
    assert [step["kind"] for step in steps][-1] == "back" and steps[-1]["changes"] == {}
    assert {step["kind"] for step in steps[:-1]} == {"k", "n", "out_dtype", "dtype", "bias", "weight"}
    by_kind = {step["kind"]: step for step in steps}
    # The next layer: the same shape, its own weight (its seed); the bias added where there is none.
    assert by_kind["weight"]["changes"] == {} and by_kind["weight"]["seed"] != by_kind["back"]["seed"]
    assert by_kind["bias"]["changes"]["bias"] is True
    with_bias = planned_sequence("k.a", params.with_values(bias=True), 7, _model(), drawn)
    assert next(s for s in with_bias if s["kind"] == "bias")["changes"] == {"bias": False}
    # A kernel that declares no bias keeps the case's, and so does a matrix that pins it.
    assert "bias" not in {s["kind"] for s in planned_sequence("k.a", params, 7, _model(bias_out_dtypes=()), drawn)}
    pinned = {**drawn, "bias": (False,)}
    assert "bias" not in {s["kind"] for s in planned_sequence("k.a", params, 7, _model(), pinned)}
    assert planned_sequence("k.a", params, 7, _model(), drawn) == steps  # the same case, the same calls
    orders = {tuple(s["kind"] for s in planned_sequence(f"k.{i}", params, 7, _model(), drawn)) for i in range(12)}
    assert len(orders) > 1  # drawn per case
    # A kernel that takes K in multiples of 32 and one output dtype: the steps keep to that.
    narrow = _model(k_multiple=32, out_dtypes=("bf16",), dtypes=("e4m3fn",))
    for i in range(12):
        kinds = {s["kind"]: s["changes"] for s in planned_sequence(f"k.{i}", params, 7, narrow, drawn)}
        assert "out_dtype" not in kinds and "dtype" not in kinds
        assert kinds["k"]["k"] % 32 == 0 and kinds["k"]["k"] != 64
    # Dtypes only among those the kernel's cases are drawn with: none given, none changed.
    same_dtypes = {"k", "n", "weight", "back"}
    assert {s["kind"] for s in planned_sequence("k.a", params, 7, _model())} == same_dtypes
    only = {"out_dtype": ("bf16",), "dtypes": (("e4m3fn", "e4m3fn"),)}
    assert {s["kind"] for s in planned_sequence("k.a", params, 7, _model(), only)} == same_dtypes


def test_a_grouped_case_makes_no_sequence():
    grouped = case_record(kernel="scaled_grouped_mm", group_layout="2d3d", groups=2, m=16, k=32, n=16)
    assert planned_sequence("g.a", grouped, 7, _model()) == []


def _failing(keep, failed_at, label="out_dtype=fp16", kind="out_dtype"):
    steps = [{"kind": kind, "label": label, "changes": {}, "seed": 1}]
    result = Outcome(oc.MISMATCH, signature="MISMATCH: eager later call of a sequence (x): off")
    result.observations.sequence = {
        "steps": steps,
        "keep": keep,
        "calls": [str(i) for i in keep],
        "failed": label,
        "failed_at": failed_at,
    }
    return result


class FakeRunner:
    """Fails a replay when it keeps every call in `needed`."""

    def __init__(self, needed, replayable=True):
        self.needed = set(needed)
        self.replays = []
        self._replayable = replayable

    def replayable(self, case):
        return self._replayable

    def run_after(self, earlier, case, keep=None):
        self.replays.append(tuple(keep))
        if self.needed <= set(keep):
            return _failing(list(keep), max(keep, default=0))
        return Outcome(oc.PASS)


def _case(name):
    return Case(name, case_params(kernel="k"))


def test_a_failing_sequence_shrinks_to_the_calls_it_needs_and_replays_them():
    runner = FakeRunner(needed={1, 3})
    shrink = ShrinkSequence(runner, lambda case, result: result, named=False)
    found = shrink.judge(_case("k.a"), _failing([0, 1, 2, 3, 4], 3))
    assert found.outcome == oc.MISMATCH
    assert found.observations.sequence["shrunk"]["keep"] == [1, 3]
    assert found.observations.sequence["shrunk"]["from"] == [0, 1, 2, 3]
    # Each earlier call left out in turn, then the failing call made first, alone.
    assert runner.replays == [(1, 2, 3), (2, 3), (1, 3), ()]
    assert found.observations.sequence["as_first_call"] == oc.PASS
    assert "the earlier calls' state fails it" in found.detail
    command = replay_command("m.yaml", "k.a", sequence=sequence_of({"extra": found.observations.to_json()}))
    assert command.endswith("--scaledmm-sequence 1,3")
    # The same failing kind of the same kernel again: named after the first, not shrunk twice.
    again = shrink.judge(_case("k.b"), _failing([0, 1, 2], 2))
    assert again.observations.sequence["shrunk"] == {"replays": 0, "like": "k.a"}
    assert len(runner.replays) == 4


def test_a_sequence_that_does_not_fail_alike_in_a_fresh_child_is_not_called_shrunk():
    # It failed only in the run's own child (what an earlier case left there): no call can go,
    # and the calls up to the failing one pass in a fresh child.
    runner = FakeRunner(needed={99})
    found = ShrinkSequence(runner, lambda c, r: r, named=False).judge(_case("k.a"), _failing([0, 1], 1))
    assert found.outcome == oc.MISMATCH and "keep" not in found.observations.sequence["shrunk"]
    assert "PASS in a fresh process" in found.observations.sequence["shrunk"]["why"]
    assert sequence_of({"extra": found.observations.to_json()}) is None


def test_what_is_not_shrunk_says_why():
    # One call: nothing to leave out, made again in a fresh child; made first it fails too (a
    # plain failure at those parameters).
    plain = FakeRunner(set())
    alone = ShrinkSequence(plain, lambda c, r: r, named=False).judge(_case("k.a"), _failing([0], 0))
    assert alone.observations.sequence["shrunk"]["keep"] == [0] and plain.replays == [(0,), ()]
    assert alone.observations.sequence["as_first_call"] == oc.MISMATCH
    assert "a failure at those parameters" in alone.detail
    in_process = ShrinkSequence(FakeRunner({0}, replayable=False), lambda c, r: r, named=False)
    said = in_process.judge(_case("k.a"), _failing([0, 1], 1)).observations.sequence["shrunk"]
    assert said["replays"] == 0 and "pytest process" in said["why"]
    named = ShrinkSequence(FakeRunner({0}), lambda c, r: r, named=True).judge(_case("k.a"), _failing([0, 4], 4))
    assert (
        named.observations.sequence["shrunk"]["keep"] == [0, 4]
        and "named" in named.observations.sequence["shrunk"]["why"]
    )
    passed = ShrinkSequence(FakeRunner({0}), lambda c, r: r, named=False).judge(_case("k.a"), Outcome(oc.PASS))
    assert passed.observations.sequence is None


@pytest.mark.parametrize("bad", ["a", "1,-2", "1;2", "99999"])
def test_a_bad_sequence_option_is_one_usage_error(matrix_project, bad):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run("--scaledmm-matrix", f"--scaledmm-sequence={bad}")
    assert result.ret == 4
    assert "--scaledmm-sequence" in result.stderr.str() and "Traceback" not in result.stderr.str()


@pytest.mark.slow
def test_state_keyed_on_part_of_the_call_is_found_in_one_case_shrunk_and_replayed(matrix_project, pytester):
    # Kernels wrong only on a later call that changes what their cache ignores (K, the output
    # dtype), and the twin keyed on everything; two output dtypes, so that a step can change it.
    kernels = [
        planted("k_split_keyed_on_n", module=STATE),
        planted("output_buffer_per_shape", module=STATE),
        planted("keyed_on_everything", module=STATE),
    ]
    axes = {"mode": ["aot_eager"], "m": [16], "k": [64], "n": [16], "out_dtype": ["bf16", "fp32"]}
    text = matrix_text(kernels, axes, cases=12)
    matrix_project.write_matrix(text)
    matrix_project.run("--scaledmm-matrix", "-p", "no:xdist", "--no-scaledmm-triage", "--scaledmm-report", "r.json")
    cases = matrix_project.report("r.json")["cases"]
    by_kernel = {}
    for case in cases:
        by_kernel.setdefault(case["params"]["kernel"], []).append(case)
    assert {c["outcome"] for c in by_kernel["keyed_on_everything"]} == {oc.PASS}
    for kernel in ("k_split_keyed_on_n", "output_buffer_per_shape"):
        found = [c for c in by_kernel[kernel] if "later call of a sequence" in (c.get("signature") or "")]
        assert found, kernel
    shrunk = [c for c in cases if "keep" in ((c.get("extra") or {}).get("sequence") or {}).get("shrunk", {})]
    assert shrunk
    case = shrunk[0]
    keep = case["extra"]["sequence"]["shrunk"]["keep"]
    assert set(keep) <= set(case["extra"]["sequence"]["shrunk"]["from"])
    # Its replay, in a new process: exactly those calls, the same finding.
    again = pytester.runpytest_subprocess(
        f"{matrix_project.path / 'matrix.yaml'}::{case['id']}",
        "--scaledmm-matrix",
        "--scaledmm-sequence",
        ",".join(map(str, keep)),
        "-p",
        "no:xdist",
        "--scaledmm-report",
        "again.json",
    )
    (replayed,) = matrix_project.report("again.json")["cases"]
    assert again.ret == 1
    assert (replayed["outcome"], replayed["signature"]) == (case["outcome"], case["signature"])


def test_a_user_kernel_that_raises_torchs_words_on_a_later_call_fails_its_case():
    # Its raise names a refusal torch documents, but a user kernel's raise is its own finding.
    import planted_state_kernels
    from direct_run import run_matrix

    planted_state_kernels.forget()
    kernel = planted("refuses_after_another_n", module=STATE)
    results = run_matrix(matrix_text([kernel], {"mode": ["eager"], "m": [16], "k": [32], "n": [16]}))
    planted_state_kernels.forget()
    (case, result), *_ = results
    assert result.outcome == oc.MISMATCH
    assert "later call of a sequence" in result.signature and "raised" in result.signature
    assert result.observations.sequence["failed"].startswith("n=")


def test_calls_the_sequence_option_names_beyond_the_plan_are_said_not_made():
    from pytest_scaledmm.execution.run import RunContext, run_case
    from pytest_scaledmm.matrix.cases import generate_cases
    from pytest_scaledmm.matrix.kernels import resolve_kernels
    from pytest_scaledmm.matrix.spec import parse_spec

    spec = parse_spec(Path("matrix.yaml"), matrix_text([planted("correct")], {"mode": ["eager"]}))
    (case,), _ = generate_cases(spec, spec.profile("default"))
    kernels = resolve_kernels(spec.path, spec.kernels)
    ctx = RunContext("cpu", spec.seed, {k.name: k for k in spec.kernels}, kernels, sequence=(0, 99))
    result = run_case(case, ctx)
    assert result.outcome == oc.PASS
    assert any("[99]" in said and "not made" in said for said in result.observations.not_checked)


@pytest.mark.slow
def test_a_kernel_that_ends_its_process_in_a_later_call_keeps_the_first_calls_evidence(matrix_project):
    kernel = planted("exits_on_the_first_shape_again", module=STATE)
    matrix_project.write_matrix(matrix_text([kernel], {"mode": ["eager"], "m": [16], "k": [32], "n": [16]}))
    matrix_project.run("--scaledmm-matrix", "-p", "no:xdist", "--no-scaledmm-triage", "--scaledmm-report", "r.json")
    (case,) = matrix_project.report("r.json")["cases"]
    assert case["outcome"] == oc.CRASH
    assert case["extra"]["died_after"]  # the eager side's check was made before the process ended
    assert case["errors"]["eager"]["ok"] is True
    assert [step["kind"] for step in case["extra"]["sequence"]["steps"]][-1] == "back"
