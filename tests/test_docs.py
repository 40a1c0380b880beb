"""The README is the landing page and docs/ the reference: every page is in mkdocs.yml's nav and
linked from the README, and every relative link in either points at a file that is there (they
must work on GitHub too, where no site is built)."""

import re
from pathlib import Path

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
