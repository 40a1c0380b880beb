"""The three tables (compile modes, scale forms, outcome classes) agree with everything that reads
them: a row added, removed or changed in one place only fails here."""

import itertools
import json
import sys
import types
from collections import Counter

import pytest
import torch
from reports_factory import case as record_of
from reports_factory import report

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm.execution.triage import rungs_for
from pytest_scaledmm.matrix import kernels as K
from pytest_scaledmm.matrix.case_params import make_case
from pytest_scaledmm.matrix.compile_modes import MODES, compile_mode, compile_settings, inductor_modes
from pytest_scaledmm.matrix.schema import COMPILE_MODES, MATRIX_SCHEMA, SCALE_FORMS, SCALE_RANK
from pytest_scaledmm.matrix.spec import AXIS_DEFAULTS, BUILTIN_KERNELS
from pytest_scaledmm.plugin.speed import likelihood
from pytest_scaledmm.reports import compare as cmp
from pytest_scaledmm.reports import render
from pytest_scaledmm.verdict import draw
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.scale_forms import FORMS, WHOLE, ScaleForm, per_tensor_of_rank, scale_form

AXES_SCHEMA = MATRIX_SCHEMA["properties"]["axes"]["properties"]
KERNEL_SCHEMA = MATRIX_SCHEMA["properties"]["kernels"]["items"]["oneOf"][1]["properties"]


def params(**overrides) -> CaseParams:
    full = {axis: values[0] for axis, values in AXIS_DEFAULTS.items()}
    return CaseParams.from_json({"kernel": "aten_scaled_mm", **full, **overrides})


# -- compile modes ---------------------------------------------------------------------------------


def test_schema_modes_are_the_table():
    names = [mode.name for mode in MODES]
    assert len(set(names)) == len(names)
    assert COMPILE_MODES == names
    assert AXES_SCHEMA["mode"]["items"]["enum"] == names


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_compile_settings_are_what_this_torch_accepts(mode):
    import torch._inductor

    settings = compile_settings(mode.name)
    assert list(settings) == ["backend", "mode", "options", "dynamic"]
    assert json.loads(json.dumps(settings)) == settings  # a literal a repro script can carry
    assert settings["backend"] in torch._dynamo.list_backends(exclude_tags=()) + ["eager"]
    if settings["mode"] is not None:
        assert settings["mode"] in torch._inductor.list_mode_options()
    assert set(settings["options"] or {}) <= set(torch._inductor.list_options())
    assert mode.uses_inductor == (settings["backend"] == "inductor") == (mode.name in inductor_modes())


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_the_autotune_cap_goes_to_autotuning_modes_only(mode):
    import torch._inductor.config as inductor_config

    if "test_configs.max_mm_configs" not in inductor_config.get_config_copy():
        pytest.skip("this torch has no test_configs.max_mm_configs")
    capped = compile_settings(mode.name, max_autotune_configs=3)
    plain = compile_settings(mode.name)
    if mode.autotunes:
        assert capped["options"] == {**(plain["options"] or {}), "test_configs.max_mm_configs": 3}
    else:
        assert capped == plain
    assert compile_settings(mode.name, max_autotune_configs=0) == plain


def test_autotuning_modes_are_the_max_autotune_ones():
    assert {m.name for m in MODES if m.autotunes} == {
        "max-autotune-no-cudagraphs",
        "max-autotune",
        "triton-gemm",
        "aten-gemm",
        "cutlass-gemm",
        "persistent-tma",
    }


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_triage_and_first_failure_order_read_the_table(mode):
    case = make_case(params(mode=mode.name))
    rungs = {rung["name"]: rung for rung in rungs_for(case, "cuda")}
    assert ("fresh inductor cache" in rungs) == mode.uses_inductor
    gemm = rungs.get("gemm=ATEN")
    assert (gemm is not None) == mode.uses_inductor
    if gemm:
        assert gemm["params"]["mode"] == ("inductor" if mode.sets_gemm_backends else mode.name)
    assert f"backend={mode.name}" not in rungs  # the case itself is that rung
    assert likelihood(case.params) == (1 if mode.uses_inductor else 0)  # equal scale ranks
    assert f"-{mode.name}-" in case.id


def test_triage_backend_ladder_climbs_modes_of_the_table():
    from pytest_scaledmm.execution.triage import BACKEND_LADDER

    for name, _ in BACKEND_LADDER:
        assert compile_mode(name).backend == name and compile_settings(name)["mode"] is None


def test_an_unknown_mode_is_a_key_error():
    with pytest.raises(KeyError):
        compile_mode("no-such-mode")


# -- scale forms -----------------------------------------------------------------------------------


def test_schema_scale_forms_are_the_table():
    ids = [form.id for form in FORMS]
    assert len(set(ids)) == len(ids)
    assert SCALE_FORMS == ids
    for axis in ("scale_a", "scale_b"):
        assert AXES_SCHEMA[axis]["items"]["enum"] == ids
    assert KERNEL_SCHEMA["scale_forms"]["items"]["enum"] == ids
    assert SCALE_RANK == {form.id: form.rank for form in FORMS}


def test_every_pair_of_forms_round_trips_through_case_ids():
    by_short = {form.short: form.id for form in FORMS}
    assert len(by_short) == len(FORMS)
    for a, b in itertools.product(FORMS, FORMS):
        cid = make_case(params(scale_a=a.id, scale_b=b.id)).id
        short_a, short_b = cid.split("-")[1].split("_x_")
        assert (by_short[short_a], by_short[short_b]) == (a.id, b.id)


def test_builtin_kernel_declarations_name_forms_of_the_table():
    for name, declaration in BUILTIN_KERNELS.items():
        assert set(declaration.get("scale_forms") or SCALE_FORMS) <= set(SCALE_FORMS), name
    assert BUILTIN_KERNELS["fp8_linear"]["scale_forms"] == [f.id for f in FORMS if f.per_tensor]
    # The int8 kernel scales in an epilogue: no form that changes along K.
    assert "blockwise" not in BUILTIN_KERNELS["int8_w8a8"]["scale_forms"]
    assert "rowwise" in BUILTIN_KERNELS["int8_w8a8"]["scale_forms"]


def test_a_one_element_form_is_the_only_kind_below_rank_two():
    with pytest.raises(ValueError):
        ScaleForm("bad", "bad", 1, (1, WHOLE), (WHOLE, 1))


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.id)
@pytest.mark.parametrize("layout", ["contiguous", "noncontiguous", "offset", "expanded"])
def test_inputs_draw_each_form_as_the_table_says_and_expand_it_blockwise(form, layout):
    m, k, n = 33, 300, 130  # not multiples of any block: partial last blocks
    made = draw.make_inputs(params(scale_a=form.id, scale_b=form.id, m=m, k=k, n=n, scale_layout=layout), 7, "cpu")
    for side, scale, (rows, cols) in (("a", made.scale_a, (m, k)), ("b", made.scale_b, (k, n))):
        if form.global_scale:  # two-level: (block scales, global scale); the blocks are the form's
            assert isinstance(scale, tuple) and scale[1].numel() == 1
            scale = scale[0]
        assert tuple(scale.shape) == form.shape(side, rows, cols)
        if form.column_major and layout in ("contiguous", "offset"):
            assert scale.stride()[0] == 1 and scale.stride()[1] == form.grid(side, rows, cols)[0]
        expanded = draw.expand_scale(scale, form.id, side, rows, cols)
        assert tuple(expanded.shape) == (rows, cols)
        grid = scale.double().reshape(form.grid(side, rows, cols))
        block_rows, block_cols = (
            size if extent is WHOLE else extent for size, extent in zip((rows, cols), form.block(side))
        )
        for i, j in [(0, 0), (rows - 1, cols - 1), (rows // 2, cols // 3), (rows - 1, 0)]:
            assert expanded[i, j] == grid[i // block_rows, j // block_cols]


@pytest.mark.skipif(K._scaling_type() is None, reason="no scaled_mm_v2 recipes in this torch")
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.id)
def test_scaled_mm_v2_recipes_are_the_forms(form):
    recipes = K._scaling_type()
    m, k, n = 64, 256, 384  # no two forms share a shape here
    made = draw.make_inputs(params(scale_a=form.id, scale_b=form.id, m=m, k=k, n=n), 3, "cpu")
    want = (getattr(recipes, form.recipe_a), getattr(recipes, form.recipe_b))
    assert K.scale_recipes(made.scale_a, made.scale_b, m, k, n) == want


def test_triage_gives_both_scales_one_rank_with_forms_of_the_table():
    ranks = sorted({f.rank for f in FORMS if f.per_tensor})
    low, high = per_tensor_of_rank(ranks[0]), per_tensor_of_rank(ranks[-1])
    rungs = {r["name"]: r for r in rungs_for(make_case(params(scale_a=low, scale_b=high)), "cpu")}
    changed = rungs["scales one rank"]["params"]
    assert changed == {"scale_a": high}
    assert all(scale_form(v).per_tensor and SCALE_RANK[v] == ranks[-1] for v in changed.values())
    assert likelihood(params(scale_a=low, scale_b=high, mode="inductor")) == 3


def _script_module(text: str) -> dict:
    """The names a repro script defines, without running its main."""
    module = types.ModuleType("scaledmm_repro_under_test")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(text, "repro_script", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.__dict__


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.id)
def test_repro_scripts_regenerate_every_form(form):
    """A repro script embeds the scale forms with the inputs: it draws the run's very scales."""
    from pytest_scaledmm.reports import repro

    case = make_case(params(kernel="scaled_mm_v2", scale_a=form.id, scale_b=form.id, m=64, k=256, n=384))
    record = {
        "id": case.id,
        "params": case.params.to_json(),
        "outcome": "COMPILE_ONLY_ERROR",
        "signature": "RuntimeError: x",
        "layer": "inductor",
        "compiled_error": {"type": "builtins.RuntimeError", "root_type": "builtins.RuntimeError"},
    }
    kernel = repro.kernel_code("scaled_mm_v2", K.BUILTIN_IMPLS["scaled_mm_v2"], None)
    script = _script_module(repro.render_script(record, {"device": "cpu", "torch": "2.x"}, 11, kernel, 60.0))
    theirs, ours = script["make_inputs"](case.params, 5, "cpu"), draw.make_inputs(case.params, 5, "cpu")
    for name in ("scale_a", "scale_b"):
        for their, our in zip(
            *(s if isinstance(s, tuple) else (s,) for s in (getattr(theirs, name), getattr(ours, name)))
        ):
            assert torch.equal(
                their.view(torch.uint8) if their.element_size() == 1 else their,
                our.view(torch.uint8) if our.element_size() == 1 else our,
            )
            assert their.stride() == our.stride()
    args = (theirs.scale_a, theirs.scale_b, 64, 256, 384)
    assert script["scale_recipe_names"](*args) == K.scale_recipe_names(*args)


# -- outcome classes -------------------------------------------------------------------------------


def test_outcome_rows_are_complete_and_distinct():
    names = [c.name for c in oc.CLASSES]
    assert len(set(names)) == len(names)
    assert sorted(c.severity for c in oc.CLASSES) == list(range(len(names)))
    assert len({c.colour.lower() for c in oc.CLASSES} | {render.OTHER_COLOUR}) == len(names) + 1
    assert len({c.abbrev for c in oc.CLASSES}) == len(names)
    for c in oc.CLASSES:
        assert c.pytest_status in oc.PYTEST_STATUSES, c.name
        assert len(c.abbrev) <= 6 and int(c.colour[1:], 16) >= 0 and len(c.colour) == 7, c.name
        assert getattr(oc, c.name) == c.name  # the constant producers use
    assert oc.FAILURES == tuple(c.name for c in oc.CLASSES if c.pytest_status == "failed")
    assert set(oc.PYTEST_STATUSES.values()) == {cmp.OK, cmp.FAILING, cmp.KNOWN, cmp.ABSENT}


@pytest.mark.parametrize("cls", oc.CLASSES, ids=lambda c: c.name)
def test_compare_judges_each_class_by_its_row(cls):
    assert cmp.category(cls.name) == cls.category
    assert cmp.severity(cls.name) == cls.severity
    was = record_of("c", oc.PASS)
    now = record_of("c", cls.name, None if cls.category == cmp.OK else "Error: x")
    expected = {
        cmp.OK: None,
        cmp.FAILING: cmp.REGRESSION,
        cmp.KNOWN: cmp.KNOWN_FAILURE,
        cmp.ABSENT: cmp.CAPABILITY_LOST,
    }
    assert cmp.classify(was, now) == expected[cls.category]


def test_a_class_a_newer_plugin_adds_is_a_failure_worse_than_any():
    assert cmp.category("NEWER_CLASS") == cmp.FAILING
    assert cmp.worst([c.name for c in oc.CLASSES] + ["NEWER_CLASS"]) == "NEWER_CLASS"
    assert cmp.worst([c.name for c in oc.CLASSES]) == min(oc.CLASSES, key=lambda c: c.severity).name
    assert render.colour("NEWER_CLASS") == render.OTHER_COLOUR


def test_every_class_is_rendered_with_its_colour_abbreviation_and_column(tmp_path):
    before = report([record_of(f"c{i}", oc.PASS) for i, _ in enumerate(oc.CLASSES)], torch="2.11.0")
    after = report(
        [
            record_of(f"c{i}", c.name, None if c.category == cmp.OK else f"Error: {c.name}")
            for i, c in enumerate(oc.CLASSES)
        ],
        torch="2.13.0",
    )
    comparison = cmp.compare_reports([(tmp_path / "a.json", before), (tmp_path / "b.json", after)])
    text, markdown, html = (
        render.render_text(comparison),
        render.render_markdown(comparison),
        render.render_html(comparison),
    )
    header = text.splitlines()[0].split()
    for c in oc.CLASSES:
        assert c.abbrev in header, c.name
        assert f" {render.md_escape(c.name)} |" in markdown.splitlines()[2], c.name  # a column of the counts table
        assert f'background: {c.colour}"></i>{c.name}</span>' in html, c.name  # the legend
        chip = f'<span class="chip{" light" if render.light(c.name) else ""}" style="background: {c.colour}">{c.name}</span>'
        assert chip in html, c.name
    assert {c.name for c in oc.CLASSES if render.light(c.name)} == {oc.SKIPPED, oc.UNSUPPORTED, oc.XFAIL}


def test_pytest_reports_each_case_as_its_class_says(matrix_project):
    """Every class a CPU run can produce, from planted kernels, the known-failure catalogue and a
    kernel for a GPU arch: pytest's tally is the table's, and the summary lists the classes in its
    order. GPU-only modes are not generated for the CPU (their cases would all skip)."""
    gpu_only = [m.name for m in MODES if m.gpu_only]
    kernels = [
        planted("correct"),
        planted("fixed", "correct"),
        planted("ignores_scale_b"),
        planted("asserts_rank_under_compile"),
        planted("declares_m_at_least_8", "refuses_everywhere", min_m=8),
        planted("gpu_kernel", "correct", archs=["sm90"]),
    ]
    text = matrix_text(
        kernels,
        {"mode": ["aot_eager", *gpu_only]},
        known_failures=[
            {"match": {"kernel": "fixed"}, "signature": "anything"},
            {"match": {"kernel": "asserts_rank_under_compile"}, "signature": "scale ranks differ"},
        ],
    )
    matrix_project.write_matrix(text)
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    records = matrix_project.report()["cases"]
    outcomes = Counter(r["outcome"] for r in records)
    assert set(outcomes) >= {oc.PASS, oc.FIXED_UPSTREAM, oc.XFAIL, oc.UNSUPPORTED, oc.MISMATCH}
    seen = {}
    for rep in result.reprec.getreports("pytest_runtest_logreport"):
        if rep.when == "call" or (rep.when == "setup" and not rep.passed):
            seen[rep.nodeid.split("::")[-1]] = "xfailed" if hasattr(rep, "wasxfail") else rep.outcome
    assert seen == {r["id"]: oc.outcome_class(r["outcome"]).pytest_status for r in records}
    # FIXED_UPSTREAM passes, shown apart as "fixed upstream".
    result.assert_outcomes(passed=1, xfailed=1, failed=1, skipped=2)
    assert not any(compile_mode(r["params"]["mode"]).gpu_only for r in records)
    gpu = next(r for r in records if r["params"]["kernel"] == "gpu_kernel")
    assert gpu["outcome"] == oc.SKIPPED and "sm90" in gpu["detail"]
    shown = ", ".join(f"{c.name} {outcomes[c.name]}" for c in oc.CLASSES if outcomes[c.name])
    assert f": {shown}" in result.stdout.str()
