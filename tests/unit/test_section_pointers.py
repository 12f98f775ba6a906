"""Pointers such as `docs/operator-guide.md "Events"` or `README, "Retries"` in code, the
template and the docs name a section that exists (help texts and alarm descriptions sent readers
to sections that had been renamed or never were)."""

from __future__ import annotations

import re
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
SEARCHED = ("template.yaml", "Makefile", "layers", "localrun", "clients", "functions", "docs", "tests")
SUFFIXES = frozenset({".py", ".yaml", ".yml", ".md", ".toml", ""})
# README or a docs page, an optional comma, then the section's title in double quotes.
POINTER = re.compile(r'(?P<doc>README|(?:docs/)?[\w-]+\.md),? "(?P<section>[^"\n]+)"')


def files() -> list[Path]:
    found: list[Path] = []
    for name in SEARCHED:
        root = PROJECT / name
        candidates = [root] if root.is_file() else root.rglob("*")
        found += [
            path
            for path in candidates
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts
        ]
    return found


def target(source: Path, doc: str) -> Path:
    """README: the nearest one up from the source (a package's own README before the project's)."""
    if doc in ("README", "README.md"):
        for folder in source.parents:
            if (folder / "README.md").is_file():
                return folder / "README.md"
            if folder == PROJECT:
                break
        return PROJECT / "README.md"
    return PROJECT / doc if doc.startswith("docs/") else PROJECT / "docs" / doc


def headings(page: Path) -> set[str]:
    return {
        match.group(1).strip()
        for match in re.finditer(r"^#{1,6} +(.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
    }


def pointers() -> list[tuple[Path, str, str]]:
    return [
        (path, match.group("doc"), match.group("section"))
        for path in files()
        if path != Path(__file__).resolve()
        for match in POINTER.finditer(path.read_text(encoding="utf-8", errors="replace"))
    ]


def test_each_pointer_to_a_section_names_one_that_exists():
    found = pointers()
    # The pointers this test exists for are among those it reads
    assert any(doc == "docs/operator-guide.md" and section == "Events" for _, doc, section in found)
    broken = [
        f"{path.relative_to(PROJECT)}: {doc} {section!r}"
        for path, doc, section in found
        if not target(path, doc).is_file() or section not in headings(target(path, doc))
    ]
    assert broken == []


def test_a_pointer_to_a_section_that_does_not_exist_is_found(tmp_path):
    page = tmp_path / "guide.md"
    page.write_text("# Guide\n\n## Events\n", encoding="utf-8")
    assert headings(page) == {"Guide", "Events"}
    assert "Operating" not in headings(page)
    (match,) = POINTER.finditer('see README "Operating".')
    assert (match.group("doc"), match.group("section")) == ("README", "Operating")
