"""A finding must replay alone (pytest_scaledmm/execution/alone.py): a case that failed after other
cases ran in its worker's child is run again in a fresh child. Failing alike there, its record says
it replayed; passing there, it is ORDER_DEPENDENT and names the case it fails after, and
`--scaledmm-after` replays the pair in a new process."""

from types import SimpleNamespace

import pytest
from case_factory import case_params

from matrices import matrix_text, planted
from pytest_scaledmm.execution.alone import ReplayAlone
from pytest_scaledmm.matrix.case_params import Case
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.outcome import Outcome

STATE = "planted_state_kernels"
# Two cases at one weight shape, one per output dtype, in one child (no xdist).
TWO_DTYPES = {"out_dtype": ["bf16", "fp32"], "mode": ["aot_eager"]}
# Two cases at one weight shape, one per scale form of scale_a: no case's call sequence changes
# the scale form, so a cache that ignores it shows only in the order of cases.
TWO_SCALE_FORMS = {"scale_a": ["tensor_1d", "rowwise"], "mode": ["aot_eager"]}
ONE_CHILD = ("-p", "no:xdist", "--no-scaledmm-triage")


def _case(name: str, **params) -> Case:
    return Case(name, case_params(kernel=params.pop("kernel", "k"), **params))


class FakeRunner:
    """Answers from a rule: which outcome `case` gets after `earlier` (ids) in a fresh child."""

    def __init__(self, rule):
        self.rule = rule
        self.replays: list[tuple] = []

    def replayable(self, case):
        return True

    def run_after(self, earlier, case):
        self.replays.append((tuple(c.id for c in earlier), case.id))
        return self.rule(tuple(c.id for c in earlier), case.id)


def _failed(signature="MISMATCH: off"):
    return Outcome(oc.MISMATCH, signature=signature, detail="values off")


def test_a_failure_that_replays_alone_stands_and_says_so():
    runner = FakeRunner(lambda earlier, case_id: _failed())
    judge = ReplayAlone(runner)
    first = judge.judge(_case("b"), _failed(), [_case("a")])
    assert first.outcome == oc.MISMATCH
    assert first.observations.replayed_alone == {"replayed": True, "after_cases": 1}
    assert runner.replays == [((), "b")]
    # The same failure of the same kernel again: not replayed twice, named after the one that was.
    again = judge.judge(_case("c"), _failed(), [_case("a"), _case("b")])
    assert again.observations.replayed_alone == {"replayed": False, "like": "b"}
    assert len(runner.replays) == 1


def test_a_failure_only_after_an_earlier_case_is_order_dependent_and_names_it():
    # Fails after "x" only; alone, or after "y", it passes.
    runner = FakeRunner(lambda earlier, case_id: _failed() if "x" in earlier else Outcome(oc.PASS))
    earlier = [_case("x"), _case("y", kernel="other")]
    found = ReplayAlone(runner).judge(_case("z"), _failed(), earlier)
    assert found.outcome == oc.ORDER_DEPENDENT and found.failed
    assert found.signature.startswith("ORDER_DEPENDENT: MISMATCH only after another case: MISMATCH: off")
    assert found.observations.replayed_alone == {
        "replayed": True,
        "alone": oc.PASS,
        "in_order": oc.MISMATCH,
        "after": ["x"],
    }
    assert "only after case x" in found.detail and "values off" in found.detail
    # Alone first, then the last case of its own kernel, which was the one.
    assert runner.replays == [((), "z"), (("x",), "z")]


def test_a_failure_after_several_cases_names_them_all_and_one_that_does_not_replay_stays_failed():
    needs_both = FakeRunner(lambda earlier, case_id: _failed() if earlier == ("x", "y") else Outcome(oc.PASS))
    found = ReplayAlone(needs_both).judge(_case("z"), _failed(), [_case("x"), _case("y")])
    assert found.outcome == oc.ORDER_DEPENDENT and found.observations.replayed_alone["after"] == ["x", "y"]
    never = FakeRunner(lambda earlier, case_id: Outcome(oc.PASS))
    kept = ReplayAlone(never).judge(_case("z"), _failed(), [_case("x"), _case("y")])
    assert kept.outcome == oc.MISMATCH  # not proven either way: never a pass
    assert kept.observations.replayed_alone == {"replayed": True, "alone": oc.PASS, "reproduced": False}
    assert kept.detail.startswith("this failure did not replay")


def test_what_is_not_replayed_says_why():
    runner = FakeRunner(lambda earlier, case_id: pytest.fail("nothing is replayed here"))
    judge = ReplayAlone(runner)
    first = _failed()
    assert judge.judge(_case("a"), first, []) is first and first.observations.replayed_alone is None
    timeout = judge.judge(_case("b"), Outcome(oc.TIMEOUT, signature="t"), [_case("a")])
    assert timeout.observations.replayed_alone == {"replayed": False, "why": "a TIMEOUT is not run twice"}
    passed = judge.judge(_case("b"), Outcome(oc.PASS), [_case("a")])
    assert passed.observations.replayed_alone is None
    in_process = ReplayAlone(SimpleNamespace(replayable=lambda case: False)).judge(_case("b"), _failed(), [_case("a")])
    assert in_process.observations.replayed_alone == {"replayed": False, "why": "ran in the pytest process"}


def _cases_by_outcome(report):
    found: dict = {}
    for case in report["cases"]:
        found.setdefault(case["outcome"], []).append(case)
    return found


@pytest.mark.slow
def test_a_buffer_cached_without_the_scale_form_is_found_and_replays_as_a_pair(matrix_project, pytester):
    kernel = planted("epilogue_cache", "scale_buffer_per_weight_shape", module=STATE)
    matrix_project.write_matrix(matrix_text([kernel], TWO_SCALE_FORMS, cases=2))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *ONE_CHILD)
    report = matrix_project.report()
    by_outcome = _cases_by_outcome(report)
    (found,) = by_outcome[oc.ORDER_DEPENDENT]
    (first,) = [c for c in report["cases"] if c["id"] != found["id"] and c["outcome"] == oc.PASS]
    assert found["extra"]["replayed_alone"]["after"] == [first["id"]]
    assert found["params"]["scale_a"] != first["params"]["scale_a"]
    out = result.stdout.str()
    assert f"--scaledmm-after {first['id']}" in out
    matrix = matrix_project.path / "matrix.yaml"
    alone = pytester.runpytest_subprocess(
        f"{matrix}::{found['id']}", "--scaledmm-matrix", "--scaledmm-report", "alone.json", "-p", "no:cacheprovider"
    )
    assert alone.ret == 0 and matrix_project.report("alone.json")["cases"][0]["outcome"] == oc.PASS
    pair = pytester.runpytest_subprocess(
        f"{matrix}::{found['id']}",
        "--scaledmm-matrix",
        "--scaledmm-after",
        first["id"],
        "--scaledmm-report",
        "pair.json",
        "-p",
        "no:cacheprovider",
    )
    (replayed,) = matrix_project.report("pair.json")["cases"]
    assert pair.ret == 1 and replayed["outcome"] == oc.ORDER_DEPENDENT
    assert replayed["extra"]["replayed_alone"]["after"] == [first["id"]]


@pytest.mark.slow
def test_the_twin_keyed_on_everything_passes_and_a_plain_bug_replays_alone(matrix_project):
    kernels = [planted("twin", "keyed_on_everything", module=STATE), planted("ignores_scale_b")]
    matrix_project.write_matrix(matrix_text(kernels, {**TWO_DTYPES, "scale_b": ["tensor_1d"]}, cases=4))
    matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *ONE_CHILD)
    cases = matrix_project.report()["cases"]
    twin = [c for c in cases if c["params"]["kernel"] == "twin"]
    assert twin and all(c["outcome"] == oc.PASS for c in twin)
    wrong = [c for c in cases if c["params"]["kernel"] == "ignores_scale_b"]
    assert {c["outcome"] for c in wrong} == {oc.MISMATCH}
    replayed = [c["extra"].get("replayed_alone") for c in wrong]
    assert any(r and r.get("replayed") is True and r.get("after_cases", 0) >= 1 for r in replayed), replayed


def test_an_after_case_the_run_does_not_generate_is_a_harness_error_and_a_bad_id_a_usage_error(matrix_project):
    matrix_project.write_matrix(matrix_text([planted("correct")]))
    result = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-after", "correct.nothing-like-this", "--scaledmm-report", "report.json"
    )
    (case,) = matrix_project.report()["cases"]
    assert case["outcome"] == oc.HARNESS_ERROR and "correct.nothing-like-this" in case["detail"]
    assert result.ret == 1
    bad = matrix_project.run("--scaledmm-matrix", "--scaledmm-after=a,../b")
    assert bad.ret == 4 and "--scaledmm-after" in bad.stderr.str() and "is not a case id" in bad.stderr.str()


def test_a_failure_of_the_same_class_alone_stands_though_its_signature_differs():
    # A count in the signature (how many elements differ) may change between two runs of a
    # nondeterministic kernel: failing alone in the same class, it did not need the earlier case.
    runner = FakeRunner(lambda earlier, case_id: _failed("MISMATCH: 1 of 16 elements"))
    found = ReplayAlone(runner).judge(_case("b"), _failed("MISMATCH: 4 of 16 elements"), [_case("a")])
    assert found.outcome == oc.MISMATCH
    assert found.observations.replayed_alone == {
        "replayed": True,
        "after_cases": 1,
        "alone_signature": "MISMATCH: 1 of 16 elements",
    }
