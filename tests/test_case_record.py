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
    assert dict(record) == given and len(record) == len(given)
    assert CaseParams.from_json(record.to_json()) == record


def test_a_left_out_axis_reads_as_its_neutral_value_but_is_not_in_the_mapping():
    record = CaseParams.from_json(case_params())
    assert record.special_scale == NEUTRAL["special_scale"] == "none"
    assert record.operand_layout == "dense" and record.groups == 4
    assert "special_scale" not in record
    assert record.get("special_scale") is None
    with pytest.raises(KeyError):
        record["special_scale"]
    assert not record.grouped and not record.special and not record.dynamic_activation


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
    assert "special_scale" not in record and other["special_scale"] == "nan" and other.special
    assert list(other)[-1] == "special_scale"
    with pytest.raises(CaseKeyError):
        record.with_values(bogus=1)


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


def test_a_corpus_entry_keeps_every_key_it_was_saved_with(tmp_path):
    """The regime, layout, special operand and declared accumulation of a saved case come back:
    leaving them out would replay another, easier case under the saved one's name."""
    # As generation makes a case: every categorical axis given.
    params = case_params(
        scale_layout="contiguous",
        activation_rank=2,
        special_scale="none",
        mode="inductor",
        value_regime="real_scales",
        operand_layout="b_padded",
        special_operand="nan_b",
        accumulation="fast",
        purpose="special",
    )
    corpus = tmp_path / "corpus.yaml"
    assert save_corpus(corpus, [{"params": params, "outcome": "MISMATCH"}]) == 1
    saved = yaml.safe_load(corpus.read_text())["cases"][0]
    assert saved["id"] == case_id(params)
    (included,) = load_corpus(corpus)
    assert make_case(included.params).id == saved["id"]
    assert dict(included.params) == {k: params[k] for k in included.params} and set(included.params) == set(params)
