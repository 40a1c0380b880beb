"""Explore mode: hypothesis finds a planted failure, shrinks it, saves it to the corpus; a matrix
that includes the corpus replays it. Include errors name the file and the key."""

import pytest
import yaml

from matrices import matrix_text
from pytest_scaledmm.matrix.corpus import load_corpus
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.spec import load_spec
from pytest_scaledmm.plugin.explore import save_corpus

EXPLORE_MATRIX = """\
version: 1
kernels:
  - {name: rank, impl: 'planted_kernels:asserts_rank_under_compile'}
axes:
  scale_a: [tensor_1d, tensor_0d, tensor_1x1]
  scale_b: [tensor_1d, tensor_0d, tensor_1x1]
  mode: [eager]
  dtype_a: [e4m3fn]
  dtype_b: [e4m3fn]
  out_dtype: [bf16]
  bias: [false]
  use_fast_accum: [false]
  scale_layout: [contiguous]
  special_scale: [none]
  value_regime: [standard]
  operand_layout: [dense]
  bias_dtype: [out]
  scale_dtype: [fp32]
  m: {min: 1, max: 64}
  k: [64, 32]
  n: [32, 16]
limits: {max_operand_elements: 4096}
profiles:
  default: {cases: 2, axes: {scale_a: [tensor_1d], scale_b: [tensor_1d]}}
"""


def test_explore_shrinks_a_failure_into_the_corpus_and_the_matrix_replays_it(matrix_project, pytester):
    matrix_project.write_matrix(
        EXPLORE_MATRIX.replace(
            "  default: {cases: 2, axes: {scale_a: [tensor_1d], scale_b: [tensor_1d]}}", "  default: {cases: 2}"
        )
    )
    result = matrix_project.run(
        "--scaledmm-matrix",
        "--scaledmm-explore",
        "--scaledmm-explore-examples",
        "25",
        "--scaledmm-corpus",
        "corpus.yaml",
        "--no-scaledmm-triage",
        "--scaledmm-report",
        "report.json",
    )
    result.assert_outcomes(failed=1)  # one explore item for the one kernel
    out = result.stdout.str()
    assert "explore[rank]" in out and "minimal cases" in out and "corpus: 1 new minimal case(s)" in out
    cases = load_corpus(pytester.path / "corpus.yaml")
    assert len(cases) == 1
    found = cases[0].params
    # Shrunk: the smallest shapes, and the first-listed scale forms that still differ in rank.
    assert (found["m"], found["k"], found["n"]) == (1, 32, 16)
    assert found["scale_a"] != found["scale_b"]
    assert {found["scale_a"], found["scale_b"]} <= {"tensor_1d", "tensor_0d"}
    corpus_id = yaml.safe_load((pytester.path / "corpus.yaml").read_text())["cases"][0]["id"]
    assert matrix_project.report()["cases"][0]["id"] == corpus_id

    # The profile itself has no failing case; the included corpus brings the found one back.
    matrix_project.write_matrix(EXPLORE_MATRIX + "include: [corpus.yaml]\n")
    replay = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "replay.json", "--no-scaledmm-triage")
    outcomes = {c["id"]: c["outcome"] for c in matrix_project.report("replay.json")["cases"]}
    # The budget's two cases and the guaranteed shape classes pass; the corpus case fails.
    replay.assert_outcomes(passed=len(outcomes) - 1, failed=1)
    assert outcomes[corpus_id] == "COMPILE_ONLY_ERROR"
    again = matrix_project.run("--scaledmm-matrix", "--scaledmm-case", corpus_id, "--no-scaledmm-triage")
    again.assert_outcomes(failed=1, deselected=len(outcomes) - 1)
    # Exploring again adds nothing already there.
    assert save_corpus(pytester.path / "corpus.yaml", [{"params": dict(found)}]) == 0


def _write(tmp_path, corpus_text, include="corpus.yaml"):
    (tmp_path / "corpus.yaml").write_text(corpus_text)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(EXPLORE_MATRIX + f"include: [{include}]\n")
    return matrix


@pytest.mark.parametrize(
    "corpus, include, key, words",
    [
        ("", "missing.yaml", "include[0]", "no such file"),
        (
            "version: 1\ncases: [{params: {kernel: rank, m: 1, k: 32, n: 16, scale_a: bogus}}]\n",
            "corpus.yaml",
            "cases[0].params.scale_a",
            "'bogus' is not one of",
        ),
        (
            "version: 1\ncases: [{params: {kernel: nope, m: 1, k: 32, n: 16}}]\n",
            "corpus.yaml",
            "cases[0].params.kernel",
            "'nope' is not in the matrix",
        ),
        (
            "version: 1\ncases: [{params: {kernel: rank, k: 32, n: 16}}]\n",
            "corpus.yaml",
            "cases[0].params",
            "'m' is a required",
        ),
        ("version: 2\ncases: []\n", "corpus.yaml", "version", "1 was expected"),
        ("cases: [\n", "corpus.yaml", "", "not valid YAML"),
    ],
    ids=["missing", "bad-axis-value", "unknown-kernel", "missing-dim", "version", "yaml"],
)
def test_bad_includes_are_one_clear_error(tmp_path, corpus, include, key, words):
    matrix = _write(tmp_path, corpus, include)
    with pytest.raises(MatrixError) as info:
        load_spec(matrix)
    message = str(info.value)
    assert words in message
    assert info.value.key == key
    assert ("missing.yaml" in message) if include == "missing.yaml" else ("corpus.yaml" in message)


def test_included_cases_fill_defaults_and_change_the_matrix_hash(tmp_path):
    matrix = _write(tmp_path, "version: 1\ncases: [{params: {kernel: rank, m: 1, k: 32, n: 16, scale_a: tensor_0d}}]\n")
    spec = load_spec(matrix)
    (params,) = spec.included_cases
    assert params["scale_b"] == "tensor_0d" and params["mode"] == "inductor"  # defaults of omitted axes
    plain = tmp_path / "plain.yaml"
    plain.write_text(EXPLORE_MATRIX)
    assert load_spec(plain).digest != spec.digest


def test_a_usage_error_for_a_bad_include_in_pytest(matrix_project):
    matrix_project.write_matrix(EXPLORE_MATRIX + "include: [missing.yaml]\n")
    result = matrix_project.run("--scaledmm-matrix")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "include[0]" in result.stderr.str() and "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    "target, expected",
    [
        ("/etc/passwd", "must be object, not text"),
        ("/dev/zero", "not a regular file"),
        ("no-such-corpus.yaml", "no such file"),  # beside the matrix, in a fresh directory
    ],
)
def test_an_include_that_is_no_corpus_is_one_short_error(tmp_path, target, expected):
    from pytest_scaledmm.matrix.spec import load_spec

    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(matrix_text(["aten_scaled_mm"], include=[target]))
    with pytest.raises(MatrixError) as excinfo:
        load_spec(matrix)
    message = str(excinfo.value)
    short = len(message.replace(str(tmp_path), "<tmp>"))  # the temporary directory's length aside
    assert expected in message and short < 200 and "root:" not in message, message
