"""Each support field of a kernel declaration is declared once (verdict/support_fields.py); the
places that cannot derive from the table name the same fields, so that a field added to one of
them and forgotten in another fails here."""

from dataclasses import fields

import pytest

from pytest_scaledmm.matrix.kernels import Kernel
from pytest_scaledmm.matrix.schema import KERNEL_DECLARATION_SCHEMA, MATRIX_SCHEMA
from pytest_scaledmm.matrix.spec import KernelSpec, kernel_from_declaration
from pytest_scaledmm.verdict.refusals import Support
from pytest_scaledmm.verdict.support_fields import JUDGED_FIELDS, SUPPORT_FIELD_NAMES, SUPPORT_FIELDS

# What each place holds besides the support fields: the kernel's identity and its callables.
KERNEL_OWN = {"name", "fn", "prepare", "module"}
KERNEL_SPEC_OWN = {"name", "impl", "fn", "prepare", "module"}
MATRIX_ENTRY_OWN = KERNEL_SPEC_OWN | {"requires"}  # requires: what `scaledmm init` installs
SUPPORT_OWN = {"name", "builtin"}


def _names(cls) -> set:
    return {f.name for f in fields(cls)}


def test_the_table_names_each_field_once():
    assert len(set(SUPPORT_FIELD_NAMES)) == len(SUPPORT_FIELD_NAMES)


def test_kernel_declares_the_table_s_fields():
    assert _names(Kernel) - KERNEL_OWN == set(SUPPORT_FIELD_NAMES)


def test_kernel_spec_declares_the_table_s_fields():
    assert _names(KernelSpec) - KERNEL_SPEC_OWN == set(SUPPORT_FIELD_NAMES)


def test_support_holds_the_judged_fields():
    assert _names(Support) - SUPPORT_OWN == set(JUDGED_FIELDS)


def test_the_schema_takes_the_table_s_fields():
    entry = MATRIX_SCHEMA["properties"]["kernels"]["items"]["oneOf"][1]["properties"]
    assert set(entry) - MATRIX_ENTRY_OWN == set(SUPPORT_FIELD_NAMES)
    assert set(KERNEL_DECLARATION_SCHEMA["properties"]) - KERNEL_OWN == set(SUPPORT_FIELD_NAMES)
    for row in SUPPORT_FIELDS:
        assert entry[row.name] is row.schema


def test_defaults_agree():
    for row in SUPPORT_FIELDS:
        kernel_default = next(f.default for f in fields(Kernel) if f.name == row.name)
        assert kernel_default == row.default, row.name
        if row.judged:
            assert next(f.default for f in fields(Support) if f.name == row.name) is None, row.name


# One value of each field a declaration may give, and how a KernelSpec keeps it.
EXAMPLES = {
    "family": ("fp8", "fp8"),
    "scale_forms": (["tensor_0d", "rowwise"], ("tensor_0d", "rowwise")),
    "dtypes": (["e4m3fn"], ("e4m3fn",)),
    "archs": (["sm90"], ("sm90",)),
    "min_torch": ("2.4", "2.4"),
    "scale_pairs": ([("rowwise", "rowwise")], (("rowwise", "rowwise"),)),
    "dtype_pairs": ([["e4m3fn", "e4m3fn"]], (("e4m3fn", "e4m3fn"),)),
    "out_dtypes": (["bf16"], ("bf16",)),
    "bias_out_dtypes": ([], ()),
    "accumulation": ("fp32", "fp32"),
    "min_m": (2, 2),
    "max_m": (4096, 4096),
    "m_multiple": (2, 2),
    "k_multiple": (16, 16),
    "n_multiple": (16, 16),
    "activation": ("dynamic", "dynamic"),
    "scale_layouts": (["contiguous"], ("contiguous",)),
    "operand_layouts": (["dense"], ("dense",)),
    "scale_dtypes": (["fp32"], ("fp32",)),
    "output_layout": ("column-major", "column-major"),
    "deterministic": (False, False),
    "activation_divisor": (448.0, 448.0),
    "slack": (2.0, 2.0),
    "slack_reason": ("a reason", "a reason"),
    "pair_rules": (
        [{"scale_pair": ["rowwise", "rowwise"], "out_dtypes": ["bf16"]}],
        ((("rowwise", "rowwise"), ("bf16",), None),),
    ),
}


def test_every_field_is_parsed_from_a_declaration():
    assert set(EXAMPLES) == set(SUPPORT_FIELD_NAMES)
    entry = {"name": "mine", **{name: given for name, (given, _) in EXAMPLES.items()}}
    kernel = kernel_from_declaration("a hook", 0, entry, fn=lambda a, b, scale_a, scale_b, bias, out_dtype: a)
    for name, (_, kept) in EXAMPLES.items():
        assert getattr(kernel, name) == kept, name


@pytest.mark.parametrize("name", JUDGED_FIELDS)
def test_support_reads_every_judged_field(name):
    kernel = kernel_from_declaration(
        "a hook", 0, {"name": "mine", name: EXAMPLES[name][0]}, fn=lambda a, b, scale_a, scale_b, bias, out_dtype: a
    )
    assert getattr(Support.of(kernel), name) == EXAMPLES[name][1]
