"""What the tool writes from a report is safe against that report: a repro script holds report
values as data (never code, never comments), the HTML links only http(s), and the Markdown turns
no report text into a link, an image or markup; gate and merge lines are printable, a replay
command carries no option from the report, and repro imports nothing the report names."""

import ast
import atexit
import io
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
import types
from pathlib import Path

import pytest
from case_factory import case_params
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from reports_factory import case, report, write

from matrices import matrix_text, planted
from pytest_scaledmm.cli import main
from pytest_scaledmm.reports import render, repro
from pytest_scaledmm.reports.compare import compare_reports
from pytest_scaledmm.reports.render import render_html, render_markdown
from pytest_scaledmm.reports.report import ReportError

# A payload that, if it ever ran, would create MARKER; MARK is a name it binds, so it shows up as
# a NAME token wherever it escapes a string literal.
MARK = "SCALEDMM_PWNED"
MARKER_DIR = Path(tempfile.mkdtemp(prefix="scaledmm-marker-"))
atexit.register(shutil.rmtree, MARKER_DIR, True)
MARKER = MARKER_DIR / "payload-ran"
PAYLOAD = f"{MARK} = __import__('pathlib').Path({str(MARKER)!r}).touch()"
FRAGMENTS = [
    '"',
    "'",
    '"""',
    "'''",
    '"""""',
    "\\",
    "\\'",
    '\\"',
    "\n",
    "\r",
    "\r\n",
    "#",
    "{",
    "}",
    "{name}",
    "%s",
    "\u2028",
    "\x0c",
    "\t",
    "é",
    "\U0001d518",
    "\u200d",
    "\ufeff",
]
# Ways out of a string, a comment or a docstring, each followed by the payload.
INJECTIONS = [
    f"\n{PAYLOAD}\n",
    f"'''\n{PAYLOAD}\n'''",
    f'"""\n{PAYLOAD}\n"""',
    f'"""""\n{PAYLOAD}\n#',
    f"')\n{PAYLOAD}\n#",
    f"\\\n{PAYLOAD}",
    f"{{{PAYLOAD}}}",
    f"\r{PAYLOAD}\r",
    f"\r\n{PAYLOAD}\r\n",
    f"'\n{PAYLOAD}\n'",
]
PLAIN = st.lists(
    st.one_of(
        st.sampled_from(FRAGMENTS),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6),
    ),
    max_size=4,
).map("".join)
# Every value carries an injection, between arbitrary text: each example tries every field.
TEXT = st.builds(lambda a, injection, b: a + injection + b, PLAIN, st.sampled_from(INJECTIONS), PLAIN)
ENV_KEYS = (
    "torch",
    "cuda",
    "hip",
    "triton",
    "python",
    "platform",
    "plugin",
    "hypothesis",
    "device_name",
    "arch",
    "capability",
    "sm_count",
)
BASE_PARAMS = case_params(scale_layout="contiguous", activation_rank=2, special_scale="none", m=4)


RARELY = st.sampled_from([False, False, False, False, True])


def error_info():
    return st.none() | st.fixed_dictionaries({"type": TEXT, "message": TEXT, "root_type": TEXT})


@st.composite
def crafted_reports(draw):
    params = dict(BASE_PARAMS)
    params["kernel"] = draw(st.sampled_from(["aten_scaled_mm"]) | TEXT.map(lambda t: "k" + t))
    if draw(RARELY):  # a crafted value of another parameter: refused, never run
        params[draw(st.sampled_from(sorted(BASE_PARAMS)))] = draw(TEXT)
    record = {
        "id": draw(TEXT),
        "params": params,
        "outcome": draw(st.sampled_from(["MISMATCH", "COMPILE_ONLY_ERROR", "ERROR_PARITY", "XFAIL", "TIMEOUT"])),
        "signature": draw(TEXT),
        "layer": draw(st.none() | TEXT),
        "detail": draw(TEXT),
        "eager_error": draw(error_info()),
        "compiled_error": draw(error_info()),
        # An outcome is a class name (load_report refuses other text): crafted text rarely.
        "known_failure": {
            "original_outcome": draw(TEXT) if draw(RARELY) else draw(st.sampled_from(["MISMATCH", "TIMEOUT"])),
            "link": draw(TEXT),
        },
        "triage": {
            "layer": draw(TEXT),
            "quantized_path": True,
            "workarounds": [{"knob": draw(TEXT), "rung": draw(TEXT)}],
        },
    }
    environment = {key: draw(TEXT) for key in ENV_KEYS}
    environment["device"] = draw(st.just("cpu") | TEXT)
    seed = draw(TEXT) if draw(RARELY) else draw(st.integers(0, 2**64))
    data = report([record])
    data["environment"] = environment
    data["matrix"] = {"path": draw(TEXT), "seed": seed, "hash": draw(TEXT)}
    return data


def assert_data_only(text: str, record: dict) -> dict:
    """The script parses; MARK occurs in string literals only (not in code, not in comments);
    running its module-level code (everything but the case itself) runs no payload and yields
    the report's values unchanged."""
    code = compile(text, "repro.py", "exec")
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        assert token.type == tokenize.STRING or MARK not in token.string, (token, text[:3000])
    # As a module of its own (dataclasses look their module up), not as __main__: the case
    # itself does not run.
    module = types.ModuleType("scaledmm_repro_data_check")
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)
    finally:
        del sys.modules[module.__name__]
    namespace = module.__dict__
    assert not MARKER.exists(), "a payload ran"
    assert namespace["CASE_ID"] == record["id"]
    assert namespace["EXPECTED"]["signature"] == (record["signature"] or record["outcome"])
    return namespace


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=crafted_reports())
def test_repro_scripts_hold_report_values_as_data(tmp_path, data):
    path = write(tmp_path / "crafted.json", data)
    record = data["cases"][0]
    for wanted in ([record["id"]], []):
        out = tmp_path / f"out-{len(wanted)}"
        try:
            scripts = repro.scripts_from_report(path, out, wanted)
        except (repro.ReproError, ReportError) as exc:  # a value it cannot use: refused in one line
            assert "\n" not in str(exc) and "\r" not in str(exc)
            assert not MARKER.exists()
            event("refused")
            continue
        event(f"{len(scripts)} script(s)")
        for script in scripts:
            namespace = assert_data_only(script.read_text(encoding="utf-8"), record)
            assert namespace["FOUND"]["environment"]["plugin"] == data["environment"]["plugin"]
            assert namespace["FOUND"]["detail"] == record["detail"]
    assert not MARKER.exists()


def _record(signature='a """"" b', **extra):
    return {
        "id": "fp8-case-1",
        "params": dict(BASE_PARAMS),
        "outcome": "MISMATCH",
        "signature": signature,
        "layer": "compiled",
        **extra,
    }


def _builtin_code():
    from pytest_scaledmm.matrix.kernels import BUILTIN_IMPLS

    return repro.kernel_code("aten_scaled_mm", BUILTIN_IMPLS["aten_scaled_mm"], None)


def test_a_signature_with_five_quotes_gives_a_script_that_parses(tmp_path):
    path = repro.write_script(tmp_path, _record(), {}, 1, _builtin_code(), 10.0)
    assert_data_only(path.read_text(), _record())


def test_a_crafted_plugin_version_or_seed_runs_nothing(tmp_path):
    record = _record("RuntimeError: x")
    environment = {"plugin": f"0.1\n{PAYLOAD}\n", "torch": f"2.13'''\n{PAYLOAD}", "device": "cpu"}
    path = repro.write_script(tmp_path, record, environment, f"7\n{PAYLOAD}\n", _builtin_code(), 10.0)
    assert_data_only(path.read_text(), record)


@pytest.mark.parametrize(
    "reference",
    [
        "os:system\nprint(1)",
        "os;import sys:x",
        "my mod:f",
        "mod:<locals>.f",
        "import:f",
        "1mod:f",
        "mod:f()",
        "mod:",
        ":f",
        "mod",
    ],
)
def test_a_kernel_reference_must_be_dotted_identifiers(reference):
    with pytest.raises(repro.ReproError, match="module:qualname"):
        repro.kernel_code("k", None, reference)


def test_a_valid_kernel_reference_becomes_data_for_importlib():
    code = repro.kernel_code("k", None, "pkg_that_is_not_there.sub:Holder.fn")
    assert "KERNEL_REF = 'pkg_that_is_not_there.sub:Holder.fn'" in code
    ast.parse(code)


def _run(script: Path, *args):
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=180)
    return done.returncode, done.stdout + done.stderr


def test_exit_codes_tell_a_crash_of_the_script_from_a_verdict(tmp_path):
    codes = {repro.EXIT_NOT_REPRODUCED, repro.EXIT_REPRODUCED, repro.EXIT_DIFFERENT, repro.EXIT_CANNOT_RUN}
    assert len(codes) == 4 and not codes & {1, 2}  # Python's own status for an uncaught error / bad usage
    (tmp_path / "gone_kernel.py").write_text("def kernel(*args, **kwargs):\n    raise RuntimeError('x')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        code = repro.kernel_code("gone", None, "gone_kernel:kernel")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("gone_kernel", None)
    script = repro.write_script(tmp_path / "out", _record("RuntimeError: x"), {"device": "cpu"}, 1, code, 30.0)
    doc = ast.get_docstring(ast.parse(script.read_text()))
    for status in codes:
        assert f"  {status} " in doc, doc
    (tmp_path / "gone_kernel.py").unlink()  # the kernel's module is gone: an ImportError
    status, out = _run(script)
    assert status == 1 and "ModuleNotFoundError" in out and "REPRODUCED" not in out, out
    truncated = tmp_path / "truncated.py"
    text = script.read_text()
    truncated.write_text(text[: text.index("def repro_main")] + "def repro_main(argv:\n")
    status, out = _run(truncated)
    assert status == 1 and "SyntaxError" in out and status not in codes


# -- HTML ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "link",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "vbscript:msgbox",
        "//evil.example/x",
        "https:alert(1)",
        "https://ok.example/a b",
    ],
)
def test_html_links_only_http_and_https(tmp_path, link):
    failing = case("a", "XFAIL", "RuntimeError: x")
    failing["known_failure"] = {"link": link, "signature": "RuntimeError"}
    page = render_html(
        compare_reports(
            [
                (tmp_path / "a.json", report([case("a", "PASS")], torch="2.11.0")),
                (tmp_path / "b.json", report([failing], torch="2.13.0")),
            ]
        )
    )
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs == [], hrefs
    assert "known failure:" in page  # shown as text


def test_html_keeps_an_https_link_and_escapes_everything(tmp_path):
    failing = case("a<b", "XFAIL", "<img src=x onerror=alert(1)>")
    failing["known_failure"] = {"link": "https://github.com/pytorch/pytorch/issues/1?a=1&b=2", "signature": "x"}
    page = render_html(compare_reports([(tmp_path / "b.json", report([failing], torch="2.13.0"))]))
    assert re.findall(r'href="([^"]*)"', page) == ["https://github.com/pytorch/pytorch/issues/1?a=1&amp;b=2"]
    assert "<img src=x" not in page and "a&lt;b" in page


def test_safe_url():
    safe_url = render.safe_url
    assert safe_url("https://example.com/x") == "https://example.com/x"
    assert safe_url("HTTP://example.com") == "HTTP://example.com"
    for bad in ("javascript:alert(1)", "https://", "ftp://example.com", "https://a\nb", "", None, 5):
        assert safe_url(bad) is None, bad


# -- Markdown --------------------------------------------------------------------------------

EVIL = (
    "![x](https://evil.example/x.png) [click](javascript:alert(1)) <https://evil.example/y> https://evil.example/z.png "
    "www.evil.example user@evil.example @someone **bold** _it_ `code` | col <img src=x> \\[escaped\\] ~~s~~ # h"
)
SPECIAL = set("\\`*_[]()!|~#$")


def _unescaped(text: str) -> list[str]:
    """Markdown-special characters not preceded by a backslash escape."""
    found, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in SPECIAL:
            i += 2
            continue
        if text[i] in SPECIAL or text[i] in "<>":
            found.append(text[i])
        i += 1
    return found


def _assert_inert(text: str):
    assert "\n" not in text and not _unescaped(text), (text, _unescaped(text))
    assert not re.search(r"(?i)(https?|ftp|mailto|xmpp)\:|www\.|@[^\u200d]", text), text


@settings(max_examples=200, deadline=None)
@given(st.text() | st.sampled_from([EVIL]))
def test_md_escape_leaves_no_markup_no_link_no_autolink(text):
    _assert_inert(render.md_escape(text))


def test_markdown_summary_has_no_link_or_image_from_report_text(tmp_path):
    reports = [
        (tmp_path / "a.json", report([case(EVIL, "PASS")], torch="2.11.0")),
        (tmp_path / "b.json", report([case(EVIL, "MISMATCH", EVIL)], torch="2.13.0")),
    ]
    text = render_markdown(compare_reports(reports))
    row = next(line for line in text.splitlines() if line.startswith("| 1 |") and "MISMATCH" in line)
    cells = row.split(" | ")
    assert len(cells) == 5, row  # cases, from -> to, outcome, root cause, example (the case): no extra column
    for cell in (cells[3], cells[4][:-2]):
        _assert_inert(cell)
    assert "case \\!\\[x\\]" in cells[4]
    # The replay command is one code span (literal in Markdown): the rest has no live URL.
    replay = next(line for line in text.splitlines() if line.startswith("Replay one case:"))
    fence = re.match(r"Replay one case: (`+) ", replay).group(1)
    assert replay.endswith(" " + fence) and fence not in replay[len("Replay one case: ") + len(fence) : -len(fence)]
    rest = text.replace(replay, "")
    assert "https://evil" not in rest and "![" not in rest and "](" not in rest


def test_a_code_span_outlasts_backticks_in_its_content(tmp_path):
    where = "/m/a``b`c/matrix.yaml"  # a case id never holds a backtick (the id grammar); a path may
    reports = [
        (tmp_path / "a.json", report([case("c1", "PASS")], torch="2.11.0", matrix_path=where)),
        (tmp_path / "b.json", report([case("c1", "MISMATCH", "x")], torch="2.13.0", matrix_path=where)),
    ]
    replay = next(
        line for line in render_markdown(compare_reports(reports)).splitlines() if line.startswith("Replay one case:")
    )
    assert replay.startswith("Replay one case: ``` ") and replay.endswith(" ```"), replay
    assert "a``b`c" in replay


def test_gate_markdown_escapes_report_text(tmp_path):
    baseline = write(tmp_path / "base.json", report([case("a", "PASS")], torch="2.11.0"))
    candidate = write(tmp_path / "cand.json", report([case("a", "MISMATCH", EVIL)], torch="2.13.0"))
    summary = tmp_path / "summary.md"
    assert main(["gate", "--baseline", str(baseline), "--candidate", str(candidate), "--markdown", str(summary)]) == 1
    text = summary.read_text()
    assert EVIL[:20] not in text and "![" not in text and "](" not in text
    assert not re.search(r"(?i)https?:|www\.", text), text


def test_terminal_table_shows_control_characters_as_escapes(tmp_path):
    sneaky = "RuntimeError: x\x1b[2J\x1b]8;;https://evil.example\x07link\rPASS\nforged line"
    reports = [
        (tmp_path / "a.json", report([case("a", "PASS")], torch="2.11.0")),
        # A crafted record: its signature alone says what failed.
        (tmp_path / "b.json", report([{**case("a", "MISMATCH", sneaky), "errors": None}], torch="2.13.0")),
    ]
    text = render.render_text(compare_reports(reports), width=400)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text)
    assert "\\x1b[2J" in text and "\\rPASS\\nforged line" in text


# -- gate and merge lines, replay commands, repro imports ------------------------------------------


BASE = dict(torch="2.11.0")
CAND = dict(torch="2.13.0")
BAND = "MISMATCH: compiled values off the reference in a band of rows"


def _gate(tmp_path, baseline, candidate, *extra):
    b = write(tmp_path / "baseline.json", baseline)
    c = write(tmp_path / "candidate.json", candidate)
    return main(["gate", "--baseline", str(b), "--candidate", str(c), *extra])


CRAFTED = "x\r\x1b[32mgate passed\x1b[0m\n::notice title=ok::all green\n::stop-commands::tok\u202e"


def _no_command_lines(text):
    for line in text.splitlines():
        stripped = line.lstrip()
        assert not stripped.startswith("::") and not stripped.startswith("##["), line
    assert "\r" not in text and "\x1b" not in text and "\u202e" not in text


def test_gate_and_merge_lines_are_printable_whatever_the_report_holds(tmp_path, capsys):
    baseline = report([case("c1", "PASS"), case("c2", "PASS")], **BASE)
    candidate = report(
        [case("c1", "PASS"), case("c2", "MISMATCH", CRAFTED)],
        session={"complete": False, "incomplete_reasons": [CRAFTED]},
        **CAND,
    )
    assert _gate(tmp_path, baseline, candidate) == 1
    out, err = capsys.readouterr()
    assert "gate FAILED" in out and err == ""
    _no_command_lines(out)
    assert "\\r" in out and "\\x1b" in out and "\\n" in out
    shard = report([case("c1", "PASS")], session={"complete": False, "incomplete_reasons": [CRAFTED]}, **CAND)
    shard["shard"] = {"index": 1, "count": 1, "total_cases": 1, "total_ids_sha256": "0"}
    write(tmp_path / "s1.json", shard)
    assert main(["merge", str(tmp_path / "out.json"), str(tmp_path / "s1.json")]) == 1
    out, err = capsys.readouterr()
    assert "INCOMPLETE" in out + err
    _no_command_lines(out + err)


def test_a_replay_command_never_carries_an_option_from_the_report(tmp_path):
    from pytest_scaledmm.matrix.replay_command import replay_command
    from pytest_scaledmm.reports.compare import compare_reports
    from pytest_scaledmm.reports.render import render_html, render_markdown

    command = replay_command("--debug=FILE", "c1")
    assert " --debug" not in command and "./--debug=FILE" in command
    for crafted in ("--debug=x", "c1; touch y", "-k", "c1\nrm"):
        assert replay_command("/m/matrix.yaml", crafted).startswith("(no replay command")
    assert replay_command("/m/matrix.yaml", "c1", profile="--debug").startswith("(no replay command")
    candidate = report([case("c1", "PASS"), case("--debug=FILE", "MISMATCH", BAND)], matrix_path="--debug=FILE", **CAND)
    comparison = compare_reports(
        [(tmp_path / "b.json", report([case("c1", "PASS")], **BASE)), (tmp_path / "c.json", candidate)]
    )
    for text in (render_markdown(comparison), render_html(comparison, None, ["kernel"])):
        assert "pytest --debug" not in text and "--scaledmm-matrix --debug" not in text
        assert "--scaledmm-case --debug" not in text and "--scaledmm-case &#x27;--debug" not in text
        assert "no replay command" in text


def _artifact(tmp_path):
    """An unpacked CI artifact: a report naming a matrix beside it whose kernel module, imported,
    leaves a marker file."""
    art = tmp_path / "artifact"
    art.mkdir()
    marker = tmp_path / "imported"
    (art / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef mm(*a, **k):\n    raise RuntimeError('x')\n")
    (art / "matrix.yaml").write_text(matrix_text([planted("mine", "mm", module="evil")]))
    record = case(
        "mine-s0d_x_s1d-m16k32n16-bf16-inductor-000000", "COMPILE_ONLY_ERROR", "RuntimeError: x", kernel="mine"
    )
    data = report([record], matrix_path="matrix.yaml", **CAND)
    write(art / "report.json", data)
    return art, marker


def test_repro_imports_nothing_a_report_names_without_matrix(tmp_path, capsys, monkeypatch):
    art, marker = _artifact(tmp_path)
    monkeypatch.chdir(art)
    before = list(sys.path)
    assert main(["repro", "report.json", "--out", str(tmp_path / "out")]) == 0
    assert not marker.exists(), "the artifact's Python ran"
    assert sys.path == before
    scripts = list((tmp_path / "out").glob("repro_*.py"))
    assert scripts and "sys.path.insert(0" not in scripts[0].read_text()
    assert "--matrix" in capsys.readouterr().err
    # Confirmed with --matrix: its kernels are the user's to import, and the script appends their
    # directories after the standard ones.
    try:
        assert main(["repro", "report.json", "--out", str(tmp_path / "out2"), "--matrix", "matrix.yaml"]) == 0
    finally:
        sys.path[:] = before
        sys.modules.pop("evil", None)
    text = next((tmp_path / "out2").glob("repro_*.py")).read_text()
    assert "sys.path.append(repro_directory)" in text and "sys.path.insert(0" not in text
