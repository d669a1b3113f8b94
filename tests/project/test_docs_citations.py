"""Shipped text cites only what ships: no background documents of the development machine.

Those documents (the original extensions' specifications and notes about Pi) are not part of
the project, so a user or maintainer who reads a citation of one cannot follow it. Checked in
every text file under the shipped directories: section signs with a number, numbered seeds,
`seeds/` and the background notes by name, absolute paths of a development machine, and links
to `docs/…` or `reference/…` pages or `*.md` files that do not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = ["README.md", "pyproject.toml", ".ci", "bench", "docs", "examples", "router", "rules", "schema",
           "tests"]
TEXT_SUFFIXES = {".md", ".py", ".ts", ".mjs", ".yaml", ".yml", ".json", ".toml", ".txt", ""}
SKIPPED_PARTS = {"__pycache__", "node_modules", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
THIS_FILE = Path(__file__).resolve()

FORBIDDEN = [
    (re.compile(r"§\s?\d"), "a section number of a document that does not ship"),
    (re.compile(r"\bseeds?\s?0\d\d\b", re.I), "a numbered seed (the specifications do not ship)"),
    (re.compile(r"\bseeds/"), "the seeds directory (it does not ship)"),
    (re.compile(r"seed-behaviours|\bpi-api\.md|\bpi-classify\.md"), "a background note (it does not ship)"),
    (re.compile(r"(?<![\w.~-])/(?:work|root|Users)/"), "an absolute path of a development machine"),
]
DOC_LINK = re.compile(r"(?<![\w/.-])((?:docs/)?reference/[\w.-]+\.md|docs/[\w/.-]+\.md)")
MARKDOWN_NAME = re.compile(r"(?<![\w/.-])([A-Za-z][\w-]*\.md)\b")
# Files of Pi itself (and of other coding agents) that the bridge and the docs name: Pi gates some
# in a project's .pi/; a project policy never writes any of them (docs/security.md, "Confinement").
PI_FILES = {"SYSTEM.md", "APPEND_SYSTEM.md", "AGENTS.md", "AGENTS.override.md", "CLAUDE.md", "SKILL.md"}


def shipped_files() -> list[Path]:
    files: list[Path] = []
    for name in SHIPPED:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*"))
        files += [path for path in candidates
                  if path.is_file() and path.suffix in TEXT_SUFFIXES and path.resolve() != THIS_FILE
                  and not SKIPPED_PARTS.intersection(path.relative_to(ROOT).parts)]
    return files


def markdown_names() -> set[str]:
    return {path.name for path in shipped_files() if path.suffix == ".md"} | PI_FILES


def citations(path: Path, text: str, known_md: set[str]) -> list[str]:
    """Every citation of something that does not ship, as `file:line: what (the text)`."""
    found: list[str] = []
    where = path.relative_to(ROOT)
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, what in FORBIDDEN:
            if match := pattern.search(line):
                found.append(f"{where}:{number}: {what}: {match.group(0)!r}")
        for link in DOC_LINK.findall(line):
            target = ROOT / link if link.startswith("docs/") else ROOT / "docs" / link
            if not target.is_file():
                found.append(f"{where}:{number}: a page that does not exist: {link!r}")
        for name in MARKDOWN_NAME.findall(line):
            if name not in known_md:
                found.append(f"{where}:{number}: a Markdown file that does not ship: {name!r}")
    return found


def test_shipped_text_cites_only_what_ships() -> None:
    known_md = markdown_names()
    found = [hit for path in shipped_files()
             for hit in citations(path, path.read_text(encoding="utf-8", errors="replace"), known_md)]
    assert not found, "\n".join(found)


def test_the_scan_covers_the_shipped_text() -> None:
    names = {str(path.relative_to(ROOT)) for path in shipped_files()}
    assert {"README.md", "docs/guide.md", "rules/decision.test.yaml", "router/commands/cli.py",
            "router/bridge/index.mjs", "tests/project/test_readme.py"} <= names
    assert "tests/project/test_docs_citations.py" not in names


@pytest.mark.parametrize("line", [
    "# checks §87 of the notes", "name: \"§1 the provider is ignored\"", "see seed 000 for it",
    "(seeds/002_x.txt)", "reference/seed-behaviours.md", "facts in pi-api.md", "cwd: /work/p",
    "HOME=/root/x", "/Users/me/project", "see docs/functions.md", "[x](reference/events.md)",
    "docs: rpc-commands.md",
])
def test_a_citation_is_found(line: str) -> None:
    assert citations(ROOT / "x.md", line, markdown_names()), line


@pytest.mark.parametrize("line", [
    "cwd: /home/user/project", "see docs/events.md and [codes](reference/codes.md)",
    "docs/reference/actions.md", "rules/skills/pi-decision-router/SKILL.md", "~/work/notes",
    "a seed of 3 items", "SYSTEM.md and APPEND_SYSTEM.md are Pi's", "https://example.invalid/work/x",
])
def test_a_shipped_reference_is_fine(line: str) -> None:
    assert citations(ROOT / "x.md", line, markdown_names()) == [], line
