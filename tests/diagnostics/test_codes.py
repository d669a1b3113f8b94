"""router.diagnostics.codes: every diagnostic code the router emits has a complete catalogue entry."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from router.diagnostics import code_names
from router.diagnostics.codes import CODES, render_code

ROUTER = Path(__file__).parent.parent.parent / "router"
CATALOGUE = ROUTER / "diagnostics" / "codes.py"


def _emitted_codes() -> list[str]:
    """The codes router/ names: the constants its modules import, and any literal code left."""
    found: set[str] = set()
    for path in ROUTER.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if path != CATALOGUE:
            found |= set(re.findall(r"[\"'](RT\d{3})[\"']", source))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module == "router.diagnostics.code_names":
                found |= {getattr(code_names, alias.name) for alias in node.names}
    return sorted(found)


def _constants() -> dict[str, str]:
    """name -> code, as code_names.py defines them."""
    return {name: value for name, value in vars(code_names).items()
            if name.isupper() and isinstance(value, str)}


def test_every_catalogued_code_has_one_named_constant() -> None:
    constants = _constants()
    assert sorted(constants.values()) == sorted(CODES)  # one each, none without an entry
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]+", name) for name in constants)


def test_each_constant_is_commented_with_its_title() -> None:
    lines = (ROUTER / "diagnostics" / "code_names.py").read_text(encoding="utf-8").splitlines()
    commented = dict(re.findall(r'^[A-Z][A-Z0-9_]* = "(RT\d{3})"  # (.*)$', "\n".join(lines), re.M))
    assert commented == {code: info.title for code, info in CODES.items()}


def test_the_scan_finds_the_codes_modules_import() -> None:
    assert {"RT205", "RT404", "RT502", "RT607"} <= set(_emitted_codes())


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
