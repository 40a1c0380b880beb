"""The README is the landing page and docs/ the reference: every page is in mkdocs.yml's nav and
linked from the README, and every relative link in either points at a file that is there (they
must work on GitHub too, where no site is built); the counts they state about the code (cases per
profile, tests per tier, outcome tiers) are the code's."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _nav_pages(nav) -> list:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _relative_links(text: str) -> list:
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # links in code blocks are code
    return [
        link.split("#")[0]
        for link in LINK.findall(prose)
        if not re.match(r"[a-z]+:", link) and not link.startswith("#")
    ]


def test_every_docs_page_is_in_the_nav_and_linked_from_the_readme():
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    readme_links = set(_relative_links((ROOT / "README.md").read_text(encoding="utf-8")))
    assert "index.md" in pages and "measured.md" in pages
    assert sorted(nav) == pages, "mkdocs.yml's nav and docs/*.md differ"
    missing = [page for page in pages if f"docs/{page}" not in readme_links]
    assert not missing, f"docs pages the README does not link to: {missing}"


def test_relative_links_in_the_readme_and_the_docs_point_at_files():
    broken = []
    for source in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for link in _relative_links(source.read_text(encoding="utf-8")):
            if link and not (source.parent / link).exists():
                broken.append(f"{source.relative_to(ROOT)}: {link}")
    assert not broken, broken


def _change_table() -> list[list[str]]:
    """The rows of docs/architecture.md's "Where a change goes": the backticked names of each."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("Where a change goes", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| change", "| ---"))]
    return [re.findall(r"`([^`]+)`", row.split("|")[2]) for row in rows]


def test_where_a_change_goes_names_files_and_names_that_exist():
    rows = _change_table()
    assert len(rows) >= 8, rows
    for names in rows:
        files = [n for n in names if n.endswith(".py")]
        assert files, names
        texts = []
        for name in files:
            path = ROOT / name if name.startswith("tests/") else ROOT / "pytest_scaledmm" / name
            assert path.is_file(), f"{name} is not a file"
            texts.append(path.read_text())
        for name in (n for n in names if not n.endswith(".py")):
            word = name.lstrip("@")
            assert any(re.search(rf"\b{re.escape(word)}\b", text) for text in texts), f"{name} is not in {files}"


# Figures the pages state about the code, checked against it: the cases of each shipped profile
# (from the matrix loader), the tests of each tier (from collection), the outcome tiers. Measured
# figures (times, what a run found) keep their date and versions and are not checked; a past
# profile's size is written as such ("the default profile of then (340 cases)"), which is no
# claim about the code now.
MATRICES = ("matrix.yaml", "matrices/torchao.yaml", "matrices/fp8_linear_h200.yaml")
PAGES = ("README.md", *sorted(f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")))


def _paragraphs(page: str) -> list[str]:
    """The page's paragraphs, list items and table rows, each on one line: a figure may be
    wrapped away from its profile."""
    parts = re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\|))", (ROOT / page).read_text(encoding="utf-8"))
    return [re.sub(r"\s+", " ", part) for part in parts]


def _profile_sizes() -> dict[str, dict[str, int]]:
    from pytest_scaledmm.matrix.spec import load_spec

    return {path: {name: p.cases for name, p in load_spec(ROOT / path).profiles.items()} for path in MATRICES}


def _matrix_of(page: str, paragraph: str) -> str:
    """The matrix a page's figure is about: the one its paragraph names, torchao's on its page,
    else the repository's own."""
    named = [path for path in MATRICES if path != "matrix.yaml" and path.split("/")[-1] in paragraph]
    return named[0] if named else "matrices/torchao.yaml" if page == "docs/torchao.md" else "matrix.yaml"


def _profile_figures() -> list[tuple[str, str, str, int, str]]:
    """(page, matrix, profile, stated cases, text) for each "<profile> [profile][,:( ]N cases"
    and for the README's main job (the default profile)."""
    sizes = _profile_sizes()
    names = sorted({name for profiles in sizes.values() for name in profiles}, key=len, reverse=True)
    stated = re.compile(rf"\b(?P<profile>{'|'.join(map(re.escape, names))})`?(?: profile)?[\s,:(`]*(?P<n>\d+) cases\b")
    found = []
    for page in PAGES:
        for paragraph in _paragraphs(page):
            matrix = _matrix_of(page, paragraph)
            for match in stated.finditer(paragraph):
                found.append((page, matrix, match["profile"], int(match["n"]), match[0]))
            for match in re.finditer(r"the main job takes [^:.]*: (?P<n>\d+) cases", paragraph):
                found.append((page, matrix, "default", int(match["n"]), match[0]))
    return found


def test_every_profile_size_the_pages_state_is_the_matrix_files():
    sizes = _profile_sizes()
    figures = _profile_figures()
    wrong = [
        f"{page}: {text!r}: {matrix}'s {profile} profile has {sizes[matrix].get(profile)} cases"
        for page, matrix, profile, n, text in figures
        if sizes[matrix].get(profile) != n
    ]
    assert not wrong, wrong
    # The figures the pages are known to state are among those read: a reworded one is not lost.
    seen = {(page, profile) for page, _, profile, _, _ in figures}
    assert {("README.md", "default"), ("docs/torchao.md", "default"), ("docs/torchao.md", "smoke")} <= seen
    assert {
        ("docs/measured.md", "default"),
        ("docs/measured.md", "smoke"),
        ("docs/torch-versions.md", "frontier"),
    } <= seen


def _collected_tiers() -> tuple[int, int]:
    """(default tier, slow tier): the tests `pytest -m slow --collect-only` selects and deselects."""
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "slow", "--collect-only", "-q", "-W", "ignore"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    slow, total, deselected = map(
        int, re.search(r"(\d+)/(\d+) tests collected \((\d+) deselected\)", done.stdout).groups()
    )
    assert slow + deselected == total
    return deselected, slow


def test_the_test_counts_the_pages_state_are_the_suites():
    default_tier, slow_tier = _collected_tiers()
    slow_figures, default_figures = [], []
    for page in PAGES:
        for paragraph in _paragraphs(page):
            slow_figures += [(page, int(n)) for n in re.findall(r"\b(\d+) tests marked `slow`", paragraph)]
            slow_figures += [(page, int(n)) for n in re.findall(r"\bslow tier \((\d+) tests\)", paragraph)]
            default_figures += [(page, int(n)) for n in re.findall(r"default tier: about (\d+) tests", paragraph)]
    assert ("README.md", slow_tier) in slow_figures and default_figures, (slow_figures, default_figures)
    assert [f for f in slow_figures if f[1] != slow_tier] == [], f"the slow tier holds {slow_tier} tests"
    # "about": within 5 % of the default tier.
    assert [f for f in default_figures if abs(f[1] - default_tier) > 0.05 * default_tier] == [], default_tier


def test_the_outcome_tiers_the_pages_state_are_the_outcome_tables():
    from pytest_scaledmm.verdict.outcome import TIERS

    words = {"three": 3, "four": 4, "five": 5, "six": 6}
    text = " ".join(_paragraphs("docs/outcomes.md"))
    sentence = re.search(r"Failures come in (\w+) severity tiers, worst first: (.*?)\. ", text)
    assert sentence, "docs/outcomes.md no longer states the tiers"
    assert words.get(sentence[1]) == len(TIERS), sentence[0]
    assert [int(n) for n in re.findall(r"\*\*(\d+)\*\*", sentence[2])] == [tier.number for tier in TIERS]


def _readme_block(after: str) -> str:
    """The README's first code block after the text `after`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"```\w*\n(.*?)```", text.split(after, 1)[1], re.S)[1]


def _gitignore_advice() -> set[str]:
    """The paths the README tells a project to ignore, or says are ignored: its sentence's names."""
    (paragraph,) = [p for p in _paragraphs("README.md") if "`.gitignore`" in p]
    return {name.rstrip("/") for name in re.findall(r"`([^`\s]+)/`", paragraph)}


def test_the_readmes_own_kernel_runs_with_the_checkouts_venv_and_writes_only_what_it_says(tmp_path):
    """The README's kernel and matrix in a project of their own, run with this checkout's venv as
    the README says: what the run writes into the project, and what a wheel build of the plugin
    (each tox env's install) writes into its checkout, is in the README's .gitignore advice."""
    from importlib import metadata

    if not [ep for ep in metadata.entry_points(group="pytest11") if ep.value == "pytest_scaledmm.plugin.entry"]:
        pytest.skip("pytest-scaledmm is not installed in this interpreter")
    assert "/path/to/this/checkout/.venv/bin/pytest --scaledmm-matrix -n auto" in _readme_block("the checkout's venv")
    advice = _gitignore_advice()
    project = tmp_path / "project"
    project.mkdir()
    (project / "mykernels.py").write_text(_readme_block("In\n`mykernels.py`"))
    (project / "matrix.yaml").write_text(_readme_block("beside it, `matrix.yaml`"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    done = subprocess.run(
        # Not the empty K (k0): torch._scaled_mm's CPU path may leave its output unwritten there.
        [sys.executable, "-m", "pytest", "--scaledmm-matrix", "-k", "aot_eager and fp16 and not k0", "-W", "ignore"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    written = {p.name for p in project.iterdir()} - {"mykernels.py", "matrix.yaml", "__pycache__"}
    assert written and written <= advice, (written, advice)
    assert {".tox", "reports"} <= advice  # tox's envs and the reports its tox.ini writes (scaledmm init)

    # A wheel built from the checkout, as pip builds one for each tox env's install.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (checkout / name).write_text((ROOT / name).read_text(encoding="utf-8"))
    (checkout / "pytest_scaledmm").mkdir()
    (checkout / "pytest_scaledmm" / "__init__.py").write_text("")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "wheels"),
            str(checkout),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    left = {p.name for p in checkout.iterdir()} - {"pyproject.toml", "README.md", "pytest_scaledmm"}
    assert left and left <= advice, (left, advice)
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "/build/" in ignored and "*.egg-info/" in ignored
