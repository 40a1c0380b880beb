"""The known-failure catalogue: XFAIL when predicted, FIXED_UPSTREAM when it passes, a failure
when the signature differs; version ranges through packaging's specifiers; a signature that
would match any failure is refused."""

import pytest
from reports_factory import case

from matrices import IN_PROCESS, catalogue_matrix, matrix_text, planted
from pytest_scaledmm.matrix.errors import MatrixError
from pytest_scaledmm.matrix.known_failures import Catalogue, KnownFailure
from pytest_scaledmm.matrix.spec import load_spec

RANK = "COMPILE_ONLY_ERROR"


def entry(**overrides):
    data = {"match": {"scale_a": "tensor_0d", "scale_b": "tensor_1d"}, "signature": "scale ranks differ"}
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    "spec, torch, covered",
    [
        (">=2.9,<2.12", "2.11.0+cu128", True),
        (">=2.9,<2.12", "2.12.0", False),
        (">=2.9,<2.12", "2.9.0", True),
        # String comparison would put "2.13" before "2.9"; versions do not.
        (">=2.9", "2.13.0+cpu", True),
        ("<2.9", "2.13.0+cpu", False),
        (">=2.14", "2.14.0a0+git1234abc", True),  # a nightly belongs to its release's range
        ("==2.3.*", "2.3.1+cu121", True),
        (">=2.9", "not-a-version", False),
    ],
)
def test_torch_range_uses_version_specifiers(spec, torch, covered):
    kf = KnownFailure.from_entry(0, entry(torch=spec))
    assert kf.covers({"scale_a": "tensor_0d", "scale_b": "tensor_1d"}, torch, "cpu") is covered


def test_match_on_params_and_arch():
    kf = KnownFailure.from_entry(0, entry(match={"mode": ["inductor", "max-autotune"], "arch": "sm90"}))
    assert kf.covers({"mode": "inductor"}, "2.11.0", "sm90")
    assert not kf.covers({"mode": "inductor"}, "2.11.0", "cpu")
    assert not kf.covers({"mode": "aot_eager"}, "2.11.0", "sm90")


def test_signature_is_compared_normalised_exact_or_substring():
    recorded = "TorchRuntimeError <- RuntimeError: For non-tensorwise scaling, scale tensors must be 2D, but got scale_a.dim()=N and scale_b.dim()=N"
    assert KnownFailure.from_entry(0, entry(signature=recorded)).expects(recorded)
    # Pasted from the raw message: sizes are normalised the same way before comparing.
    assert KnownFailure.from_entry(0, entry(signature="scale_a.dim()=2 and scale_b.dim()=0")).expects(recorded)
    assert not KnownFailure.from_entry(0, entry(signature="LoweringException")).expects(recorded)
    assert not KnownFailure.from_entry(0, entry()).expects(None)


def test_apply_rewrites_records():
    catalogue = Catalogue.from_entries([entry(torch=">=2.9", link="https://example.invalid/1")])
    params = {"scale_a": "tensor_0d", "scale_b": "tensor_1d"}
    xfail = catalogue.apply(case("a", RANK, "TorchRuntimeError: scale ranks differ", **params), "2.13.0", "cpu")
    assert xfail["outcome"] == "XFAIL" and xfail["known_failure"]["original_outcome"] == RANK
    assert "https://example.invalid/1" in xfail["detail"]
    fixed = catalogue.apply(case("b", "PASS", **params), "2.13.0", "cpu")
    assert fixed["outcome"] == "FIXED_UPSTREAM" and "retire" in fixed["detail"]
    other = catalogue.apply(case("c", RANK, "InductorError: something else", **params), "2.13.0", "cpu")
    assert other["outcome"] == RANK and other["known_failure_missed"][0]["signature"] == "scale ranks differ"
    old = catalogue.apply(case("d", RANK, "TorchRuntimeError: scale ranks differ", **params), "2.8.0", "cpu")
    assert old["outcome"] == RANK  # outside the torch range
    unsupported = catalogue.apply(case("e", "UNSUPPORTED", "NotImplementedError", **params), "2.13.0", "cpu")
    assert unsupported["outcome"] == "UNSUPPORTED"


# -- inside pytest --------------------------------------------------------------------------------


def known_matrix(kernel, signature, torch=None) -> str:
    """One case of a planted kernel, and a catalogue entry that expects `signature` of it."""
    entry = {
        "match": {"scale_a": "tensor_0d", "scale_b": "tensor_1d"},
        "signature": signature,
        **({"torch": torch} if torch else {}),
        "link": "https://example.invalid/issue/42",
    }
    return matrix_text([planted(kernel)], known_failures=[entry])


def test_known_failure_is_xfail(matrix_project):
    matrix_project.write_matrix(known_matrix("asserts_rank_under_compile", "scale ranks differ"))
    # Default options (case in a child process, triage on): the catalogue applies all the same.
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", "-rx")
    result.assert_outcomes(xfailed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["XFAIL *known failure #0 (https://example.invalid/issue/42)*scale ranks differ*"])
    record = matrix_project.report()["cases"][0]
    assert record["outcome"] == "XFAIL"
    assert record["known_failure"]["original_outcome"] == "COMPILE_ONLY_ERROR"
    assert matrix_project.report()["summary"] == {"XFAIL": 1}


def test_known_failure_that_passes_is_fixed_upstream(matrix_project):
    matrix_project.write_matrix(known_matrix("correct", "scale ranks differ"))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*scaled-mm known failures fixed upstream*",
            "known_failures?0? (scale ranks differ) https://example.invalid/issue/42: 1 case(s) pass now, retire the entry*",
            "*1 fixed upstream*",
        ]
    )
    assert matrix_project.report()["cases"][0]["outcome"] == "FIXED_UPSTREAM"


def test_known_failure_with_another_signature_still_fails(matrix_project):
    matrix_project.write_matrix(known_matrix("asserts_rank_under_compile", "LoweringException"))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json")
    result.assert_outcomes(failed=1)
    record = matrix_project.report()["cases"][0]
    assert record["outcome"] == "COMPILE_ONLY_ERROR"
    assert "expects another signature" in record["detail"]


def test_known_failure_outside_its_torch_range_still_fails(matrix_project):
    matrix_project.write_matrix(known_matrix("asserts_rank_under_compile", "scale ranks differ", torch="<2.3"))
    matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json").assert_outcomes(failed=1)
    assert matrix_project.report()["cases"][0]["outcome"] == "COMPILE_ONLY_ERROR"


# -- a signature that would match any failure ------------------------------------------------------


@pytest.mark.parametrize("signature", [" ", "M", "MISM", "dim()=2"])
def test_catch_all_signature_is_a_matrix_error_naming_file_and_key(tmp_path, signature):
    # Each normalises to fewer than 8 characters and matched every failure of its kind.
    path = catalogue_matrix(tmp_path / "matrix.yaml", [{"match": {"mode": "aot_eager"}, "signature": signature}])
    with pytest.raises(MatrixError) as excinfo:
        Catalogue.from_spec(load_spec(path))
    assert excinfo.value.key == "known_failures[0].signature"
    assert str(path) in str(excinfo.value)


def test_meaningful_signature_is_accepted(tmp_path):
    path = catalogue_matrix(
        tmp_path / "matrix.yaml", [{"match": {"mode": "aot_eager"}, "signature": "LoweringException: AssertionError"}]
    )
    assert len(Catalogue.from_spec(load_spec(path)).entries) == 1


@pytest.mark.parametrize("signature", ["MISMATCH", "ERROR_PARITY:", "  COMPILE_ONLY_ERROR :  x"])
def test_a_signature_that_names_only_its_outcome_class_is_refused(tmp_path, signature):
    # "MISMATCH" is in every MISMATCH signature: as an entry it excused any wrong result.
    path = catalogue_matrix(tmp_path / "matrix.yaml", [{"match": {"mode": "aot_eager"}, "signature": signature}])
    with pytest.raises(MatrixError, match=r"known_failures\[0\]\.signature"):
        Catalogue.from_spec(load_spec(path))


def test_catch_all_signature_stops_the_run_before_any_case(matrix_project):
    # It used to turn the MISMATCH into XFAIL: pytest exited 0.
    entry = {"match": {"mode": "aot_eager"}, "signature": "M"}
    matrix_project.write_matrix(matrix_text([planted("ignores_scale_b")], known_failures=[entry]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "matrix.yaml" in errors[0] and "known_failures[0].signature" in errors[0], errors
    assert "xfailed" not in result.stdout.str() and "Traceback" not in result.stderr.str()


# -- judged by what it would match, not its words ----------------------------------------------


@pytest.mark.parametrize(
    "signature",
    [
        "values off the ref",  # a word cut short: no harness word, still a part of the template
        "off the refer",
        "MISMATCH: eager val",
        "ence by one constant",
        "reference in a band of col",
        "InductorError: L",  # the wrapper of every compiled error and one letter beyond it
        "ductorError: Lo",
        "Unsupported <- Obs",
        # the serving loop's, the dynamic-M, input-mutation, timeout and Dynamo texts
        "second call with other inputs",
        "first output changed by the second call",
        "output shares storage with the previous call",
        "compiled at another M",
        "recompiled 3 times under mark_",
        "MISMATCH: eager changed",
        "the output could not be checked",
        "TIMEOUT: no result within 30 s",
        "raised exception",
    ],
)
def test_a_signature_that_is_a_part_of_a_harness_template_is_refused(tmp_path, signature):
    path = catalogue_matrix(tmp_path / "matrix.yaml", [{"match": {"mode": "aot_eager"}, "signature": signature}])
    with pytest.raises(MatrixError, match=r"the harness writes that text into every signature") as excinfo:
        Catalogue.from_spec(load_spec(path))
    assert excinfo.value.key == "known_failures[0].signature" and str(path) in str(excinfo.value)


@pytest.mark.parametrize(
    "signature",
    [
        "LoweringException: AssertionError",
        "InductorError <- LoweringException: AssertionError",
        "mat_b must be col_major",
        "Unsupported <- ObservedRuntimeError: raised exception RuntimeError('lowering failed')",
        # real messages that share letters or a word with a template
        "Expected both scales to be of float type",
        "Invalid scaling configuration",
        "torch.cuda.OutOfMemoryError",
        "tor failed",
        "Tensor.item()",
        "expected stride",
        "graph break in user code",
    ],
)
def test_a_signature_naming_its_cause_is_accepted(tmp_path, signature):
    path = catalogue_matrix(tmp_path / "matrix.yaml", [{"match": {"mode": "aot_eager"}, "signature": signature}])
    assert len(Catalogue.from_spec(load_spec(path)).entries) == 1


def test_a_truncated_harness_word_no_longer_excuses_every_mismatch(matrix_project):
    # "values off the ref" passed the word guard and made every MISMATCH of the kernel XFAIL.
    entry = {"match": {"kernel": "ignores_scale_b"}, "signature": "values off the ref"}
    matrix_project.write_matrix(matrix_text([planted("ignores_scale_b")], known_failures=[entry]))
    result = matrix_project.run(*IN_PROCESS, "--scaledmm-matrix", "--scaledmm-report", "report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "known_failures[0].signature" in errors[0], errors
    assert "xfailed" not in result.stdout.str()
