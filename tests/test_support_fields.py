"""Each support field of a kernel declaration is declared once (verdict/support_fields.py
`Declared`): Kernel, KernelSpec and Support extend it, and the schema takes its rows' fragments, so
that a field added there is in every place, and a place that names fields of its own fails here."""

import inspect
from dataclasses import fields

import pytest

from pytest_scaledmm.matrix.kernels import Kernel
from pytest_scaledmm.matrix.schema import KERNEL_DECLARATION_SCHEMA, MATRIX_SCHEMA
from pytest_scaledmm.matrix.spec import KernelSpec, kernel_from_declaration
from pytest_scaledmm.verdict.refusals import Support
from pytest_scaledmm.verdict.support_fields import JUDGED_FIELDS, SUPPORT_FIELD_NAMES, SUPPORT_FIELDS, Declared

# What each place holds besides the declaration: the kernel's identity and its callables.
KERNEL_OWN = {"name", "fn", "prepare", "module"}
KERNEL_SPEC_OWN = {"name", "impl", "fn", "prepare", "module"}
MATRIX_ENTRY_OWN = KERNEL_SPEC_OWN | {"requires"}  # requires: what `scaledmm init` installs
SUPPORT_OWN = {"name", "builtin"}


def _names(cls) -> set:
    return {f.name for f in fields(cls)}


def test_the_rows_are_the_declaration_s_fields_in_order():
    assert SUPPORT_FIELD_NAMES == tuple(f.name for f in fields(Declared))
    assert [row.default for row in SUPPORT_FIELDS] == [f.default for f in fields(Declared)]


@pytest.mark.parametrize(("cls", "own"), [(Kernel, KERNEL_OWN), (KernelSpec, KERNEL_SPEC_OWN), (Support, SUPPORT_OWN)])
def test_each_place_extends_the_declaration_with_only_its_own_fields(cls, own):
    assert issubclass(cls, Declared)
    assert _names(cls) - own == set(SUPPORT_FIELD_NAMES)


@pytest.mark.parametrize("cls", [Kernel, KernelSpec, Support])
def test_declarations_are_keywords_and_the_identity_positional(cls):
    kinds = {name: p.kind for name, p in inspect.signature(cls).parameters.items()}
    assert {kinds[name] for name in SUPPORT_FIELD_NAMES} == {inspect.Parameter.KEYWORD_ONLY}
    assert kinds["name"] is inspect.Parameter.POSITIONAL_OR_KEYWORD
    kernel = Kernel("mine", print, min_m=2)
    assert (kernel.name, kernel.fn, kernel.min_m) == ("mine", print, 2)


def test_the_schema_takes_the_rows_fragments():
    entry = MATRIX_SCHEMA["properties"]["kernels"]["items"]["oneOf"][1]["properties"]
    assert set(entry) - MATRIX_ENTRY_OWN == set(SUPPORT_FIELD_NAMES)
    assert set(KERNEL_DECLARATION_SCHEMA["properties"]) - KERNEL_OWN == set(SUPPORT_FIELD_NAMES)
    for row in SUPPORT_FIELDS:
        assert entry[row.name] is row.schema


def test_support_carries_the_judged_fields_to_a_repro():
    support = Support("mine", False, min_m=2, slack=2.0)
    assert set(support.to_json()) == SUPPORT_OWN | set(JUDGED_FIELDS)
    assert Support(**support.to_json()).min_m == 2


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
