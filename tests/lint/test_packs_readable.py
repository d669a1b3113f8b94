"""The built-in packs pass their own readability lint: linted as a user's file (where RT332 applies),
each has no warning at all, and no comprehension names a value with a `for x in [v]` stand-in."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from router.commands import lint as lint_command
from router.lint.readability import MAX_EXPRESSION, _file_expressions, expression_length
from router.load.paths import packs_dir
from router.load.source import read_source

PACKS = sorted(p for p in packs_dir().glob("*.yaml") if not p.name.endswith(".test.yaml"))


def parse(source: str) -> ast.Expression:
    """An expression, a placeholder with a format spec (`x:.2f`), a block form (`for x in xs`,
    `elif x`, `else`) or the inside of a dict literal (the lint scans a signal's `let:` for
    placeholders too, so `{'a': 1}` in a binding reads as the placeholder `'a': 1`)."""
    text = " ".join(source.split())
    if text in ("else", "end"):
        return ast.parse("None", mode="eval")
    for candidate in (text, text.rpartition(":")[0], f"[_ {text}]", text.partition(" ")[2], f"{{{text}}}"):
        try:
            return ast.parse(candidate, mode="eval")
        except SyntaxError:
            continue
    raise AssertionError(f"not an expression: {source!r}")


def stand_ins(source: str) -> list[str]:
    """The `for NAME in [one value]` clauses of an expression (a binding in disguise)."""
    return [ast.unparse(node).strip() for node in ast.walk(parse(source))
            if isinstance(node, ast.comprehension) and isinstance(node.iter, ast.List)
            and len(node.iter.elts) == 1]


def test_the_packs_are_the_shipped_ones() -> None:
    assert {p.stem for p in PACKS} >= {"cuttle", "decision", "deepseek", "default"}


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.stem)
def test_pack_lints_without_a_warning_as_a_users_file(pack: Path) -> None:
    code, out = lint_command.run([pack])
    assert (code, out) == (0, "Found 0 errors, 0 warnings."), out


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.stem)
def test_pack_expressions_are_short_and_name_values_with_let(pack: Path) -> None:
    data = read_source(pack).data
    expressions = list(_file_expressions(data))
    assert expressions or pack.stem == "default"
    long = [(path, expression_length(s)) for path, s in expressions if expression_length(s) > MAX_EXPRESSION]
    assert long == []
    found = [(path, clause) for path, source in expressions if path[-1] != "match"
             for clause in stand_ins(source)]
    assert found == []


def test_stand_in_finder_finds_one_and_skips_real_lists() -> None:
    assert stand_ins("[k + v for v in xs for k in [v[0]]]") == ["for k in [v[0]]"]
    assert stand_ins("[w for w in [a, b] if w]") == []
    assert stand_ins("{q: p for q in qs for p in [f(q)] if p}") == ["for p in [f(q)] if p"]
