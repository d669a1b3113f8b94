"""The shortcuts the lint's speed-up took (docs/performance.md, "the lint") agree with what they
replaced, on generated input: the brace scan of `placeholders`, the constant shortcuts in front of
`ast.literal_eval`, and ruamel's implicit-tag table read once per C loader."""

from __future__ import annotations

import ast

from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from router.lang.expr.syntax import _literal
from router.lang.functions import NOT_LITERAL
from router.lint.readability import placeholders
from router.load.source import parse_source
from router.load.yaml_data import _safe_yaml


def placeholders_by_characters(text: str) -> list[str]:
    """The scan as it was: one character at a time."""
    found, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if depth == 0 and text.startswith(("{{", "}}"), i):
            i += 2
            continue
        if text[i] == "{":
            depth += 1
            start = i + 1 if depth == 1 else start
        elif text[i] == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start:i])
        i += 1
    return found


@given(st.text(alphabet="{}ab \n", max_size=40))
def test_placeholders_match_the_character_scan(text: str) -> None:
    assert placeholders(text) == placeholders_by_characters(text)


ARGUMENTS = st.sampled_from([
    "1", "'a'", "None", "True", "-1", "1.5", "[1, 2]", "[1, x]", "['a', None]", "[]", "(1, 2)", "{'a': 1}",
    "{1, 2}", "x", "x.y", "x[0]", "a < b", "a and b", "a if b else c", "f'{x}'", "-x", "1 + 2", "[[1]]",
    "b'x'", "1j", "[-1]", "not x",
])


@given(ARGUMENTS)
def test_literal_is_what_literal_eval_says(source: str) -> None:
    node = ast.parse(source, mode="eval").body
    try:
        expected = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        expected = NOT_LITERAL
    assert _literal(node) == expected


SCALARS = st.sampled_from(["yes", "no", "on", "off", "true", "1", "0o17", "017", "1_000", "0x1F", "1e3", "~",
                           "null", ".inf", "2024-01-01", "'yes'", "'-'", "12:30", "=", "0b101", "+1"])


def tags(yaml: YAML, text: str) -> list[tuple[str, str]]:
    """(tag, value) of each scalar in the composed document."""
    found, stack = [], [yaml.compose(text)]
    while stack:
        node = stack.pop()
        if isinstance(node.value, list):
            stack.extend(i for pair in node.value for i in (pair if isinstance(pair, tuple) else (pair,)))
        else:
            found.append((node.tag, node.value))
    return found


HEADS = st.sampled_from(["", "%YAML 1.1\n---\n", "%YAML 1.2\n---\n"])


@given(st.lists(SCALARS, min_size=1, max_size=6), HEADS)
def test_scalars_get_the_tags_ruamel_s_own_safe_loader_gives(values: list[str], head: str) -> None:
    """The loader parse_source uses reads the table of implicit tags once; every scalar's tag, in
    YAML 1.1 and 1.2 documents, is the one a fresh `YAML(typ="safe")` resolves."""
    text = head + "".join(f"k{i}: {value}\n" for i, value in enumerate(values))
    assert tags(_safe_yaml(), text) == tags(YAML(typ="safe"), text)
    assert parse_source(text, "t.yaml").data is not None
