"""Severity tiers, the compiled side that accepts what eager refuses, error parity on invalid input
(--scaledmm-strict-errors), and one summary line per root cause."""

import json
import re
import subprocess
import sys

import pytest
from case_factory import case_params
from reports_factory import case, report, write

from matrices import IN_PROCESS, matrix_text, planted
from pytest_scaledmm import cli
from pytest_scaledmm.reports import compare as cmp
from pytest_scaledmm.reports import gate, render, repro
from pytest_scaledmm.reports.report import signature_groups
from pytest_scaledmm.verdict import outcome as oc
from pytest_scaledmm.verdict.case_axes import CaseParams
from pytest_scaledmm.verdict.classify import classify
from pytest_scaledmm.verdict.outcome import ErrorInfo

TIER = "planted_tier_kernels"
NO_TRIAGE = ("--no-scaledmm-triage",)
# Invalid input for these kernels: K = 32 is outside a declared k_multiple of 64.
BOUNDARY = {"k_multiple": 64}
THREE_FORMS = {"scale_b": ["tensor_1d", "tensor_1x1", "rowwise"]}
# A budget whose boundary slice holds the one refusal reason (k_multiple) of a kernel whose every
# configuration is invalid: generation makes one case, with purpose "boundary".
BUDGET = 10
WITHOUT_PLUGIN = (
    "import runpy, sys; sys.modules['pytest_scaledmm'] = None; "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def tier_kernel(name, function=None, **declared):
    return planted(name, function, module=TIER, **declared)


def boundary_matrix(project, kernels, forms):
    """A matrix of `kernels` (each declaring BOUNDARY) whose cases are exactly the included ones:
    per kernel name, one case per scale_b form in `forms[name]`, at M = 4 and K = 32. Every case
    generation would add has M = 8, which the matrix excludes."""
    import yaml

    entries = [
        {"params": case_params(kernel=name, scale_b=form, mode="aot_eager", m=4)}
        for name, chosen in forms.items()
        for form in chosen
    ]
    (project.path / "corpus.yaml").write_text(yaml.safe_dump({"version": 1, "cases": entries}))
    project.write_matrix(
        matrix_text(kernels, {**THREE_FORMS, "m": [8]}, cases=1, include=["corpus.yaml"], exclude=[{"m": [8]}])
    )
    return len(entries)


def run_script(path, cwd):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PLUGIN, str(path), "--strict-inputs"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )
    return done.returncode, done.stdout + done.stderr


# -- the table -----------------------------------------------------------------------------------


def test_tiers_order_the_failures_and_severity_follows_them():
    tier = {c.name: c.tier for c in oc.CLASSES}
    assert tier[oc.MISMATCH] == tier[oc.FALLBACK] == tier[oc.CRASH] == 1
    assert tier[oc.COMPILE_ONLY_ERROR] == tier[oc.ERROR_PARITY] == 2
    assert tier[oc.LENIENT_MISMATCH] == 3 and tier[oc.BOUNDARY_PARITY] == 4
    assert tier[oc.LENIENT] is None and not oc.outcome_class(oc.LENIENT).fails
    for c in oc.CLASSES:
        assert (c.tier is not None) == c.fails, c.name
    # Every class of a tier is worse (a lower severity) than every class of the next tier, and
    # every failure worse than every class that never fails.
    ranked = sorted(oc.CLASSES, key=lambda c: c.severity)
    tiers = [c.tier if c.tier is not None else len(oc.TIERS) + 1 for c in ranked]
    assert tiers == sorted(tiers)
    assert [c.name for c in oc.CLASSES if c.strict_only] == [oc.BOUNDARY_PARITY]
    bp = oc.outcome_class(oc.BOUNDARY_PARITY)
    assert bp.fails_when(True) and not bp.fails_when(False)
    assert bp.category_when(False) == cmp.OK and bp.category_when(True) == cmp.FAILING


# -- the verdict, called directly --------------------------------------------------------------------

EAGER = [
    ErrorInfo("builtins.ValueError", reason, "builtins.ValueError", "eager")
    for reason in ("K must be a multiple of 16", "Invalid scaling configuration.", "e5m2 x e5m2 is not supported")
]
LOWERING = ErrorInfo(
    "torch._inductor.exc.InductorError",
    "LoweringException: AssertionError: Expect scale_a and scale_b to be either both scalars",
    "builtins.AssertionError",
    "inductor",
    "Expect scale_a and scale_b to be either both scalars or both matrices",
)
RIGHT = {"ok": True, "ratio": 0.1, "max_abs": 0.0}
WRONG = {"ok": False, "ratio": 40.0, "max_abs": 3.0}
PARAMS = case_params(scale_b="rowwise", m=4, k=24)


@pytest.mark.parametrize(
    "purpose, expected",
    [
        ("boundary", oc.BOUNDARY_PARITY),
        ("valid", oc.ERROR_PARITY),
        ("special", oc.ERROR_PARITY),
        (None, oc.ERROR_PARITY),
    ],
)
def test_error_parity_is_tolerable_only_on_a_boundary_case(purpose, expected):
    params = CaseParams.from_json({**PARAMS, **({"purpose": purpose} if purpose else {})})  # no purpose: valid
    got = classify(EAGER[0], LOWERING, 1, None, None, None, params)
    assert got.outcome == expected
    assert got.layer == "inductor" and got.root_cause.startswith("InductorError <- AssertionError: Expect scale_a")
    assert got.met == "eager: ValueError: K must be a multiple of N"
    # The per-case signature stays what it was: both sides (known_failures match it).
    assert got.signature.startswith("eager ValueError: K must be a multiple of N <> compiled InductorError")


@pytest.mark.parametrize(
    "purpose, check, expected",
    [
        ("boundary", RIGHT, oc.LENIENT),
        (None, RIGHT, oc.ERROR_PARITY),  # eager refuses a valid case: eager is the side that is wrong
        ("valid", RIGHT, oc.ERROR_PARITY),
        ("boundary", WRONG, oc.LENIENT_MISMATCH),
        (None, WRONG, oc.LENIENT_MISMATCH),
    ],
)
def test_compiled_accepting_what_eager_refuses_is_checked_against_the_reference(purpose, check, expected):
    params = CaseParams.from_json({**PARAMS, **({"purpose": purpose} if purpose else {})})
    got = classify(EAGER[1], None, 1, None, check, None, params)
    assert got.outcome == expected
    assert got.signature == "compiled accepts what eager refuses: ValueError: Invalid scaling configuration."
    assert got.failed == (expected != oc.LENIENT)
    if expected != oc.ERROR_PARITY:
        assert got.layer == "compiled" and got.met == "eager: ValueError: Invalid scaling configuration."


def test_one_compiled_cause_is_one_root_cause_whatever_eager_refused():
    params = CaseParams.from_json({**PARAMS, "purpose": "boundary", "expected_refusal": "K must be a multiple of 16"})
    outcomes = [classify(eager, LOWERING, 1, None, None, None, params) for eager in EAGER]
    assert len({o.signature for o in outcomes}) == 3
    assert len({o.root_cause for o in outcomes}) == 1
    assert "the boundary case expects: K must be a multiple of 16" in outcomes[0].detail
    # The same cause on a valid case, where eager passes, groups with them too.
    compile_only = classify(None, LOWERING, 0, RIGHT, None, None, params.with_values(purpose="valid"))
    records = [
        {
            "id": f"c{i}",
            "params": params.to_json(),
            "outcome": o.outcome,
            "signature": o.signature,
            "layer": o.layer,
            "root_cause": o.root_cause,
            "met": o.met,
        }
        for i, o in enumerate(outcomes + [compile_only])
    ]
    (group,) = signature_groups(records)
    assert group["count"] == 4 and group["outcome"] == oc.COMPILE_ONLY_ERROR and group["tier"] == 2
    assert group["outcomes"] == {oc.BOUNDARY_PARITY: 3, oc.COMPILE_ONLY_ERROR: 1}
    assert sorted(group["met"].values()) == [1, 1, 1] and len(group["met"]) == 3


# -- a run: the compiled side that accepts what eager refuses ------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "kernel, outcome, exit_code, word",
    [
        (tier_kernel("lenient_right", **BOUNDARY), oc.LENIENT, 0, "1 lenient"),
        (tier_kernel("lenient_wrong", **BOUNDARY), oc.LENIENT_MISMATCH, 1, "1 failed"),
    ],
)
def test_accepting_what_eager_refuses_and_its_repro_script(matrix_project, pytester, kernel, outcome, exit_code, word):
    matrix_project.write_matrix(matrix_text([kernel], cases=BUDGET))
    result = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-report", "report.json", "--scaledmm-repro-dir", "repros", *NO_TRIAGE
    )
    assert result.ret == exit_code
    assert word in result.stdout.lines[-1]
    (record,) = matrix_project.report()["cases"]
    assert record["params"]["purpose"] == "boundary"  # generation's boundary slice
    assert record["outcome"] == outcome
    assert (
        record["signature"] == "compiled accepts what eager refuses: ValueError: a one-dimensional scale_b is refused"
    )
    assert record["errors"]["compiled"]["ok"] is (outcome == oc.LENIENT)
    (script,) = (pytester.path / "repros").glob("repro_*.py")
    code, out = run_script(script, pytester.path)  # a fresh process without the plugin
    assert code == repro.EXIT_REPRODUCED, out
    assert f"observed: {outcome}: compiled accepts what eager refuses" in out


def test_the_informational_class_is_counted_and_shown_apart(matrix_project):
    boundary_matrix(
        matrix_project, [tier_kernel("lenient_right", **BOUNDARY)], {"lenient_right": THREE_FORMS["scale_b"]}
    )
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    assert result.ret == 0 and result.parseoutcomes()["lenient"] == 3
    out = result.stdout.str()
    assert "1 informational root cause(s)" in out and "failing root cause" not in out
    result.stdout.fnmatch_lines(["*   3 x LENIENT [[]compiled[]] compiled accepts what eager refuses"])
    assert matrix_project.report()["summary"] == {oc.LENIENT: 3}


# -- a run: error parity, strict or not -------------------------------------------------------------------


def test_error_parity_on_a_boundary_case_fails_only_when_strict(matrix_project, pytester):
    matrix_project.write_matrix(matrix_text([tier_kernel("k", "parity_one_lowering", **BOUNDARY)], cases=BUDGET))
    lenient = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "lenient.json", *IN_PROCESS)
    assert lenient.ret == 0
    assert lenient.parseoutcomes()["tolerated"] == 1 and "failed" not in lenient.parseoutcomes()
    assert "1 tolerated root cause(s), tier 4, error parity on invalid input" in lenient.stdout.str()
    strict = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-report", "strict.json", "--scaledmm-strict-errors", *IN_PROCESS
    )
    assert strict.ret == 1
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["1 failing root cause(s), by tier:", " tier 4, error parity on invalid input:"])
    for name, flag in (("lenient.json", False), ("strict.json", True)):
        data = matrix_project.report(name)
        assert data["session"]["strict_errors"] is flag
        assert [(c["outcome"], c["params"]["purpose"]) for c in data["cases"]] == [(oc.BOUNDARY_PARITY, "boundary")]


def test_error_parity_on_a_valid_case_fails_either_way(matrix_project):
    matrix_project.write_matrix(matrix_text([tier_kernel("k", "parity_one_lowering")], cases=BUDGET))
    for extra in ((), ("--scaledmm-strict-errors",)):
        result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *extra, *IN_PROCESS)
        assert result.ret == 1
        assert "failed" in result.parseoutcomes() and "tolerated" not in result.parseoutcomes()
        records = matrix_project.report()["cases"]
        assert records and {(c["outcome"], c["params"]["purpose"]) for c in records} == {(oc.ERROR_PARITY, "valid")}


def test_the_gate_applies_the_candidates_strictness(matrix_project, pytester):
    """Baseline: the kernel passes. Candidate: it raises otherwise than eager. On a boundary case
    that is no regression unless the candidate ran strict (or does not say: strict)."""

    def run(impl, report, *extra, declared=BOUNDARY):
        matrix_project.write_matrix(matrix_text([{"name": "k", "impl": impl, **declared}], cases=BUDGET))
        return matrix_project.run("--scaledmm-matrix", "--scaledmm-report", report, *extra, *IN_PROCESS)

    assert run("planted_kernels:correct", "base.json").ret == 0
    assert run("planted_kernels:correct", "base_valid.json", declared={}).ret == 0
    base = str(pytester.path / "base.json")
    assert run(f"{TIER}:parity_one_lowering", "lenient.json").ret == 0
    assert run(f"{TIER}:parity_one_lowering", "strict.json", "--scaledmm-strict-errors").ret == 1

    def gate_exit(candidate):
        return cli.main(["gate", "--baseline", base, "--candidate", str(pytester.path / candidate)])

    assert gate_exit("lenient.json") == 0
    assert gate_exit("strict.json") == 1
    unsaid = matrix_project.report("lenient.json")
    del unsaid["session"]["strict_errors"]
    write(pytester.path / "unsaid.json", unsaid)
    assert gate_exit("unsaid.json") == 1  # a report that does not say is strict
    # The plugin's own gate: the same rule.
    assert run(f"{TIER}:parity_one_lowering", "c1.json", "--scaledmm-baseline", base).ret == 0
    assert (
        run(f"{TIER}:parity_one_lowering", "c2.json", "--scaledmm-baseline", base, "--scaledmm-strict-errors").ret == 1
    )
    # On a valid case, a new error parity is a regression either way.
    valid = run(
        f"{TIER}:parity_one_lowering",
        "c3.json",
        "--scaledmm-baseline",
        str(pytester.path / "base_valid.json"),
        declared={},
    )
    assert valid.ret == 1 and re.search(r"regression: \d+ cases? PASS -> ERROR_PARITY", valid.stdout.str())


def test_gate_rule_by_hand_made_reports(tmp_path):
    base = write(tmp_path / "base.json", report([case("c", "PASS")], session={"strict_errors": False}))
    parity = case("c", oc.BOUNDARY_PARITY, "eager ValueError: x <> compiled RuntimeError: y")
    for strict, passes in ((False, True), (True, False)):
        cand = write(tmp_path / f"c{strict}.json", report([parity], session={"strict_errors": strict}))
        result = gate.check((base, json.loads(base.read_text())), (cand, json.loads(cand.read_text())))
        assert result.passed is passes, result.reasons
        if passes:
            assert any("error parity on invalid input, tolerated" in n for n in result.notes)
    # A strict baseline (missing: strict) judges a lax candidate strictly.
    strict_base = write(tmp_path / "strict.json", report([case("c", "PASS")]))
    lax = write(tmp_path / "lax.json", report([parity], session={"strict_errors": False}))
    assert not gate.check((strict_base, json.loads(strict_base.read_text())), (lax, json.loads(lax.read_text()))).passed
    # Parity restored (both refuse alike now) is no capability lost.
    was = case("c", oc.BOUNDARY_PARITY, "eager ValueError: x <> compiled RuntimeError: y")
    now = case("c", oc.UNSUPPORTED, "ValueError: x")
    assert cmp.classify(was, now, strict=True) == cmp.FIX and cmp.classify(was, now, strict=False) is None


# -- one bug, one line ---------------------------------------------------------------------------------


def test_one_compiled_cause_met_by_three_eager_refusals_is_one_line(matrix_project, pytester):
    # Valid cases: the covering array pairs every scale form with the one mode, one case each.
    matrix_project.write_matrix(matrix_text([tier_kernel("k", "parity_one_lowering")], THREE_FORMS))
    result = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "report.json", *IN_PROCESS)
    result.assert_outcomes(failed=3)
    data = matrix_project.report()
    assert sorted(c["params"]["scale_b"] for c in data["cases"]) == sorted(THREE_FORMS["scale_b"])
    assert len({c["signature"] for c in data["cases"]}) == 3  # one signature per eager refusal
    (group,) = data["signatures"]
    assert group["count"] == 3 and group["outcome"] == oc.ERROR_PARITY
    reasons = [
        "eager: ValueError: a one-dimensional scale_b is refused",
        "eager: ValueError: a single-element matrix scale_b is refused",
        "eager: ValueError: a per-column scale_b is refused",
    ]
    assert group["met"] == {reason: 1 for reason in sorted(reasons)}
    out = result.stdout.str()
    assert "1 failing root cause(s), by tier:" in out
    lines = [line for line in out.splitlines() if re.match(r"\s+\d+ x [A-Z_]+", line)]
    assert len(lines) == 1 and lines[0].lstrip().startswith("3 x ERROR_PARITY [dynamo]")
    assert "lowering: expect scale_a and scale_b" in lines[0]
    met = next(line for line in out.splitlines() if line.strip().startswith("met:"))
    assert all(f"1 x {reason}" in met for reason in reasons)

    comparison = cmp.compare_reports([(pytester.path / "report.json", data)])
    markdown = render.render_markdown(comparison)
    rows = [line for line in markdown.splitlines() if line.startswith("| tier 2")]
    assert len(rows) == 1 and "| 3 | ERROR\\_PARITY |" in rows[0]
    assert all(render.md_escape(f"1 × {reason}") in rows[0] for reason in reasons)
    html = render.render_html(comparison)
    assert html.count("lowering: expect scale_a and scale_b") >= 1 and "Root causes in" in html


def test_the_summary_is_ordered_by_tier(matrix_project, pytester):
    """Tier 4 has the most cases and tier 1 the fewest: the order is still tier 1, 2, 3, 4."""
    kernels = [
        planted("ignores_scale_b", **BOUNDARY),
        tier_kernel("lenient_wrong", **BOUNDARY),
        planted("asserts_rank_under_compile", **BOUNDARY),
        tier_kernel("parity", "parity_one_lowering", **BOUNDARY),
    ]
    forms = THREE_FORMS["scale_b"]
    boundary_matrix(
        matrix_project,
        kernels,
        {
            "ignores_scale_b": forms[:1],
            "lenient_wrong": forms[:2],
            "asserts_rank_under_compile": forms[:2],
            "parity": forms,
        },
    )
    order = [oc.MISMATCH, oc.COMPILE_ONLY_ERROR, oc.LENIENT_MISMATCH, oc.BOUNDARY_PARITY]
    result = matrix_project.run(
        "--scaledmm-matrix", "--scaledmm-report", "report.json", "--scaledmm-strict-errors", *IN_PROCESS
    )
    data = matrix_project.report()
    counts = {g["outcome"]: g["count"] for g in data["signatures"]}
    assert counts == {oc.MISMATCH: 1, oc.COMPILE_ONLY_ERROR: 2, oc.LENIENT_MISMATCH: 2, oc.BOUNDARY_PARITY: 3}
    assert [g["outcome"] for g in data["signatures"]] == order
    shown = [line.split(" x ")[1].split()[0] for line in result.stdout.lines if re.match(r"\s+\d+ x [A-Z_]+", line)]
    assert shown == order
    headings = [line.strip() for line in result.stdout.lines if line.startswith(" tier ")]
    assert headings == [f"tier {t.number}, {t.title}:" for t in oc.TIERS]
    markdown = render.render_markdown(cmp.compare_reports([(pytester.path / "report.json", data)]))
    rows = [line for line in markdown.splitlines() if re.match(r"\| tier \d", line)]
    assert [row.split(" | ")[2].replace("\\", "") for row in rows] == order
    # Without strict errors, tier 4 is tolerated: after the failures, in its own part.
    lenient = matrix_project.run("--scaledmm-matrix", "--scaledmm-report", "lenient.json", *IN_PROCESS)
    text = lenient.stdout.str()
    assert text.index("3 failing root cause(s)") < text.index("1 tolerated root cause(s)")
    assert "(tolerated)" in render.render_markdown(
        cmp.compare_reports([(pytester.path / "lenient.json", matrix_project.report("lenient.json"))])
    )


def test_wrong_eager_result_outranks_a_compile_error():
    from pytest_scaledmm.verdict.classify import classify
    from pytest_scaledmm.verdict.outcome import ErrorInfo

    compiled = ErrorInfo(
        "torch._inductor.exc.InductorError",
        "LoweringException: AssertionError:",
        "torch._inductor.exc.LoweringException",
        "inductor",
    )
    wrong = {"ok": False, "ratio": 9.0, "max_abs": 3.0}
    right = {"ok": True, "ratio": 0.1, "max_abs": 0.0}
    masked = classify(None, compiled, 0, wrong, None)
    assert (masked.outcome, masked.layer) == ("MISMATCH", "eager")
    assert "compiled raised InductorError" in masked.detail
    assert classify(None, compiled, 0, right, None).outcome == "COMPILE_ONLY_ERROR"
