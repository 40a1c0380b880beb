"""Coverage that counts: valid configurations first, a boundary slice on purpose (each refusal
reason under each compile-mode family), shape classes in the covering array, ids that do not
depend on the torch version, hash seed, loaded modules or xdist, model mismatches and the
coverage block of a run (only cases checked against the reference count)."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from case_factory import case_record, failing_call

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.matrix import epilogue
from pytest_scaledmm.matrix.cases import (
    BOUNDARY_MAX_PERCENT,
    SPECIAL_SHARE_PERCENT,
    VALID_SHARE_PERCENT,
    generate_cases,
)
from pytest_scaledmm.matrix.shapes import class_of
from pytest_scaledmm.matrix.spec import load_spec, parse_spec
from pytest_scaledmm.matrix.support import FAMILIES, mode_family, support_model
from pytest_scaledmm.verdict import outcome as oc

REPO = Path(__file__).resolve().parents[1]

# Axes small enough to read, wide enough for every refusal reason of the built-ins' models.
SMALL_AXES = {
    "scale_a": ["tensor_0d", "tensor_1d", "rowwise", "blockwise"],
    "scale_b": ["tensor_0d", "rowwise", "blockwise"],
    "dtype_a": ["e4m3fn", "e5m2"],
    "dtype_b": ["e4m3fn", "e5m2"],
    "out_dtype": ["bf16", "fp32"],
    "bias": [False, True],
    "use_fast_accum": [False, True],
    "mode": [
        "eager",
        "aot_eager",
        "inductor",
        "max-autotune-no-cudagraphs",
        "reduce-overhead",
        "dynamic",
        "triton-gemm",
    ],
    "scale_layout": ["contiguous", "offset", "noncontiguous"],
    "m": [1, 16, 33, 256],
    "k": [20, 24, 64, 128, 256],
    "n": [40, 64, 128],
}
# The refusal reasons each kernel's model gives within SMALL_AXES (`declared` is a user kernel).
SMALL_REASONS = {
    "cpu": {
        "aten_scaled_mm": {"scale_pair", "rowwise_layout"},
        "int8_w8a8": set(),
        "declared": {"scale_pairs", "k_multiple", "min_m", "bias_out_dtypes"},
    },
    "sm90": {
        "aten_scaled_mm": {
            "scale_pair",
            "k_alignment",
            "n_alignment",
            "e5m2_pair",
            "bias_dtype",
            "blockwise_fast_accum",
            "library_status",
        },
        "int8_w8a8": {"int8_min_m", "int8_alignment"},
        "declared": {"scale_pairs", "k_multiple", "min_m", "bias_out_dtypes"},
    },
}
DECLARED = planted(
    "declared",
    "correct",
    k_multiple=16,
    min_m=2,
    bias_out_dtypes=["bf16"],
    scale_pairs=[["tensor_0d", "tensor_0d"], ["rowwise", "rowwise"], ["tensor_1d", "rowwise"]],
    scale_forms=["tensor_0d", "tensor_1d", "rowwise"],
)


def small_spec(cases=440):
    text = matrix_text(["aten_scaled_mm", "int8_w8a8", DECLARED], SMALL_AXES, cases=cases)
    return parse_spec(Path("matrix.yaml"), text)


def check_shares(cases, notes, budget, reasons, modes):
    """Valid >= 80 % (65 % beside a special slice of at least 15 %), boundary <= 20 %, every
    (kernel, reason) under every mode family, each boundary case breaking exactly its reason and
    each valid case none."""
    purposes = Counter(c.params.purpose for c in cases)
    # The budget, then the extreme shapes and guaranteed values past it.
    assert len(cases) == budget + notes["extreme"] + notes["guaranteed"]
    if purposes["special"]:
        assert purposes["special"] * 100 >= SPECIAL_SHARE_PERCENT * budget, purposes
        assert purposes["valid"] * 100 >= (100 - BOUNDARY_MAX_PERCENT - SPECIAL_SHARE_PERCENT) * budget, purposes
    else:
        assert purposes["valid"] * 100 >= VALID_SHARE_PERCENT * budget, purposes
    assert purposes["boundary"] * 100 <= BOUNDARY_MAX_PERCENT * budget, purposes
    families = {mode_family(m) for m in modes}
    seen = {
        (c.params.kernel, c.params.expected_refusal, mode_family(c.params.mode))
        for c in cases
        if c.params.purpose == "boundary"
    }
    wanted = {(kernel, key, family) for kernel, keys in reasons.items() for key in keys for family in families}
    assert wanted and seen == wanted, (wanted - seen, seen - wanted)
    return purposes


@pytest.mark.parametrize("arch", ["cpu", "sm90"])
def test_small_matrix_gives_valid_cases_first_and_each_refusal_under_each_family(arch):
    spec = small_spec()
    cases, notes = generate_cases(spec, spec.profile("default"), arch)
    modes = [m for m in SMALL_AXES["mode"] if arch != "cpu" or m != "triton-gemm"]
    check_shares(cases, notes, 440, SMALL_REASONS[arch], modes)
    assert set(notes["families"]) == set(FAMILIES)
    models = {k.name: support_model(k, arch) for k in spec.kernels}
    for case in cases:
        broken = models[case.params.kernel].breaks(case.params)
        assert broken == ([case.params.expected_refusal] if case.params.purpose == "boundary" else []), (
            case.id,
            broken,
        )
    # The CPU runs no GPU-only mode; the GPU runs them all.
    assert ("triton-gemm" in {c.params.mode for c in cases}) == (arch != "cpu")


@pytest.mark.parametrize(
    "arch, reasons",
    [
        ("cpu", {"aten_scaled_mm": {"scale_pair", "rowwise_layout"}, "int8_w8a8": set()}),
        (
            "sm90",
            {
                "aten_scaled_mm": SMALL_REASONS["sm90"]["aten_scaled_mm"] | {"operand_layout", "scale_device"},
                "int8_w8a8": {"int8_min_m", "int8_alignment", "scale_device"},
            },
        ),
    ],
)
def test_shipped_default_profile_shares_and_boundary(arch, reasons):
    spec = load_spec(REPO / "matrix.yaml")
    profile = spec.profile("default")
    cases, notes = generate_cases(spec, profile, arch)
    modes = [m for m in spec.axes_for(profile)["mode"] if arch != "cpu" or m != "triton-gemm"]
    check_shares(cases, notes, profile.cases, reasons, modes)
    # Special values on both sides, for each kernel.
    sides = {(c.params.kernel, c.params.special_side) for c in cases if c.params.purpose == "special"}
    assert sides == {(kernel, side) for kernel in reasons for side in "ab"}, sides
    assert notes["boundary_reasons"] == {kernel: sorted(keys) for kernel, keys in reasons.items()}


def test_every_scale_form_meets_every_shape_class_in_the_default_profile_on_sm90():
    spec = load_spec(REPO / "matrix.yaml")
    cases, notes = generate_cases(spec, spec.profile("default"), "sm90")
    valid = [c for c in cases if c.params.purpose == "valid"]
    met = {
        (c.params.kernel, side, c.params.value_of(f"scale_{side}"), class_of(dim, c.params.value_of(dim)))
        for c in valid
        for side in "ab"
        for dim in "mkn"
        if c.params.value_of(dim)
    }
    for kernel, possible in notes["possible"].items():
        wanted = {(kernel, *item) for item in map(tuple, possible["form_class"])}
        assert wanted and wanted <= met, sorted(wanted - met)[:5]
    # Every form of torch._scaled_mm meets every class: blockwise at M = 64 in 17-127, K = 160 a tail.
    # The classes the default profile's sizes fill (empty dims are a slice of their own).
    classes = {class_of(dim, size) for dim in "mkn" for size in spec.axes_for(spec.profile("default"))[dim] if size}
    forms = set(spec.axes["scale_a"])
    # Beside them, only the classes of the token counts the server slice added.
    added = {class_of("m", size) for size in notes["m_added"]["aten_scaled_mm"]} - classes
    assert added == {"m2048+"}
    assert {(s, f, c) for _, s, f, c in met if _ == "aten_scaled_mm" and c not in added} == {
        (s, f, c) for s in "ab" for f in forms for c in classes
    }
    # int8 on a GPU refuses M <= 16: its scales meet those classes only in the boundary slice.
    assert not any(c.params.kernel == "int8_w8a8" and c.params.m <= 16 for c in valid)


def test_full_profile_meets_every_accepted_scale_pair_in_every_mode_with_special_slice():
    spec = load_spec(REPO / "matrix.yaml")
    profile = spec.profile("full")
    cases, notes = generate_cases(spec, profile, "sm90")
    purposes = Counter(c.params.purpose for c in cases)
    floor = 100 - BOUNDARY_MAX_PERCENT - SPECIAL_SHARE_PERCENT
    past_budget = notes["extreme"] + notes["guaranteed"]
    assert len(cases) == profile.cases + past_budget and purposes["valid"] * 100 >= floor * profile.cases
    valid = {
        (c.params.kernel, c.params.scale_a, c.params.scale_b, c.params.mode)
        for c in cases
        if c.params.purpose == "valid"
    }
    for kernel, possible in notes["possible"].items():
        assert {(kernel, *item) for item in map(tuple, possible["scale_pair_mode"])} <= valid
    # Special values on both sides: each value x side x scale form of that side at least once,
    # and every compile-mode family, per kernel, on configurations the model accepts.
    families = {mode_family(m) for m in spec.axes["mode"]}
    for kernel in ("aten_scaled_mm", "int8_w8a8"):
        special = [c for c in cases if c.params.kernel == kernel and c.params.purpose == "special"]
        met = {
            (c.params.special_scale, c.params.special_side, c.params.value_of(f"scale_{c.params.special_side}"))
            for c in special
        }
        for side in "ab":
            forms = {
                c.params.value_of(f"scale_{side}")
                for c in cases
                if c.params.kernel == kernel and c.params.purpose == "valid"
            }
            assert {(v, side, f) for v in ("zero", "negative", "inf", "nan") for f in forms} <= met, (kernel, side)
        assert {mode_family(c.params.mode) for c in special} == families


def _ids(arch):
    spec = load_spec(REPO / "matrix.yaml")
    return [c.id for c in generate_cases(spec, spec.profile("default"), arch)[0]]


@pytest.mark.parametrize("arch", ["cpu", "sm90"])
def test_ids_do_not_depend_on_the_torch_version(monkeypatch, arch):
    """The cross-version gate aligns cases by id: generation must not read torch's version (nor
    import torch at all)."""
    import torch

    before = _ids(arch)
    for version in ("2.3.1+cu121", "2.99.0.dev20990101"):
        monkeypatch.setattr(torch, "__version__", version)
        monkeypatch.setattr(torch.version, "__version__", version)
        assert _ids(arch) == before
    code = (
        "import sys, json; sys.modules['torch'] = None\n"
        "from pytest_scaledmm.matrix.spec import load_spec; from pytest_scaledmm.matrix.cases import generate_cases\n"
        f"s = load_spec({str(REPO / 'matrix.yaml')!r})\n"
        f"print(json.dumps([c.id for c in generate_cases(s, s.profile('default'), {arch!r})[0]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == before


def test_model_agrees_with_this_torch_on_the_cpu(cpu_fp8_mm):
    """The CPU model is measured behaviour: a sample of configurations run eagerly here is
    refused exactly where the model says (torch >= 2.8: earlier CPU builds have no fp8 kernel)."""
    import random

    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS
    from pytest_scaledmm.matrix.spec import BUILTIN_KERNELS, KernelSpec
    from pytest_scaledmm.verdict.draw import make_inputs
    from pytest_scaledmm.verdict.outcome import describe_exception
    from pytest_scaledmm.verdict.refusals import matching_refusal

    rng = random.Random(5)
    disagree = []
    for _ in range(300):
        name = rng.choice(["aten_scaled_mm", "scaled_mm_v2"])
        params = case_record(  # keyword arguments are evaluated in order: the same draws as ever
            kernel=name,
            scale_a=rng.choice(["tensor_0d", "tensor_1d", "tensor_1x1", "rowwise", "blockwise"]),
            scale_b=rng.choice(["tensor_0d", "tensor_1x1", "rowwise", "blockwise"]),
            dtype_b=rng.choice(["e4m3fn", "e5m2"]),
            out_dtype=rng.choice(["bf16", "fp32"]),
            bias=rng.random() < 0.3,
            scale_layout=rng.choice(["contiguous", "noncontiguous", "offset", "expanded"]),
            m=rng.choice([1, 7, 17, 64]),
            k=rng.choice([24, 64, 128, 160]),
            n=rng.choice([40, 64, 128]),
        )
        if (
            name == "scaled_mm_v2"
            and BUILTIN_IMPLS[name]
            and not hasattr(__import__("torch").nn.functional, "scaled_mm")
        ):
            continue
        spec = KernelSpec(name, family=BUILTIN_KERNELS[name]["family"])
        predicted = support_model(spec, "cpu").breaks(params)
        inputs = make_inputs(params, 1, "cpu")
        try:
            BUILTIN_IMPLS[name](
                inputs.a,
                inputs.b,
                inputs.scale_a,
                inputs.scale_b,
                bias=inputs.bias,
                out_dtype=inputs.out_dtype,
                use_fast_accum=False,
            )
            got = None
        except Exception as exc:
            refusal = matching_refusal(describe_exception(exc), name)
            got = refusal.key if refusal else repr(exc)[:80]
        if (got is None) != (not predicted) or (got is not None and got not in predicted):
            disagree.append((params, got, predicted))
    assert not disagree, disagree[:3]


# -- planted kernels, found by the default profile at 30 cases ----------------------------------


def _first_catch(kernel_entry):
    """Generate the default profile's cases for one planted kernel with a budget of 30 and run
    them on the CPU until one is a MISMATCH: (index, case, cases, its outcome)."""
    from pytest_scaledmm.execution.run import RunContext, run_case
    from pytest_scaledmm.matrix.kernels import resolve_kernels

    shipped = yaml.safe_load((REPO / "matrix.yaml").read_text())
    text = yaml.safe_dump(
        {
            "version": 1,
            "kernels": [kernel_entry],
            "axes": shipped["axes"],
            "archs": shipped["archs"],
            "profiles": {"default": {"cases": 30}},
        }
    )
    spec = parse_spec(Path("matrix.yaml"), text)
    cases, notes = generate_cases(spec, spec.profile("default"), "cpu")
    assert len(cases) == 30 + notes["extreme"] + notes["guaranteed"]
    ctx = RunContext(
        device="cpu",
        run_seed=spec.seed,
        kernel_specs={k.name: k for k in spec.kernels},
        kernels=resolve_kernels(spec.path, spec.kernels),
    )
    for index, case in enumerate(cases):
        outcome = run_case(case, ctx)
        if outcome.outcome == oc.MISMATCH:
            return index, case, cases, outcome
    return None, None, cases, None


def test_default_profile_catches_a_kernel_wrong_only_for_rowwise_scales_with_m_above_1():
    index, case, cases, _ = _first_catch(planted("first_token_scale"))
    assert case is not None, "not caught in 30 cases"
    assert case.params.scale_a in ("rowwise", "blockwise") and case.params.m > 1
    assert sum(c.params.scale_a == "rowwise" and c.params.m > 1 and c.params.purpose == "valid" for c in cases) >= 2


def test_default_profile_catches_a_kernel_wrong_only_when_k_has_a_tail():
    # Declares K a multiple of 8: a tail of a 128 block (K = 24, 32, 64, 160) is inside its support.
    index, case, cases, outcome = _first_catch(planted("drops_k_tail", k_multiple=8))
    assert case is not None, "not caught in 30 cases"
    assert failing_call(case.params, outcome.observations.sequence).k % 128 and case.params.purpose == "valid"
    assert {c.params.k for c in cases if c.params.purpose == "boundary"} == {20}  # outside k_multiple: 8


# -- a run: the model block, mismatches and the coverage block ----------------------------------


def test_run_reports_what_was_tested_and_model_mismatches(matrix_project):
    """A kernel that accepts what it declares it refuses, and one that refuses what it declares
    nothing about: each is a model mismatch line, not noise; the coverage block counts the run."""
    kernels = [planted("accepts_k24", "correct", k_multiple=16), planted("refuses_m1"), planted("correct")]
    matrix_project.write_matrix(matrix_text(kernels, {"k": [24, 32], "m": [1, 4], "mode": ["aot_eager"]}, cases=12))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    report = matrix_project.report()
    records = {r["id"]: r for r in report["cases"]}
    boundary = [r for r in records.values() if r["params"]["purpose"] == "boundary"]
    assert boundary and all(r["params"]["kernel"] == "accepts_k24" and r["params"]["k"] == 24 for r in boundary)
    assert all(
        r["model"]
        == {
            "purpose": "boundary",
            "expected_refusal": "k_multiple",
            "mismatch": True,
            "detail": "the model expects k_multiple, eager accepts; compiled accepts too",
        }
        for r in boundary
    )
    refused = [r for r in records.values() if r["params"]["kernel"] == "refuses_m1" and r["params"]["m"] == 1]
    assert refused and all(r["outcome"] == oc.REFUSED and r["model"]["mismatch"] for r in refused)
    assert not any(r["model"]["mismatch"] for r in records.values() if r["params"]["kernel"] == "correct")
    out = result.stdout.str()
    # User kernels: what their code does against what they declare, never a change of torch.
    assert "model mismatch" not in out
    assert (
        "kernel accepts_k24 (user kernel): 2 case(s) outside its declared support (k_multiple) accepted by its"
        " code: the declaration is narrower than the kernel"
    ) in out
    assert (
        "kernel refuses_m1 (user kernel): 2 valid case(s) inside its declared support raise in its own code at "
        f"{Path(__file__).parent / 'planted_kernels.py'}:"
    ) in out
    cases = report["coverage"]["cases"]
    assert cases["run"] == 12 and cases["boundary"] == 2 and cases["model_mismatch"] == 4 and cases["skipped"] == 0
    assert cases["reference_checked_valid"] == 8  # refuses_m1 at M = 1: valid, but nothing to check
    assert "tested: 12 case(s) run, 8 reference-checked with valid inputs, 2 boundary, 0 special, 0 skipped" in out
    pairwise = report["coverage"]["pairwise"]
    assert pairwise["scale_pair x mode"] == {"covered": 3, "possible": 3, "missing": []}
    # refuses_m1's M = 1 cases ran but checked nothing: their shape class is not covered.
    forms = pairwise["scale_form x shape_class"]
    assert forms["possible"] == 24 and forms["covered"] == 22
    assert all(item[0] == "refuses_m1" for item in forms["missing"]) and forms["missing"], forms
    assert "pairwise coverage among valid cases checked [cpu]: scale_pair x mode 3/3 (100 %)" in out


def test_declared_pairs_and_dtype_rules_make_refusals_unsupported():
    """scale_pairs, dtype_pairs, out_dtypes and bias_out_dtypes are declarations like the shape
    limits: validated, judged (a refusal outside them is UNSUPPORTED) and generated around."""
    from pytest_scaledmm.matrix.errors import MatrixError
    from pytest_scaledmm.verdict.refusals import declared_breaks, outside_declared_support

    kernel = planted(
        "k",
        "correct",
        scale_pairs=[["tensor_0d", "tensor_0d"]],
        dtype_pairs=[["e4m3fn", "e5m2"]],
        out_dtypes=["bf16"],
        bias_out_dtypes=[],
    )
    spec = parse_spec(Path("matrix.yaml"), matrix_text([kernel]))
    declared = spec.kernels[0]
    assert declared.scale_pairs == (("tensor_0d", "tensor_0d"),) and declared.bias_out_dtypes == ()
    params = case_record(scale_b="tensor_1d", out_dtype="fp16", bias=True, m=4)
    assert [key for key, _ in declared_breaks(declared, params)] == [
        "scale_pairs",
        "dtype_pairs",
        "out_dtypes",
        "bias_out_dtypes",
    ]
    assert "tensor_0d x tensor_1d is not in its scale_pairs" in outside_declared_support(declared, params)
    with pytest.raises(MatrixError, match=r"kernels\[0\]"):
        parse_spec(Path("matrix.yaml"), matrix_text([planted("k", "correct", scale_pairs=[["tensor_0d"]])]))


def test_a_refusal_of_an_older_torch_is_explained_not_a_mismatch():
    """The models leave torch ranges out (they would change the ids); what a range refuses
    explains a mismatch instead. Cases generation did not make are never mismatches."""
    from pytest_scaledmm.reports.coverage import model_block

    error = {
        "type": "builtins.NotImplementedError",
        "root_type": "builtins.NotImplementedError",
        "message": "Could not run 'aten::_scaled_mm' with arguments from the 'CPU' backend.",
    }
    record = {
        "id": "x",
        "outcome": oc.UNSUPPORTED,
        "params": {"kernel": "aten_scaled_mm", "purpose": "valid"},
        "eager_error": error,
        "compiled_error": error,
    }
    old = model_block(record, "cpu", "2.7.1+cpu")
    assert old["mismatch"] is False and old["refusal"] == "backend" and "2.7.1" in old["explained"]
    assert model_block(record, "cpu", "2.9.0+cpu")["mismatch"] is True
    assert model_block(record, "sm90", "2.7.1+cu126")["mismatch"] is True  # not a GPU fact
    corpus = {**record, "params": {"kernel": "aten_scaled_mm"}}
    assert model_block(corpus, "cpu", "2.9.0")["mismatch"] is False


# -- case ids and the default profile --------------------------------------------------------------


@pytest.mark.slow
def test_ids_identical_over_two_runs_and_under_xdist(matrix_project):
    # Built-in kernels: xdist workers rebuild sys.path from the controller's start-up copy, so
    # they would not see the planted kernels' directory.
    matrix_project.write_matrix(
        """
        version: 1
        kernels: [aten_scaled_mm, int8_w8a8]
        axes: {scale_a: [tensor_0d, tensor_1d, rowwise], scale_b: [tensor_0d, rowwise], mode: [eager, aot_eager], m: [32], k: [32], n: [32]}
        limits: {max_operand_elements: 4096}
        profiles: {default: {cases: 8}}
        """
    )
    first = matrix_project.collect()
    second = matrix_project.collect()
    total = len(first)  # the budget's 8 and the guaranteed values past it
    assert total >= 8 and first == second
    result = matrix_project.run("--scaledmm-matrix", "-n", "2", "--scaledmm-report", "report.json")
    result.stdout.fnmatch_lines(["*2 workers*"])
    report = matrix_project.report()
    assert sorted(c["id"] for c in report["cases"]) == sorted(first)
    assert report["matrix"]["cases"] == total  # the controller never collects: it still says how many
    outcomes = result.parseoutcomes()
    # A boundary case whose sides raise differently is tolerated (it passes, shown apart).
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "skipped", "tolerated", "lenient")) == total
    assert report["environment"]["torch"]
    assert report["session"]["complete"] is True


def test_generation_is_independent_of_the_hash_seed(tmp_path):
    code = (
        "from pytest_scaledmm.matrix.spec import load_spec; from pytest_scaledmm.matrix.cases import generate_cases;"
        f"s = load_spec({str(REPO / 'matrix.yaml')!r}); print('\\n'.join(c.id for c in generate_cases(s, s.profile('default'))[0]))"
    )
    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        runs.append(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
        )
    assert runs[0] == runs[1]
    assert len(runs[0].split()) >= load_spec(REPO / "matrix.yaml").profile("default").cases


def test_default_profile_covers_every_valid_scale_pairing_in_every_mode_on_the_cpu():
    """On the CPU the default profile has room for every scale pairing the model accepts under
    every mode that runs there, and for every epilogue combination (3-way, and whole under a
    compiled mode); sizes eager refuses still come as boundary cases."""
    spec = load_spec(REPO / "matrix.yaml")
    cases, notes = generate_cases(spec, spec.profile("default"), "cpu")
    # The budget, then the extreme shapes and guaranteed values past it.
    past_budget = notes["extreme"] + notes["guaranteed"]
    assert len({c.id for c in cases}) == len(cases) == spec.profile("default").cases + past_budget
    assert notes["left_out_modes"] == ["triton-gemm"]
    assert not [w for w in notes["warnings"] if "epilogue" in w]
    valid = [c for c in cases if c.params.purpose == "valid"]
    for kernel in ("aten_scaled_mm", "int8_w8a8"):
        wanted = set(notes["possible"][kernel]["epilogue"])
        assert {"scale_a", "scale_b", "mode", "bias", "out_dtype"} <= set(
            epilogue.varying_axes(spec.axes_for(spec.profile("default")))
        )
        got = epilogue.covered(wanted, [c.params.to_json() for c in valid if c.params.kernel == kernel])
        assert len(wanted) > 500 and not wanted - got
    fp8 = {(c.params.scale_a, c.params.scale_b, c.params.mode) for c in valid if c.params.kernel == "aten_scaled_mm"}
    possible = {tuple(t) for t in notes["possible"]["aten_scaled_mm"]["scale_pair_mode"]}
    assert possible and not possible - fp8
    # Pairings without a recipe are possible only where a scale degenerates to one element.
    assert ("tensor_0d", "rowwise", "inductor") not in possible and ("rowwise", "rowwise", "inductor") in possible
    assert any(c.params.m == 1 for c in valid) and any(c.params.k % 16 for c in valid)


def test_case_ids_do_not_depend_on_loaded_modules(tmp_path):
    # Hypothesis can mix integer constants from the user's loaded modules into its draws.
    (tmp_path / "many_constants.py").write_text("A = [37, 101, 513, 7, 999, 4097, 333, 29, 61, 257, 1023]\n")
    (tmp_path / "m.yaml").write_text(
        "version: 1\nkernels: [aten_scaled_mm]\n"
        "axes: {mode: [eager, inductor], m: {min: 1, max: 4096}, k: {min: 16, max: 1024}, n: {min: 16, max: 1024}}\n"
        "profiles: {default: {cases: 30}}\n"
    )
    code = (
        "{extra}from pytest_scaledmm.matrix.spec import load_spec; from pytest_scaledmm.matrix.cases import generate_cases;"
        "s = load_spec('m.yaml'); print(' '.join(c.id for c in generate_cases(s, s.profile('default'))[0]))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code.format(extra=extra)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for extra in ("", "import many_constants; ")
    ]
    assert runs[0] == runs[1] and len(runs[0].split()) >= 30  # the budget, and the guarantee past it
    assert not (tmp_path / ".hypothesis").exists()


def test_coverage_counts_only_cases_checked_against_the_reference():
    from reports_factory import case

    from pytest_scaledmm.reports.coverage import coverage_block, coverage_lines

    records = [case("c1", "UNSUPPORTED", "ValueError: no"), case("c2", "ERROR_PARITY", "eager A <> compiled B")]
    for r in records:
        r["params"]["purpose"] = "valid"
    possible = {"aten_scaled_mm": {"scale_pair_mode": [["tensor_0d", "tensor_1d", "inductor"]], "form_class": []}}
    block = coverage_block(records, possible, "cpu")
    assert block["cases"]["reference_checked_valid"] == 0
    assert block["pairwise"]["scale_pair x mode"]["covered"] == 0
    assert "scale_pair x mode 0/1 (0 %)" in coverage_lines(block)[1]
    checked = case("c3", "PASS")
    checked["params"]["purpose"] = "valid"
    assert coverage_block(records + [checked], possible, "cpu")["pairwise"]["scale_pair x mode"]["covered"] == 1
