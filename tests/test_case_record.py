"""The case as a typed record (verdict/case_axes.CaseParams): every parameter a field, the mapping
view exactly the keys given, so that ids and recorded reports stay as they are; and a corpus
entry keeps every key it was saved with."""

import json
import pickle

import pytest
import yaml
from case_factory import BASE_CASE, case_params

from pytest_scaledmm.matrix.case_params import Case, case_id, make_case
from pytest_scaledmm.matrix.corpus import CORPUS_SCHEMA, load_corpus
from pytest_scaledmm.plugin.explore import save_corpus
from pytest_scaledmm.verdict.case_axes import NEUTRAL, PARAM_FIELDS, CaseKeyError, CaseParams


def test_to_json_gives_back_exactly_the_keys_given_in_their_order():
    given = {"n": 16, **case_params(value_regime="real_scales"), "m": 8}
    record = CaseParams.from_json(given)
    assert list(record.to_json()) == list(given)
    assert record.to_json() == given
    assert CaseParams.from_json(record.to_json()) == record


def test_a_left_out_axis_reads_as_its_neutral_value_but_is_not_given():
    record = CaseParams.from_json(case_params())
    assert record.special_scale == record.value_of("special_scale") == NEUTRAL["special_scale"] == "none"
    assert record.operand_layout == "dense" and record.groups == 4
    assert not record.has("special_scale") and "special_scale" not in record.to_json()
    assert not record.grouped and not record.special and not record.dynamic_activation


def test_the_record_is_not_a_mapping_its_fields_are_read_by_name():
    from collections.abc import Mapping

    record = CaseParams.from_json(case_params())
    assert not isinstance(record, Mapping)
    with pytest.raises(TypeError):
        record["kernel"]  # noqa: B018  the back door is shut
    with pytest.raises(CaseKeyError):
        record.value_of("scale_c")


@pytest.mark.parametrize(
    "params, key, problem",
    [
        ({**BASE_CASE, "scale_c": "rowwise"}, "scale_c", "not a case parameter"),
        ({k: v for k, v in BASE_CASE.items() if k != "k"}, "k", "required"),
    ],
)
def test_from_json_refuses_an_unknown_key_and_a_missing_one(params, key, problem):
    with pytest.raises(CaseKeyError) as info:
        CaseParams.from_json(params)
    assert (info.value.key, info.value.problem) == (key, problem)


def test_with_values_changes_a_copy_and_gives_the_new_keys():
    record = CaseParams.from_json(case_params())
    other = record.with_values(m=48, special_scale="nan")
    assert (record.m, other.m) == (16, 48)
    assert not record.has("special_scale") and other.value_of("special_scale") == "nan" and other.special
    assert list(other.to_json())[-1] == "special_scale"
    with pytest.raises(CaseKeyError):
        record.with_values(bogus=1)


def test_without_leaves_keys_out_as_if_never_given_and_the_id_follows():
    record = CaseParams.from_json(case_params(special_side="a"))
    other = record.without("special_side")
    assert record.has("special_side") and not other.has("special_side")
    assert other.special_side == "a" and "special_side" not in other.to_json()
    assert other == CaseParams.from_json(case_params())
    # A neutral value given is another case than one left out: its id hashes the key too.
    assert case_id(record) != case_id(other)
    assert record.given_value("special_side") == "a" and other.given_value("special_side") is None
    for key in ("kernel", "m", "bogus"):
        with pytest.raises(CaseKeyError):
            record.without(key)


def test_the_record_is_frozen_and_crosses_a_process_boundary():
    record = CaseParams.from_json(case_params(value_regime="near_limit"))
    with pytest.raises(AttributeError):
        record.m = 1  # type: ignore[misc]
    copy = pickle.loads(pickle.dumps(record))
    assert copy == record and copy.to_json() == record.to_json() and copy.value_regime == "near_limit"


def test_a_case_holds_the_record_and_its_id_is_the_hash_of_the_keys_given():
    params = case_params(operand_layout="scale_on_host")
    case = make_case(params)
    assert isinstance(case.params, CaseParams)
    assert case.id == case_id(params) == case_id(CaseParams.from_json(params))
    assert "hostscale" in case.id
    assert json.loads(json.dumps(case.to_json())) == params
    # A plain mapping given to Case becomes the record too (a triage variant, a child's case).
    assert isinstance(Case(case.id, dict(params)).params, CaseParams)


def test_every_record_field_is_a_corpus_key():
    schema = CORPUS_SCHEMA["properties"]["cases"]["items"]["properties"]["params"]["properties"]
    assert set(schema) == set(PARAM_FIELDS)


def test_a_corpus_entry_keeps_every_axis_it_was_saved_with(tmp_path):
    """The regime, layout and special operand of a saved case come back: leaving them out would
    replay another, easier case under the saved one's name."""
    # As generation makes a case: every categorical axis given.
    params = case_params(
        scale_layout="contiguous",
        activation_rank=2,
        special_scale="none",
        mode="inductor",
        value_regime="real_scales",
        operand_layout="b_padded",
        special_operand="nan_b",
    )
    corpus = tmp_path / "corpus.yaml"
    assert save_corpus(corpus, [{"params": params, "outcome": "MISMATCH"}]) == 1
    saved = yaml.safe_load(corpus.read_text())["cases"][0]
    assert saved["id"] == case_id(params)
    (included,) = load_corpus(corpus)
    assert dict(included.params) == params and make_case(included.params).id == saved["id"]


def _included(tmp_path, declared: dict, params: str):
    from matrices import SYNTHETIC, matrix_text, planted

    (tmp_path / "corpus.yaml").write_text(
        f"version: 1\ncases:\n- params: {{kernel: k, m: 8, k: 32, n: 16, {params}}}\n"
    )
    kernel = planted("k", "correct", **declared)
    axes = {**SYNTHETIC, "mode": ["aot_eager"], "m": [4], "k": [32], "n": [16]}
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(matrix_text([kernel], axes, cases=1, include=["corpus.yaml"]))
    return matrix


@pytest.mark.parametrize(
    "entry, kernel_entry, want",
    [
        # Generation's judgement: a boundary case's refusal would excuse a real failure.
        ("purpose: boundary, expected_refusal: scale_pair", {}, {}),
        # The kernel's declaration, not the entry's: a huge divisor would make any result pass.
        ("activation: dynamic, activation_divisor: 1.0e+300", {}, {}),
        ("accumulation: fast", {"accumulation": "fp32"}, {"accumulation": "fp32"}),
    ],
)
def test_a_corpus_entry_decides_neither_the_kernels_declaration_nor_the_cases_purpose(
    tmp_path, entry, kernel_entry, want
):
    from pytest_scaledmm.matrix.cases import generate_cases
    from pytest_scaledmm.matrix.spec import load_spec

    spec = load_spec(_included(tmp_path, kernel_entry, entry))
    cases, _ = generate_cases(spec, spec.profile("default"))
    included = [c for c in cases if c.params.m == 8]
    assert len(included) == 1
    params = included[0].params
    for key in ("purpose", "expected_refusal", "activation", "activation_divisor", "accumulation"):
        assert (params.value_of(key) if params.has(key) else None) == want.get(key), key


def test_an_axis_the_kernel_does_not_take_is_one_clear_error(tmp_path):
    from pytest_scaledmm.matrix.errors import MatrixError
    from pytest_scaledmm.matrix.spec import load_spec

    with pytest.raises(MatrixError) as info:
        load_spec(_included(tmp_path, {}, "group_layout: 2d3d"))
    assert "corpus.yaml" in str(info.value) and "cases[0].params.group_layout" in str(info.value)
    assert "takes no group_layout" in str(info.value)


def test_a_record_made_by_keyword_holds_what_it_was_given_beyond_the_defaults():
    record = CaseParams(kernel="k", m=1, k=2, n=3, purpose="boundary")
    assert record.to_json() == {"kernel": "k", "m": 1, "k": 2, "n": 3, "purpose": "boundary"}
    assert record.purpose == "boundary"


def test_the_writer_records_every_field_of_an_outcome_and_of_an_error():
    """session.record builds the record field by field: a field added to Outcome or ErrorInfo and
    not written there would vanish from every report."""
    import dataclasses

    from pytest_scaledmm.plugin.session import MatrixSession
    from pytest_scaledmm.verdict import outcome as oc

    error = oc.ErrorInfo("builtins.RuntimeError", "boom", "builtins.RuntimeError", "inductor", "root", "k.py:1 in f")
    result = oc.Outcome(oc.COMPILE_ONLY_ERROR, "sig", "inductor", "detail", eager_error=error, compiled_error=error)
    record = MatrixSession.record(make_case(case_params()), result)
    written = set(result.to_json())  # what the outcome holds, its observations as `extra`
    assert written <= set(record), written - set(record)
    assert record["compiled_error"] == dataclasses.asdict(error)
    assert list(record["compiled_error"]) == [f.name for f in dataclasses.fields(oc.ErrorInfo)]
