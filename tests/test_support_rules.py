"""The built-ins' op models (matrix/support.py FIRST_RULES, RECIPE_RULES) and kernels'
declarations (verdict/refusals.py DECLARED_RULES) are tables of rules: every field is read by a
row and every row names a real field; each op rule fires for some built-in model on some case;
the folds give each key in the rows' order."""

import dataclasses
import itertools

from case_factory import case_params, case_record

from pytest_scaledmm.matrix import support
from pytest_scaledmm.verdict.scale_forms import FORMS

ROWS = support.FIRST_RULES + support.RECIPE_RULES


def _cases():
    forms = [form.id for form in FORMS]
    extras = (
        {},
        {"dtype_a": "e5m2", "dtype_b": "e5m2", "bias": True, "out_dtype": "fp32", "use_fast_accum": True},
        {"scale_layout": "offset", "operand_layout": "b_row_major"},
        {"activation_rank": 3, "scale_layout": "noncontiguous", "operand_layout": "scale_on_host"},
        {"out_dtype": "e4m3fn", "bias": True, "bias_dtype": "fp32"},
    )
    for sa, sb in itertools.product(forms, forms):
        for m, k, n in ((1, 32, 16), (17, 128, 256), (6, 320, 384), (4, 20, 40), (256, 256, 128)):
            for extra in extras:
                yield case_params(scale_a=sa, scale_b=sb, m=m, k=k, n=n, **extra)


def test_every_op_model_field_is_read_by_a_rule_and_every_rule_by_a_field():
    fields = {f.name for f in dataclasses.fields(support.OpModel)} - {"source"}
    read = {name for row in ROWS for name in row.fields} | set(support.MICROSCALING_FIELDS)
    assert fields - read == set(), "an OpModel field no rule reads"
    assert read - fields == set(), "a rule names a field OpModel has not"
    assert all(callable(row.check) for row in ROWS)


def test_every_rule_fires_for_some_builtin_model():
    silent = set(range(len(ROWS)))
    for model in support.BUILTIN_MODELS.values():
        for params in _cases():
            case = case_record(**params)
            recipe = support._chosen(model, case)
            silent -= {i for i in silent if ROWS[i].check(model, case, recipe)}
        if not silent:
            break
    assert [ROWS[i].fields for i in sorted(silent)] == []


def test_the_fold_keeps_the_rows_order_and_each_key_once():
    model = support.OpModel(
        "test", e5m2_pair=True, size_limits=(("k_multiple", 16, "k_alignment"), ("n_multiple", 16, "k_alignment"))
    )
    params = case_record(scale_a="tensor_0d", scale_b="tensor_0d", m=4, k=20, n=40, dtype_a="e5m2", dtype_b="e5m2")
    assert support._op_breaks(model, params) == ["e5m2_pair", "k_alignment"]
    assert support._op_breaks(dataclasses.replace(model, no_backend=True), params)[0] == "backend"


def test_every_declaration_has_a_rule_and_every_rule_a_declaration():
    from pytest_scaledmm.verdict.refusals import DECLARED_RULES  # noqa: PLC0415
    from pytest_scaledmm.verdict.support_fields import JUDGED_FIELDS  # noqa: PLC0415

    rows = [rule.field for rule in DECLARED_RULES]
    assert sorted(rows) == sorted(JUDGED_FIELDS), "a judged declaration without its rule, or a rule without one"
    assert all(callable(rule.check) for rule in DECLARED_RULES)


def test_each_declared_rule_names_what_breaks_it():
    from pytest_scaledmm.verdict.refusals import Support, declared_breaks  # noqa: PLC0415

    kernel = Support("mine", False, scale_forms=("rowwise",), min_m=17, k_multiple=16)
    params = case_record(scale_a="tensor_0d", scale_b="rowwise", m=4, k=20, n=16)
    assert declared_breaks(kernel, params) == [
        ("scale_forms", "scale_a tensor_0d is not in its scale_forms ['rowwise']"),
        ("min_m", "M = 4 is outside its min_m: 17"),
        ("k_multiple", "K = 20 is outside its k_multiple: 16"),
    ]


def test_a_fact_both_tables_judge_is_judged_alike():
    """A size limit or the out dtypes a bias is taken with, as a kernel declares it and as a
    built-in's op model holds it: the same cases lie outside both."""
    from pytest_scaledmm.verdict.refusals import SIZE_LIMITS, Support, declared_breaks  # noqa: PLC0415

    for params in _cases():
        case = case_record(**params)
        if support._microscaling_break(support.OpModel("test"), case, "cpu") is not None:
            continue  # the op model refuses microscaled scales before its recipe rules
        for allowed in ((), ("bf16",), ("bf16", "fp16", "fp32")):
            declared = bool(declared_breaks(Support("mine", False, bias_out_dtypes=allowed), case))
            measured = "bias_dtype" in support._op_breaks(support.OpModel("test", bias_out_dtypes=allowed), case)
            assert declared == measured == (case.bias and case.out_dtype not in allowed), (allowed, params)
        for limit in SIZE_LIMITS:
            declared = bool(declared_breaks(Support("mine", False, **{limit.field: 16}), case))
            model = support.OpModel("test", size_limits=((limit.field, 16, "k_alignment"),))
            assert declared == ("k_alignment" in support._op_breaks(model, case)), (limit.field, params)
