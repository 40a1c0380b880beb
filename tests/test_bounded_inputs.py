"""Matrix and corpus files are read within bounds: size, alias expansion, nesting depth, tensor
elements per operand and per case, a finite positive tolerance. Each violation is one error line
naming the file and the key: exit 4 through pytest, exit 2 through the `scaledmm` command."""

import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest
from reports_factory import DATA, case, report, write

from pytest_scaledmm.cli import main
from pytest_scaledmm.errors import ScaledmmError
from pytest_scaledmm.matrix import bounded_yaml
from pytest_scaledmm.matrix.spec import MatrixError, load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent

SMALL = """\
version: 1
kernels: [aten_scaled_mm]
axes:
  mode: [eager]
  m: [4]
  k: [32]
  n: [16]
profiles:
  default: {cases: 1}
"""


def billion_laughs(levels: int = 10) -> str:
    """Ten aliases per level: 10**levels strings once expanded."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines)


def bomb_matrix() -> str:
    # The bomb sits in an axis: invalid there, so the schema error message would print it whole.
    return billion_laughs() + "\n" + SMALL.replace("  m: [4]", "  m: *a9")


DEEP = SMALL.replace("  m: [4]", "  m: " + "[" * 5000 + "1" + "]" * 5000)


def _one_error_line(result, *expected):
    err = [line for line in result.stderr.lines if line.strip()]
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    assert len(err) == 1, err
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    for text in expected:
        assert text in err[0], err[0]
    return err[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        (bomb_matrix(), "past 250000 nodes"),
        (DEEP, "nested deeper than 100 levels"),
        (SMALL.replace("  m: [4]", "  m: &a [*a]"), "refers to a node that contains it"),
        ("seed: " + "9" * 5000 + "\n" + SMALL, "not valid YAML"),
        (SMALL + "# " + "x" * (1 << 20) + "\n", "larger than 1048576 bytes"),
    ],
    ids=["billion-laughs", "5000-deep", "recursive-alias", "huge-integer", "over-1MiB"],
)
def test_unbounded_yaml_is_one_usage_error_exit_4(matrix_project, text, expected):
    path = matrix_project.write_matrix(text)
    started = time.perf_counter()
    result = matrix_project.run("--scaledmm-matrix", str(path), "--scaledmm-isolate=no", "--no-scaledmm-triage")
    line = _one_error_line(result, str(path), expected)
    assert time.perf_counter() - started < 10, line


@pytest.mark.parametrize(
    "what, text, expected", [("billion laughs", bomb_matrix(), "alias bomb"), ("5000-deep", DEEP, "nested deeper")]
)
def test_refusal_costs_little_time_and_memory(tmp_path, what, text, expected):
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(MatrixError) as caught:
        load_spec(path)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"{what} refused in {elapsed * 1000:.1f} ms, peak {peak / 1024:.0f} KiB traced")
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    assert elapsed < 1.0
    assert peak < 16 * 1024 * 1024


def test_brackets_in_quotes_and_comments_are_not_nesting():
    deep = "[" * 150
    text = f"a: '{deep}'  # {deep}\nb: \"{deep}\\\"\"\nc: don't [x]\nd: [1, {{e: [2]}}]\n"
    assert bounded_yaml.load("x.yaml", text) == {"a": deep, "b": deep + '"', "c": "don't [x]", "d": [1, {"e": [2]}]}


def test_a_bomb_in_an_included_corpus_names_the_corpus(tmp_path):
    (tmp_path / "corpus.yaml").write_text(billion_laughs() + "\nversion: 1\ncases: *a9\n")
    (tmp_path / "matrix.yaml").write_text(SMALL + "include: [corpus.yaml]\n")
    with pytest.raises(MatrixError) as caught:
        load_spec(tmp_path / "matrix.yaml")
    assert str(caught.value).startswith(str(tmp_path / "corpus.yaml")) and "alias bomb" in str(caught.value)


def test_anchors_within_bounds_still_work(tmp_path):
    text = SMALL.replace(
        "profiles:\n  default: {cases: 1}",
        "profiles:\n  default: {cases: 1, axes: &ax {mode: [eager]}}\n  other: {cases: 2, axes: *ax}",
    )
    spec = parse_spec(tmp_path / "m.yaml", text)
    assert spec.profiles["other"].axes == {"mode": ["eager"]}


@pytest.mark.parametrize(
    "path", [ROOT / "matrix.yaml", *sorted((ROOT / "matrices").glob("*.yaml"))], ids=lambda p: p.name
)
def test_the_shipped_matrices_fit_the_default_limits(path):
    load_spec(path)


def test_cli_gives_exit_2_and_one_line_for_an_alias_bomb(tmp_path, capsys):
    matrix = tmp_path / "bomb.yaml"
    matrix.write_text(bomb_matrix())
    rep = write(tmp_path / "r.json", report([case("a", "MISMATCH", "x")]))
    assert main(["repro", str(rep), "--out", str(tmp_path / "out"), "--matrix", str(matrix)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(matrix) in err and "alias bomb" in err and "Traceback" not in err


def test_cli_gate_gives_exit_2_for_a_deep_matrix(tmp_path, capsys):
    matrix = tmp_path / "deep.yaml"
    matrix.write_text(DEEP)
    base = DATA / "gate" / "baseline-torch211.json"
    assert main(["gate", "--baseline", str(base), "--candidate", str(base), "--matrix", str(matrix)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(matrix) in err and "nested deeper than 100 levels" in err


# -- shapes ----------------------------------------------------------------------------------


def test_a_65536_cube_is_refused_at_load_naming_the_key(matrix_project):
    path = matrix_project.write_matrix(
        SMALL.replace("  m: [4]\n  k: [32]\n  n: [16]", "  m: [4, 65536]\n  k: [32, 65536]\n  n: [65536]")
    )
    result = matrix_project.run("--scaledmm-matrix", str(path), "--scaledmm-isolate=no", "--no-scaledmm-triage")
    _one_error_line(result, str(path), "key 'axes.", "limits.max_operand_elements", "4294967296")


@pytest.mark.parametrize(
    "axes, profile_axes, key, limit",
    [
        ("  m: {min: 1, max: 65536}\n  k: [4096]\n  n: [16]", "", "axes.m", "max_operand_elements"),
        (
            "  m: [16]\n  k: [32]\n  n: [16]",
            ", axes: {m: [16384], n: [8192]}",
            "profiles.default.axes.m",
            "max_operand_elements",
        ),
        # each operand fits (2**26), their sum does not (3 * 2**26 > 2**27)
        ("  m: [8192]\n  k: [8192]\n  n: [8192]", "", "axes.m", "max_case_elements"),
    ],
    ids=["range-max", "profile-axes", "case-sum"],
)
def test_shape_limits_cover_ranges_profiles_and_the_case_sum(tmp_path, axes, profile_axes, key, limit):
    text = SMALL.replace("  m: [4]\n  k: [32]\n  n: [16]", axes).replace("{cases: 1}", "{cases: 1" + profile_axes + "}")
    with pytest.raises(MatrixError) as caught:
        parse_spec(tmp_path / "m.yaml", text)
    assert caught.value.key == key and f"limits.{limit}" in caught.value.message, str(caught.value)


def test_limits_key_raises_the_cap(tmp_path):
    text = SMALL.replace("  m: [4]\n  k: [32]\n  n: [16]", "  m: [8192]\n  k: [8192]\n  n: [8192]")
    spec = parse_spec(tmp_path / "m.yaml", text + "limits: {max_case_elements: 268435456}\n")
    assert spec.limits == {"max_operand_elements": 2**26, "max_case_elements": 2**28}


@pytest.mark.parametrize(
    "limits, key",
    [
        ("{max_operand_elements: 0}", "limits.max_operand_elements"),
        ("{max_elements: 5}", "limits"),
        ("{max_case_elements: 1.5}", "limits.max_case_elements"),
    ],
)
def test_bad_limits_name_the_key(tmp_path, limits, key):
    with pytest.raises(MatrixError) as caught:
        parse_spec(tmp_path / "m.yaml", SMALL + f"limits: {limits}\n")
    assert caught.value.key == key, str(caught.value)


def test_an_oversized_included_case_names_the_corpus_entry(tmp_path):
    (tmp_path / "corpus.yaml").write_text(
        textwrap.dedent("""\
        version: 1
        cases:
          - params: {kernel: aten_scaled_mm, m: 16, k: 32, n: 16}
          - params: {kernel: aten_scaled_mm, m: 65536, k: 65536, n: 16}
        """)
    )
    (tmp_path / "matrix.yaml").write_text(SMALL + "include: [corpus.yaml]\n")
    with pytest.raises(MatrixError) as caught:
        load_spec(tmp_path / "matrix.yaml")
    assert caught.value.path == str(tmp_path / "corpus.yaml") and caught.value.key == "cases[1].params"
    assert "limits.max_operand_elements" in caught.value.message


def test_a_float_dimension_is_refused(tmp_path):
    with pytest.raises(MatrixError) as caught:
        parse_spec(tmp_path / "m.yaml", SMALL.replace("  m: [4]", "  m: [4.0]"))
    assert caught.value.key == "axes.m[0]", str(caught.value)


# -- tolerance -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf", "0", "-1"])
def test_slack_must_be_finite_and_positive(tmp_path, value):
    with pytest.raises(MatrixError) as caught:
        parse_spec(tmp_path / "m.yaml", SMALL + f"tolerance: {{slack: {value}}}\n")
    assert caught.value.key == "tolerance.slack", str(caught.value)


def test_infinite_slack_is_exit_4_through_pytest(matrix_project):
    path = matrix_project.write_matrix(SMALL + "tolerance: {slack: .inf}\n")
    result = matrix_project.run("--scaledmm-matrix", str(path), "--scaledmm-isolate=no", "--no-scaledmm-triage")
    _one_error_line(result, str(path), "tolerance.slack")


def test_a_matrix_error_is_a_scaledmm_error(tmp_path):
    path = tmp_path / "matrix.yaml"
    path.write_text(SMALL.replace("cases: 1", "cases: 0"))
    with pytest.raises(ScaledmmError) as caught:
        load_spec(path)
    assert isinstance(caught.value, MatrixError)
    assert str(caught.value).startswith(f"{path}: key 'profiles.default.cases': ")
    assert (caught.value.path, caught.value.key) == (str(path), "profiles.default.cases")
