"""The matrix's exclude rules and included corpus entries as generation applies them: a rule
naming `arch` holds only where cases are made for that arch; an excluded corpus entry is left out
before anything reads it, and any entry the corpus schema accepts gets an id."""

from pathlib import Path

import yaml

from pytest_scaledmm.matrix.cases import generate_cases
from pytest_scaledmm.matrix.spec import load_spec

AXES = {
    "scale_a": ["tensor_0d"],
    "scale_b": ["tensor_0d"],
    "mode": ["eager", "aot_eager"],
    "m": [16],
    "k": [32],
    "n": [16],
}


def _spec(tmp_path: Path, **top):
    matrix = {"version": 1, "kernels": ["aten_scaled_mm"], "axes": AXES, "profiles": {"default": {"cases": 6}}}
    matrix["limits"] = {"max_operand_elements": 2**19}
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump({**matrix, **top}))
    return load_spec(path)


def _modes(spec, arch: str) -> set:
    cases, _ = generate_cases(spec, spec.profiles["default"], arch)
    assert cases
    return {case.params.mode for case in cases}


def test_an_exclude_rule_naming_an_arch_holds_on_that_arch_only(tmp_path):
    spec = _spec(tmp_path, exclude=[{"arch": ["sm90", "sm100"], "mode": "aot_eager"}])
    assert _modes(spec, "cpu") == {"eager", "aot_eager"}
    assert _modes(spec, "sm90") == _modes(spec, "sm100") == {"eager"}
    everything_on_sm90 = _spec(tmp_path, exclude=[{"arch": "sm90"}])
    assert generate_cases(everything_on_sm90, everything_on_sm90.profiles["default"], "sm90")[0] == []
    assert _modes(everything_on_sm90, "cpu") == {"eager", "aot_eager"}


def test_corpus_entries_are_excluded_before_they_are_read_and_each_gets_an_id(tmp_path):
    mixed = {"kernel": "aten_scaled_mm", "dtype_a": "e4m3fn", "dtype_b": "int8", "m": 8, "k": 32, "n": 16}
    excluded = {**mixed, "m": 24}
    corpus = tmp_path / "corpus.yaml"
    corpus.write_text(yaml.safe_dump({"version": 1, "cases": [{"params": mixed}, {"params": excluded}]}))
    spec = _spec(tmp_path, include=["corpus.yaml"], exclude=[{"m": 24}])
    cases, notes = generate_cases(spec, spec.profiles["default"], "cpu")
    included = [case for case in cases if case.params.dtype_b == "int8"]
    assert [case.params.m for case in included] == [8] and notes["included"] == 1
    assert included[0].id.startswith("fp8e4m3xi8-")
