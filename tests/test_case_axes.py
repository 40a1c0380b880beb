"""Each case axis's neutral value is declared once (verdict/case_axes.py): the schema's tables are
built from it, and no reader of a case repeats it as a default of its own."""

import ast
from pathlib import Path

from pytest_scaledmm.matrix.schema import AXIS_DEFAULTS, KERNEL_AXES
from pytest_scaledmm.verdict.case_axes import NEUTRAL, axis_value

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_scaledmm"


def test_the_schemas_neutral_values_are_the_declared_ones():
    for axis, (values, neutral, _) in KERNEL_AXES.items():
        if axis in NEUTRAL:
            assert neutral == NEUTRAL[axis] and neutral in values, axis
    for axis, defaults in AXIS_DEFAULTS.items():
        if axis in NEUTRAL:
            assert defaults == [NEUTRAL[axis]], axis


def test_a_left_out_axis_reads_as_its_neutral_value_and_a_given_one_as_given():
    assert axis_value({}, "special_scale") == "none"
    assert axis_value({"special_scale": "nan"}, "special_scale") == "nan"
    assert axis_value({"activation_rank": 3}, "activation_rank") == 3


def _repeated_defaults(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in NEUTRAL
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("params", "case", "p", "record", "row")
        ):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_case_reader_repeats_a_neutral_value():
    files = [*PACKAGE.glob("verdict/*.py"), *PACKAGE.glob("matrix/*.py"), *PACKAGE.glob("execution/*.py")]
    found = [hit for path in files for hit in _repeated_defaults(path)]
    assert found == []
