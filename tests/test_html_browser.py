"""The HTML matrix (`scaledmm compare --html`, and the page tox's report env writes) in a real
browser, Chromium from the system's packages driven by Playwright: it loads with no console error
and no request, every heatmap cell opens the panel of its cases, each copy button copies its
case's replay command as the report's data gives it, and a report whose every string holds
markup and script runs none of it.

Without Chromium (`chromium` on the PATH, or SCALEDMM_CHROMIUM) or the `playwright` package these
tests skip, saying which is missing; SCALEDMM_REQUIRE_BROWSER=1 (set by .ci/run) makes a missing
one a failure instead."""

from __future__ import annotations

import configparser
import importlib.util
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from reports_factory import DATA, case, report, write

from pytest_scaledmm.cli import main
from pytest_scaledmm.reports.cause_text import report_replay
from pytest_scaledmm.reports.compare import DEFAULT_GROUP_BY, compare_reports, groups, load_reports

REPO = DATA.parent.parent
CHROMIUM = os.environ.get("SCALEDMM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# What Chromium needs as root in a container, and nothing that reaches out on its own.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Ample: a page of a few KiB acts in milliseconds; this only bounds a hang on a loaded machine.
WAIT_MS = 60_000


def _missing(chromium: str = CHROMIUM, package: str = "playwright") -> str | None:
    """What these tests lack to run, or None."""
    if importlib.util.find_spec(package) is None:
        return f'the {package} package is not installed (pip install -e ".[browser]")'
    if not os.access(chromium, os.X_OK):
        return f"no Chromium at {chromium} (apt-get install chromium, or SCALEDMM_CHROMIUM=PATH)"
    return None


def _without_browser(missing: str) -> NoReturn:
    """Skip, saying what is missing; where SCALEDMM_REQUIRE_BROWSER=1 (.ci/run), fail instead."""
    if os.environ.get("SCALEDMM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"SCALEDMM_REQUIRE_BROWSER=1, but {missing}", pytrace=False)
    pytest.skip(f"browser tests: {missing}")


@pytest.fixture(scope="module")
def browser():
    missing = _missing()
    if missing:
        _without_browser(missing)
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 (optional: skipped above without it)

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def test_without_a_browser_the_tests_skip_here_and_fail_where_required(tmp_path, monkeypatch):
    # pytest stands in for playwright, which the README's test command does not install.
    nowhere = str(tmp_path / "chromium")
    assert (
        _missing(nowhere, package="pytest")
        == f"no Chromium at {nowhere} (apt-get install chromium, or SCALEDMM_CHROMIUM=PATH)"
    )
    assert _missing(package="scaledmm_no_such_package").startswith("the scaledmm_no_such_package package is not")
    monkeypatch.delenv("SCALEDMM_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"^browser tests: no Chromium at {nowhere} "):
        _without_browser(_missing(nowhere, package="pytest"))
    monkeypatch.setenv("SCALEDMM_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match=f"^SCALEDMM_REQUIRE_BROWSER=1, but no Chromium at {nowhere} "):
        _without_browser(_missing(nowhere, package="pytest"))


@dataclass
class Visit:
    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def foreign_requests(self) -> list[str]:
        """Requests for anything but the page itself (or a data: URL)."""
        return [u for u in self.requests if u.partition("#")[0] != self.url and not u.startswith("data:")]


@pytest.fixture
def visit(browser):
    """Open a file in a fresh context (its own clipboard permissions, no state), recording every
    request and every console error and uncaught exception; a request for anything but the page
    is recorded and aborted, so nothing leaves the machine."""
    contexts = []

    def open_page(path: Path, init_script: str | None = None) -> Visit:
        context = browser.new_context()
        contexts.append(context)
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        seen = Visit(page=None, url=path.resolve().as_uri())

        def route(r):
            own = r.request.url.partition("#")[0] == seen.url or r.request.url.startswith("data:")
            return r.continue_() if own else r.abort()

        context.route("**/*", route)
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.on("request", lambda request: seen.requests.append(request.url))
        page.on("console", lambda msg: seen.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
        page.on("pageerror", lambda exc: seen.errors.append(f"uncaught: {exc}"))
        page.goto(seen.url, wait_until="load")
        seen.page = page
        return seen

    yield open_page
    for context in contexts:
        context.close()


def assert_clean(seen: Visit) -> None:
    assert seen.errors == []
    assert seen.foreign_requests() == []
    assert seen.page.evaluate("window.__pwned") is None


def assert_strict_policy(page) -> None:
    """The page's Content-Security-Policy (a meta, the page being a file) loads nothing and runs
    only scripts named by hash: no inline or injected script, no eval."""
    policies = page.eval_on_selector_all(
        'meta[http-equiv="Content-Security-Policy" i]', "metas => metas.map(m => m.content)"
    )
    assert len(policies) == 1, policies
    directives = {}
    for part in policies[0].split(";"):
        name, *values = part.split()
        directives[name.lower()] = values
    assert directives["default-src"] == ["'none'"], directives
    script = directives.get("script-src", directives["default-src"])
    assert script and all(v.startswith("'sha256-") for v in script), script
    for fetching in ("connect-src", "img-src", "font-src", "frame-src", "media-src", "object-src", "child-src"):
        assert directives.get(fetching, ["'none'"]) == ["'none'"], (fetching, directives)


# Each heatmap cell as the page shows it: its row's group, its column's environment, its panel.
CELLS_JS = """() => [...document.querySelectorAll("table.heatmap td.cell")].map(td => ({
  group: td.parentElement.querySelector("td.group").firstChild.textContent.trim(),
  env: td.closest("table").rows[0].cells[td.cellIndex].textContent.trim(),
  panel: td.querySelector(".bar[data-panel]") ? td.querySelector(".bar[data-panel]").dataset.panel : null,
}))"""


def expected_cells(paths, group_by=DEFAULT_GROUP_BY):
    """From the reports the page was built from: (group, environment) -> the ids of that group's
    cases that environment recorded; and each environment's replay command of a case."""
    comparison = compare_reports(load_reports(paths))
    cells = {}
    for label, ids in groups(comparison, group_by):
        for index, column in enumerate(comparison.columns):
            cells[(label, column.label)] = sorted(cid for cid in ids if comparison.grid[cid][index] is not None)
    columns = {c.label: c for c in comparison.columns}

    def replay(env: str, cid: str) -> str:
        return report_replay(columns[env].matrix, cid, None, columns[env].environment)

    return cells, replay


def click_every_cell(seen: Visit, paths) -> int:
    """Click each cell: its panel, alone, becomes visible, titled by the cell and listing exactly
    its cases; each copy button in it puts that case's replay command on the clipboard. Returns
    how many commands were copied."""
    page = seen.page
    cells, replay = expected_cells(paths)
    shown = page.evaluate(CELLS_JS)
    assert {(c["group"], c["env"]) for c in shown} == set(cells)
    assert len(shown) == len(cells)
    copied = 0
    for cell in shown:
        ids = cells[(cell["group"], cell["env"])]
        if not ids:
            assert cell["panel"] is None, cell  # a group the environment did not record: nothing opens
            continue
        assert cell["panel"] is not None, cell
        page.locator(f'.bar[data-panel="{cell["panel"]}"]').click()
        panel = page.locator(f"#{cell['panel']}")
        panel.wait_for(state="visible")
        assert page.locator(".panel:visible").count() == 1
        assert panel.locator("h3").inner_text() == f"{cell['group']} · {cell['env']}"
        assert sorted(panel.locator(".cid").all_text_contents()) == ids
        for entry in panel.locator(".case").all():
            cid = entry.locator(".cid").text_content()
            command = replay(cell["env"], cid)
            assert entry.locator(".replay code").text_content() == command
            button = entry.locator("button.copy")
            button.click()
            page.wait_for_function("b => b.textContent === 'copied'", arg=button.element_handle(), timeout=WAIT_MS)
            assert page.evaluate("navigator.clipboard.readText()") == command
            copied += 1
    return copied


def _known(cid, outcome, signature, link):
    record = case(cid, outcome, signature)
    record["known_failure"] = {"signature": "RuntimeError", "link": link, "original_outcome": "COMPILE_ONLY_ERROR"}
    return record


def three_releases(tmp_path) -> list[Path]:
    """Reports of three torch releases: a regression, a fix, a known failure with a link, a case
    one release lacks and a kernel group another lacks (cells with nothing to open)."""
    old = [
        case("a1", "PASS"),
        case("a2", "MISMATCH", "MISMATCH: max_abs 3.0"),
        case("a3", "PASS", mode="eager"),
        case("i1", "PASS", kernel="int8_mm", dtype_a="int8", dtype_b="int8"),
    ]
    mid = [
        case("a1", "PASS"),
        case("a2", "PASS"),
        case("a3", "UNSUPPORTED", "NotImplementedError: rowwise", mode="eager"),
        case("a4", "PASS"),
    ]
    new = [
        case("a1", "COMPILE_ONLY_ERROR", "LoweringException: AssertionError"),
        case("a2", "PASS"),
        _known("a3", "XFAIL", "RuntimeError: x", "https://github.com/pytorch/pytorch/issues/1?a=1&b=2"),
        case("a4", "PASS"),
        case(
            "i1",
            "ERROR_PARITY",
            "eager ValueError <> compiled RuntimeError",
            kernel="int8_mm",
            dtype_a="int8",
            dtype_b="int8",
        ),
    ]
    return [
        write(
            tmp_path / f"{name}.json", report(cases, torch=torch, tox_env=name, matrix_path="/src/my proj/matrix.yaml")
        )
        for name, torch, cases in (
            ("torch211", "2.11.0", old),
            ("torch212", "2.12.0", mid),
            ("torch213", "2.13.0", new),
        )
    ]


def test_compare_page_opens_every_cell_and_copies_each_replay_command(tmp_path, visit):
    paths = three_releases(tmp_path)
    page_path = tmp_path / "matrix.html"
    assert main(["compare", *map(str, paths), "--html", str(page_path)]) == 0
    seen = visit(page_path)
    assert_strict_policy(seen.page)
    copied = click_every_cell(seen, paths)
    assert copied == 4 + 4 + 5  # every recorded case of every environment
    panels = [c["panel"] for c in seen.page.evaluate(CELLS_JS) if c["panel"]]
    # Enter on a focused cell opens it, as a click does; and a link to one cell opens it.
    seen.page.locator(f'.bar[data-panel="{panels[0]}"]').press("Enter")
    seen.page.locator(f"#{panels[0]}").wait_for(state="visible")
    assert seen.page.url.endswith(f"#cell={panels[0]}")
    seen.page.goto(f"{seen.url}#cell={panels[-1]}")
    seen.page.reload(wait_until="load")
    seen.page.locator(f"#{panels[-1]}").wait_for(state="visible")
    assert_clean(seen)


def _report_env_command(toxinidir: Path) -> list[str]:
    """tox.ini's report env command, as tox would run it from `toxinidir` (no posargs)."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    line = tox["testenv:report"]["commands"].replace("\\\n", " ").strip()
    line = line.replace("{toxinidir}", str(toxinidir)).replace("{/}", "/").replace("{posargs}", "")
    words = shlex.split(line)
    assert words[:3] == ["python", "-m", "pytest_scaledmm"], words
    return words[3:]


def test_the_report_envs_page_opens_every_cell(tmp_path, visit):
    reports = tmp_path / "reports"
    reports.mkdir()
    # Reports of two real runs, named as the tox envs name them.
    for env, name in (("torch23", "cpu-torch23.json"), ("torch213", "cpu-torch213.json")):
        shutil.copy(DATA / name, reports / f"{env}.json")
    assert main(_report_env_command(tmp_path)) == 0
    seen = visit(reports / "matrix.html")
    assert_strict_policy(seen.page)
    assert click_every_cell(seen, [reports]) == 12
    assert_clean(seen)


# Ways out of text, an attribute, a script or a comment, and links that run script; if any of it
# ever ran, window.__pwned would be set, and the images and frames would request "x".
PAYLOAD = (
    "javascript:window.__pwned=1//"
    "\" onmouseover=\"window.__pwned=1\" x=\"' onmouseover='window.__pwned=1' x='"
    "<img src=x onerror=window.__pwned=1>"
    "</script><script>window.__pwned=1</script>"
    "<svg onload=window.__pwned=1></svg><iframe src=x></iframe><a href=javascript:window.__pwned=1>a</a>"
    "<style>*{background:url(x)}</style></textarea></title><!-- ]]> {{ 7*7 }} &lt;b&gt;"
)
# An http(s) link (so it is linked) that tries to leave its attribute.
LINK = 'https://example.invalid/"onmouseover="window.__pwned=1"<img/src=x/onerror=window.__pwned=1>'


def _marked(value):
    """`value` with every string in it as PAYLOAD followed by the string: what was one value stays
    one value (a case group, an id), and what was a link starts with `javascript:`."""
    if isinstance(value, str):
        return f"{PAYLOAD} {value}"
    if isinstance(value, list):
        return [_marked(v) for v in value]
    if isinstance(value, dict):
        return {k: _marked(v) for k, v in value.items()}
    return value


def _full(cid, outcome, choice):
    """A record with every field a case can have, every string in it marked; but the id when it
    is `c…` (a valid id: its replay command is a real one, built of marked values), and the outcome
    (a report holds class names only: one this version does not know is shown as it is)."""
    record = case(cid, outcome, f"RuntimeError: {cid}")
    error = {"type": "E", "message": "m", "root_type": "R", "layer": "inductor", "root_message": "r", "source": "s"}
    check = {"ok": outcome == "PASS", "ratio": 2.0, "max_abs": 1.0, "max_rel": 1.0, "problem": "p", "where": "w"}
    known = {"entry": 0, "signature": "s", "torch": ">=2", "link": "l", "reason": "r", "original_outcome": "MISMATCH"}
    record.update(
        root_cause=f"root {cid}",
        met="met",
        layer="inductor",
        detail="detail",
        eager_error=dict(error),
        compiled_error=dict(error),
        errors={"eager": {**check, "bound": {"slack": 1.0, "model": "m"}}, "compiled": dict(check)},
        timing={"eager_s": 0.1},
        extra={"kernel_choice": {"label": choice, "kernels": [choice]}, "note": "n"},
        known_failure=known,
        known_failure_missed=[dict(known)],
        triage={"layer": "l", "quantized_path": True, "workarounds": [{"knob": "k", "rung": "r"}]},
        model={
            "purpose": "p",
            "expected_refusal": "e",
            "mismatch": False,
            "refusal": "r",
            "explained": "x",
            "detail": "d",
        },
    )
    keep = {"outcome", "id"} if cid.startswith("c") else {"outcome"}
    marked = {k: v if k in keep else _marked(v) for k, v in record.items()}
    # What a class was before the catalogue is a class name too: a report of another is refused.
    for entry in (marked["known_failure"], *marked["known_failure_missed"]):
        entry["original_outcome"] = "MISMATCH"
    return marked


def crafted(outcomes: dict, choice: str, profile: str | None, **env) -> dict:
    """A report of `outcomes` (id -> class) whose every string field is marked, the matrix's
    profile too unless given (a marked profile gives no replay command at all)."""
    cases = [_full(cid, outcome, choice) for cid, outcome in outcomes.items()]
    cases[0]["known_failure"]["link"] = LINK
    data = report(cases, **env)
    for block in ("environment", "matrix"):
        data[block] = _marked(data[block])
    data["session"]["incomplete_reasons"] = [_marked("stopped")]
    data["session"]["complete"] = False
    data["signatures"] = _marked(data["signatures"])
    if profile:
        data["matrix"]["profile"] = profile
    return data


def test_a_report_of_markup_and_script_runs_none_of_it(tmp_path, visit):
    before = crafted({"c1": "PASS", "c2": "PASS", "x3": "MISMATCH", "x4": "PASS", "x5": "XFAIL"}, "triton", None)
    after = crafted(
        {"c1": "MISMATCH", "c2": "PASS", "x3": "PASS", "x4": "COMPILE_ONLY_ERROR", "x6": "NEW_CLASS"},
        "aten",
        "smoke",
    )
    paths = [write(tmp_path / "before.json", before), write(tmp_path / "after.json", after)]
    page_path = tmp_path / "matrix.html"
    assert main(["compare", *map(str, paths), "--html", str(page_path)]) == 0
    seen = visit(page_path)
    page = seen.page
    assert_strict_policy(page)
    # The marked text is on the page, as text: only the page's own script, no element from report
    # text, no handler attribute; the one link is the report's http(s) link, whole.
    assert page.locator("text=onerror=window.__pwned=1").count() > 0
    assert page.locator("script").count() == 1
    assert page.locator("img, iframe, svg, object, embed, textarea, body style").count() == 0
    handlers = page.evaluate(
        """() => [...document.querySelectorAll("*")].flatMap(el =>
            [...el.attributes].filter(a => a.name.toLowerCase().startsWith("on")).map(a => el.tagName + " " + a.name))"""
    )
    assert handlers == []
    hrefs = page.eval_on_selector_all("a", "links => links.map(a => a.getAttribute('href'))")
    assert hrefs and set(hrefs) == {LINK}
    assert seen.errors == []
    # c1 and c2 have real replay commands, holding the marked matrix path.
    assert click_every_cell(seen, paths) == 10
    commands = page.locator(".replay code").all_text_contents()
    assert any("<img src=x onerror=window.__pwned=1>" in c and ("::c1'" in c or "::c2'" in c) for c in commands)
    # Everything a pointer or the keyboard can do to each element, and a click on each button.
    page.evaluate(
        """() => { for (const el of document.querySelectorAll("body *")) {
            for (const type of ["mouseover", "mouseenter", "mousemove", "mouseout", "focus", "focusin", "keydown"])
                el.dispatchEvent(new Event(type, {bubbles: true}));
            if (el.focus) el.focus();
        } }"""
    )
    for button in page.locator("button").all():
        if button.is_visible():
            button.click()
    assert_clean(seen)
    assert not any(u.partition("#")[0].endswith("/x") for u in seen.requests)


def test_copy_selects_the_command_when_the_clipboard_refuses(tmp_path, visit):
    paths = three_releases(tmp_path)
    page_path = tmp_path / "matrix.html"
    assert main(["compare", *map(str, paths), "--html", str(page_path)]) == 0
    refuse = "navigator.clipboard.writeText = () => Promise.reject(new DOMException('denied', 'NotAllowedError'));"
    seen = visit(page_path, init_script=refuse)
    page = seen.page
    page.locator(".bar[data-panel]").first.click()
    entry = page.locator(".panel:visible .case").first
    button = entry.locator("button.copy")
    button.click()
    page.wait_for_function("b => b.textContent !== 'copy'", arg=button.element_handle(), timeout=WAIT_MS)
    assert button.text_content() != "copied"
    assert page.evaluate("String(window.getSelection())") == entry.locator(".replay code").text_content()
    assert_clean(seen)
