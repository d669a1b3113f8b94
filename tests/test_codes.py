"""router.diagnostics.codes: every diagnostic code the router emits has a complete catalogue entry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from router.diagnostics.codes import CODES, render_code

ROUTER = Path(__file__).parent.parent / "router"


def _emitted_codes() -> list[str]:
    found: set[str] = set()
    for path in ROUTER.rglob("*.py"):
        found |= set(re.findall(r"\"(RT\d{3})\"", path.read_text(encoding="utf-8")))
    return sorted(found)


MISSING: dict[str, str] = {}


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(c, marks=[pytest.mark.xfail(strict=True, reason=MISSING[c])] if c in MISSING else [])
        for c in _emitted_codes()
    ],
)
def test_emitted_code_has_catalogue_entry(code: str) -> None:
    assert code in CODES


@pytest.mark.parametrize("code", sorted(CODES))
def test_catalogue_entry_has_what_why_example(code: str) -> None:
    info = CODES[code]
    assert re.fullmatch(r"RT[1-6]\d\d", info.code) and info.code == code
    assert (info.title and info.title[0].islower()) or info.title[0] == "`"
    assert info.what.strip() and info.why.strip() and info.example.strip()


@pytest.mark.parametrize("code", sorted(CODES))
def test_render_code_page_has_fixed_headings(code: str) -> None:
    page = render_code(CODES[code])
    assert page.startswith(f"## {code}: ")
    assert "**What it does.**" in page and "**Why it matters.**" in page and "**Example**" in page
    assert ("**Use instead.**" in page) is bool(CODES[code].instead)


def test_codes_grouped_by_stage() -> None:
    stages = {code[2] for code in CODES}
    assert stages == {"1", "2", "3", "4", "5", "6"}
    assert list(CODES) == sorted(CODES)
