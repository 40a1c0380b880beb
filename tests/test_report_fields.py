"""Every field a reader of reports uses is checked when the report is read (REPORT_SCHEMA): a
corrupt or crafted report is one line naming the file and the field, exit 2, never a traceback,
whichever reader runs (`scaledmm compare` to the terminal, Markdown, HTML and the step summary,
`scaledmm gate`, `scaledmm merge`); a file name that is not UTF-8 is shown escaped."""

import contextlib
import io
import json
import os
import re
import traceback
from pathlib import Path

import pytest
from reports_factory import BASE, CAND, case, report, whole_shard, write

from pytest_scaledmm.cli import main
from pytest_scaledmm.reports.printable import printable
from pytest_scaledmm.reports.report import load_report

BOUND = {"model": "sqrt(min(K,L))-energy", "slack": 1.0, "max_tol_rel": 0.0039}
ERROR = {
    "type": "torch._dynamo.exc.Unsupported",
    "message": "Observed exception\n  Hint: ...",
    "root_type": "builtins.RuntimeError",
    "layer": "dynamo",
    "root_message": "scale ranks differ",
    "source": "/src/proj/kernels.py:72 in k",
}


def _check(ok, ratio, **more):
    return {"ok": ok, "ratio": ratio, "max_abs": 0.5, "max_rel": 0.01, "bound": dict(BOUND), **more}


def rich_report(candidate: bool) -> dict:
    """A small report with every field a reader reads, as the plugin writes them: a pass with
    timings, its kernel's choice and own slack; a wrong result, off in a band of rows, worse in
    the candidate; a compile-only error (a pass in the baseline) that missed a known failure;
    an XFAIL and a FIXED_UPSTREAM with their entries; error parity on invalid input; an
    unsupported case. It is shard 1 of 1, so that `scaledmm merge` reads it too."""
    records = []
    passed = case("p1", "PASS", kernel="correct", purpose="valid")
    passed.update(
        root_cause=None,
        met=None,
        eager_error=None,
        compiled_error=None,
        timing={"eager_s": 0.1, "compile_s": 0.2, "run_s": 0.01},
        extra={
            "compiled_graphs": 1,
            "kernel_choice": {"label": "aten", "kernels": ["aten_mm"]},
            "kernel_slack": {"slack": 2.0, "reason": "rounds its epilogue twice"},
        },
        model={"purpose": "valid", "expected_refusal": None, "mismatch": False},
    )
    records.append(passed)
    records.append(case("p2", "PASS", kernel="correct", m=8))
    wrong = case("m1", "MISMATCH", "MISMATCH: eager+compiled values off the reference", kernel="wrong")
    wrong.update(layer="eager+compiled", detail="eager: max |err|/tol = 99")
    wrong["errors"] = {
        "eager": _check(
            False, 99.0 if candidate else 2.0, pattern="in a band", where="rows 3-5 of 16", off_elements=12
        ),
        "compiled": _check(False, "inf", problem="non-finite values", where="columns 1-9 of 16", off=3),
    }
    records.append(wrong)
    if candidate:
        error = case("e1", "COMPILE_ONLY_ERROR", "Unsupported <- ObservedRuntimeError: x", kernel="asserts")
        error.update(
            errors={"eager": _check(True, 0.5), "compiled": None},
            compiled_error=dict(ERROR),
            root_cause="Unsupported <- ObservedRuntimeError: x",
            met="REFUSED: ValueError: no",
            layer="dynamo",
            known_failure_missed=[{"entry": 0, "signature": "AssertionError*", "torch": ">=2.0", "link": None}],
        )
    else:
        error = case("e1", "PASS", kernel="asserts")
    records.append(error)
    known = case("x1", "XFAIL", "InductorError <- LoweringException: AssertionError", mode="inductor")
    known.update(layer="inductor", compiled_error=dict(ERROR, layer="inductor"))
    known["known_failure"] = {
        "entry": 0,
        "signature": "InductorError*",
        "torch": ">=2.9",
        "link": "https://github.com/pytorch/pytorch/issues/1",
        "reason": "the lowering's assert",
        "original_outcome": "COMPILE_ONLY_ERROR",
    }
    records.append(known)
    fixed = case("f1", "FIXED_UPSTREAM", mode="inductor", m=8)
    fixed["known_failure"] = {"entry": 0, "signature": "InductorError*", "original_outcome": "PASS", "link": None}
    records.append(fixed)
    parity = case("b1", "BOUNDARY_PARITY", "ValueError vs RuntimeError", purpose="boundary", expected_refusal="rank")
    parity.update(layer="eager", eager_error=dict(ERROR, type="builtins.ValueError"), compiled_error=dict(ERROR))
    records.append(parity)
    records.append(case("u1", "UNSUPPORTED", "UNSUPPORTED: fp8 needs a GPU", dtype_a="e5m2"))
    data = report(
        records,
        session={"strict_errors": False},
        tox_env="torch213" if candidate else "torch211",
        **(CAND if candidate else BASE),
    )
    data["environment"].update(triton=None, capability=None, sm_count=None, platform="Linux")
    data["matrix"].update(
        path="/src/proj/matrix.yaml",
        arch="cpu",
        forced={"seed": 7, "device": "cpu"},
        tolerance={"slack": 1.0, "kernels": {"correct": {"slack": 2.0, "reason": "rounds its epilogue twice"}}},
    )
    data["shard"] = whole_shard(
        records, possible={"correct": {"scale_pair_mode": [["tensor_0d", "tensor_1d", "inductor"]]}}
    )
    return data


def field_paths(node, prefix=()):
    """Every path in the report, each record's fields once: ("cases", "*", "params", "kernel")."""
    found = {}

    def walk(value, path):
        if path:
            found[path] = None
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*path, key))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, (*path, "*" if path in (("cases",), ("signatures",)) else index))

    walk(node, prefix)
    return [path for path in found if path[0] not in ("schema", "schema_version")]


MISSING = "(missing)"
# What a crafted field holds instead: a list, an object, a string, a number, null, or nothing.
VALUES = [["x"], {"x": 1}, "x", 7, None, MISSING]


def mutated(data, path, value):
    """`data` with the field at `path` replaced by `value` (deleted for MISSING), in every record
    that has it."""
    data = json.loads(json.dumps(data))  # as read from a file: no dict shared by two fields

    def places(node, rest):
        head, *tail = rest
        if head == "*":
            keys = range(len(node))
        elif isinstance(node, dict):
            keys = [head] if head in node else []
        else:
            keys = [head] if isinstance(head, int) and head < len(node) else []
        for key in keys:
            if tail:
                yield from places(node[key], tail)
            else:
                yield node, key

    for parent, key in reversed(list(places(data, path))):
        if value is MISSING:
            del parent[key]
        else:
            parent[key] = value
    return data


def _run(argv) -> tuple:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException:  # what the test is about: never one
            code = "raised " + traceback.format_exc()
    return code, out.getvalue(), err.getvalue()


def _json_path(path) -> str:
    """The JSON path as a message names it, each record by its index."""
    text = ""
    for part in path:
        if part == "*":
            text += r"\[\d+\]"
        elif isinstance(part, int):
            text += rf"\[{part}\]"
        else:
            text += ("." if text else "") + re.escape(part)
    return text


def _report_name(tmp_path) -> Path:
    """A report file name with bytes that are not UTF-8, where the file system takes it."""
    path = tmp_path / os.fsdecode(b"crafted-\xff.json")
    try:
        path.write_text("{}")
    except (OSError, UnicodeEncodeError):
        return tmp_path / "crafted.json"
    return path


@pytest.fixture
def readers(tmp_path, monkeypatch):
    """run(data) -> {reader: (exit code, stdout, stderr)} for `data` written as the candidate."""
    baseline = write(tmp_path / "baseline.json", rich_report(False))
    crafted = _report_name(tmp_path)
    outputs = [tmp_path / name for name in ("out.md", "out.html", "merged.json", "step-summary.md")]
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(outputs[3]))
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # thousands of small files: durability is not the point

    def run(data):
        write(crafted, data)
        for path in outputs:
            path.unlink(missing_ok=True)
        results = {
            "compare": _run(
                ["compare", str(baseline), str(crafted), "--markdown", str(outputs[0]), "--html", str(outputs[1])]
            ),
            "gate": _run(["gate", "--baseline", str(baseline), "--candidate", str(crafted)]),
            "gate (as baseline)": _run(["gate", "--baseline", str(crafted), "--candidate", str(baseline)]),
            "merge": _run(["merge", str(outputs[2]), str(crafted)]),
        }
        return results, crafted, outputs[2]

    return run


EXIT_CODES = {"compare": (0, 2), "gate": (0, 1, 2), "gate (as baseline)": (0, 1, 2), "merge": (0, 1)}


@pytest.mark.parametrize("value", VALUES, ids=["list", "object", "string", "number", "null", "missing"])
def test_every_field_a_reader_uses_is_checked_when_read(readers, value):
    """Each field of a report, in turn, crafted: every reader exits 0, 1 or 2 without a
    traceback; a refusal is one line naming the file and the field; a shard that merge could not
    read is a reason of an incomplete merge, and a merged report can be read back."""
    candidate = rich_report(True)
    problems = []
    for path in field_paths(candidate):
        results, crafted, merged = readers(mutated(candidate, path, value))
        where = f"{'.'.join(map(str, path))} = {value!r}"
        key = re.compile(rf"{re.escape(printable(str(crafted)))}: key '{_json_path(path)}")
        for reader, (code, out, err) in results.items():
            if code not in EXIT_CODES[reader] or "Traceback" in out + err:
                problems.append(f"{where}: {reader} exit {code}\n{err[-2000:]}")
            elif code == 2 and not (err.count("\n") == 1 and key.search(err)):
                problems.append(f"{where}: {reader} refused it in other words: {err!r}")
        # merge reads each shard through load_report too: its refusal is the incomplete merge's reason.
        refused = results["compare"][0] == 2
        code, _, err = results["merge"]
        if refused and not (code == 1 and key.search(err)):
            problems.append(f"{where}: merge did not name the field: {err!r}")
        if not refused:
            load_report(merged)  # what merge wrote is a report every reader can read
    assert not problems, "\n".join(problems[:20])


def test_the_fields_are_the_readers_fields():
    """The report the test crafts holds the fields the readers named in the schema read."""
    paths = {".".join(p for p in path if isinstance(p, str)) for path in field_paths(rich_report(True))}
    for field in (
        "cases.*.params.kernel",
        "cases.*.errors.eager.off_elements",
        "cases.*.errors.compiled.where",
        "cases.*.errors.eager.bound.slack",
        "cases.*.compiled_error.source",
        "cases.*.known_failure.original_outcome",
        "cases.*.known_failure_missed",
        "cases.*.extra.kernel_slack.slack",
        "cases.*.extra.kernel_choice.kernels",
        "cases.*.model.mismatch",
        "cases.*.timing.eager_s",
        "session.wall_s",
        "session.strict_errors",
        "matrix.forced.seed",
        "matrix.tolerance.kernels.correct.slack",
        "environment.device_name",
        "shard.possible.correct.scale_pair_mode",
    ):
        assert field in paths, field


@pytest.mark.parametrize(
    "path, value, wanted",
    [
        (("cases", 3, "params", "kernel"), ["wrong"], "must be a string, not an array"),
        (("cases", 3, "params", "kernel"), {"name": "wrong"}, "must be a string, not an object"),
        (("cases", 3, "params", "m"), "16", "must be a whole number, not a string"),
        (("session", "wall_s"), "1.0", "must be a number or null, not a string"),
        (("cases", 3, "errors", "eager", "max_abs"), [1], "must be a number or a string, not an array"),
        (("cases", 7, "known_failure", "original_outcome"), "xfail", "is 'xfail', not an outcome class name"),
        (("environment", "device_name"), {"gpu": 1}, "must be a string or null, not an object"),
    ],
)
def test_a_crafted_field_is_one_line_naming_it(tmp_path, capsys, path, value, wanted):
    """What used to end in a traceback (the gate's exit 1, `compare --html`'s exit 1) or pass
    unchecked, for these."""
    crafted = write(tmp_path / "crafted.json", mutated(rich_report(True), path, value))
    baseline = write(tmp_path / "baseline.json", rich_report(False))
    shown = path[0] + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[1:])
    for argv in (
        ["gate", "--baseline", str(baseline), "--candidate", str(crafted)],
        ["compare", str(baseline), str(crafted), "--html", str(tmp_path / "out.html")],
        ["merge", str(tmp_path / "merged.json"), str(crafted)],
    ):
        assert main(argv) == (1 if argv[0] == "merge" else 2)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{crafted}: key '{shown}' {wanted}" in err, err


def test_a_report_whose_file_name_is_not_utf8_is_read_and_shown_escaped(tmp_path, capsys):
    name = _report_name(tmp_path)
    if name.name == "crafted.json":
        pytest.skip("this file system takes only UTF-8 file names")
    baseline = write(tmp_path / "baseline.json", rich_report(False))
    # Two columns with one label: the file names tell them apart.
    candidate = rich_report(True)
    candidate["environment"]["tox_env"] = "torch211"
    write(name, candidate)
    page, md = tmp_path / "out.html", tmp_path / "out.md"
    assert main(["compare", str(baseline), str(name), "--html", str(page), "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    assert "crafted-\\udcff" in out
    for written in (page, md):
        text = written.read_bytes().decode("utf-8")  # UTF-8 throughout: the name escaped
        assert "crafted-\\udcff" in text.replace("\\\\", "\\")  # Markdown escapes the backslash
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(name)]) == 1
    assert "crafted-\\udcff" in capsys.readouterr().out
    # Refused, it is named escaped, on one line.
    broken = rich_report(True)
    broken["session"]["wall_s"] = "soon"
    write(name, broken)
    assert main(["compare", str(name), "--html", str(page)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"scaledmm compare: error: {printable(str(name))}: key 'session.wall_s' must be a number or null, not a string\n"
    )


def test_report_text_that_is_not_unicode_is_written_escaped(tmp_path, monkeypatch):
    """A lone surrogate is valid JSON (`"\\udcff"`): the pages and the step summary hold it
    escaped instead of failing halfway."""
    data = rich_report(True)
    data["cases"][1]["root_cause"] = "Unsupported \udcff"  # e1, the compile-only error
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(data))  # ensure_ascii: the surrogate as \udcff
    page, md, summary = tmp_path / "out.html", tmp_path / "out.md", tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["compare", str(crafted), "--html", str(page), "--markdown", str(md)]) == 0
    for written in (page, md, summary):
        text = written.read_bytes().decode("utf-8").replace("\\\\", "\\")  # Markdown escapes the backslash
        assert "Unsupported \\udcff" in text, written
