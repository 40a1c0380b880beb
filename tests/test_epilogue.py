"""The epilogue's stronger coverage (matrix/epilogue.py): 3-way over its axes and each whole
epilogue under a compiled mode, its targets as the report stores them, and the coverage block's
reading of them, garbage included."""

from pytest_scaledmm.matrix import epilogue
from pytest_scaledmm.reports.coverage import coverage_block

FORMS = ["tensor_0d", "tensor_1d", "rowwise", "blockwise"]


def _everything(row):
    return True


def test_an_eager_only_space_has_no_compiled_targets_and_needs_only_its_3_way_rows():
    values = {"scale_a": FORMS, "scale_b": FORMS, "out_dtype": ["bf16", "fp16", "fp32"], "bias": [True, False]}
    values["mode"] = ["eager"]
    combos, wanted = epilogue.possible_targets(values, _everything)
    assert len(combos) == 96 and {epilogue.kind_of(t) for t in wanted} == {"3-way"}
    rows = epilogue.added_rows(values, [], _everything, lambda want, index: dict(want))
    assert len(rows) == 4 * 4 * 3  # the bound: every (scale_a, scale_b, out_dtype) once
    assert epilogue.covered(wanted, rows) == wanted


def test_a_compiled_mode_adds_every_whole_epilogue_and_rows_cover_all():
    values = {"scale_a": FORMS[:2], "scale_b": FORMS[:2], "mode": ["eager", "inductor"], "bias": [True, False]}
    values["out_dtype"] = ["bf16", "fp16"]
    _, wanted = epilogue.possible_targets(values, _everything)
    whole = {t for t in wanted if epilogue.kind_of(t) == "compiled"}
    assert len(whole) == 2 * 2 * 2 * 2 and all("mode=" not in t for t in whole)
    rows = epilogue.added_rows(values, [], _everything, lambda want, index: dict(want))
    assert epilogue.covered(wanted, rows) == wanted
    # An eager case covers no whole epilogue; the same values compiled do.
    case = {"scale_a": "tensor_0d", "scale_b": "tensor_1d", "bias": True, "out_dtype": "fp16", "mode": "eager"}
    assert not epilogue.covered(whole, [case])
    assert len(epilogue.covered(whole, [{**case, "mode": "aot_eager"}])) == 1


def test_a_rule_the_model_has_keeps_its_combinations_out():
    values = {"scale_a": FORMS[:2], "scale_b": FORMS[:2], "mode": ["inductor"], "bias": [True, False]}
    values["out_dtype"] = ["bf16", "fp32"]

    def no_bias_with_fp32(row):
        return not (row.get("bias") and row.get("out_dtype") == "fp32")

    _, wanted = epilogue.possible_targets(values, no_bias_with_fp32)
    assert not [t for t in wanted if "bias=True" in t and "out_dtype=fp32" in t]


def test_targets_of_several_widths_are_each_judged_on_their_own_axes():
    # A composite profile: one part varies scale forms and bias, another also the output dtype.
    narrow = epilogue.targets({"scale_a": "a", "scale_b": "b", "bias": True, "mode": "inductor"}, ["scale_a", "bias"])
    wide_axes = ["scale_a", "scale_b", "bias", "out_dtype"]
    wide = epilogue.targets({"scale_a": "a", "scale_b": "b", "bias": True, "out_dtype": "fp16", "mode": "x"}, wide_axes)
    case = {"scale_a": "a", "scale_b": "b", "bias": True, "out_dtype": "fp16", "mode": "inductor"}
    assert epilogue.covered(narrow | wide, [case]) == narrow | wide


def test_garbage_stored_targets_are_passed_over_without_a_traceback():
    stored = [[], ["3-way", 5], 7, None, "3-way|scale_a", "nonsense|a=b", "3-way|scale_a=tensor_0d|bias=True"]
    case = {"scale_a": "tensor_0d", "bias": True, "mode": "eager"}
    assert epilogue.covered(stored, [case]) == {"3-way|scale_a=tensor_0d|bias=True"}
    record = {"id": "k.a", "outcome": "PASS", "params": {**case, "kernel": "k", "purpose": "valid"}}
    record["errors"] = {"eager": None, "compiled": None}
    block = coverage_block([record], {"k": {"epilogue": stored}, "j": {"epilogue": "not a list"}}, "cpu")
    assert block["pairwise"]["epilogue 3-way"]["possible"] == 1
