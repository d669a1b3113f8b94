"""router.lang.query.query and router.lang.query.closures: JMESPath `match` compiled once to closures."""

from __future__ import annotations

from typing import Any

import jmespath
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from router.diagnostics.errors import ExpressionError
from router.lang.expr.syntax import ExpressionSyntaxError
from router.lang.query.query import _OPTIONS, compile_query
from tests.helpers import same_value


def refused(source: str) -> ExpressionSyntaxError:
    with pytest.raises(ExpressionSyntaxError) as info:
        compile_query(source)
    return info.value


@pytest.mark.parametrize(
    ("source", "offset"),
    [
        ("text ==", 7),
        ("foo[", 4),
        ("a ||", 4),
        ("a.", 2),
        ("&& b", 0),
        ("foo[?bar", 8),
    ],
)
def test_compile_query_syntax_error_rt201_with_offset(source: str, offset: int) -> None:
    error = refused(source)
    assert error.code == "RT201" and error.offset == offset
    assert error.message.startswith("invalid JMESPath")


@pytest.mark.parametrize("source", ["", "   ", "'unterminated", "a ^ b", "foo.[", '"\\q"'])
def test_compile_query_invalid_rt201(source: str) -> None:
    assert refused(source).code == "RT201"


def test_compile_query_deep_nesting_rt201_not_recursion_error() -> None:
    assert refused("(" * 3000 + "a" + ")" * 3000).code == "RT201"


def test_compile_query_literal_regex_checked_at_load_rt210() -> None:
    assert refused("regex(text, '(unclosed')").code == "RT210"


@pytest.mark.parametrize(
    ("source", "paths"),
    [
        ("text == 'x'", [("text",)]),
        ("tool.name == 'bash' && contains(tools.active, 'bash')", [("tool", "name"), ("tools", "active")]),
        ("items[*].name", [("items",)]),
        ("foo[?bar == 'x']", [("foo",)]),
        ("a | b", [("a",)]),
        ("[a, b.c]", [("a",), ("b", "c")]),
        ("{k: a}", [("a",)]),
        ("!x", [("x",)]),
        ("@", []),
        ("length(@) > `1`", []),
        ("items[0].name", [("items",)]),
        ("`1` == `1`", []),
    ],
)
def test_query_paths_root_anchored(source: str, paths: list[tuple[str, ...]]) -> None:
    assert list(compile_query(source).paths) == paths


def test_query_paths_three_part_chain_flattened_by_jmespath() -> None:
    assert compile_query("model.cost.input > `1`").paths == (("model", "cost", "input"),)
    assert compile_query("a.b.c.d").paths == (("a", "b", "c", "d"),)


def test_query_paths_field_chain_before_function() -> None:
    assert compile_query("a.b.c.lower(@)").paths == (("a", "b", "c"),)


def test_query_calls_record_name_and_arity() -> None:
    query = compile_query("lower(text) == 'x' && contains(tools.all, 'bash') && not_null(a, b, c)")
    assert sorted(query.calls) == [("contains", 2), ("lower", 1), ("not_null", 3)]


def test_query_literal_args_keep_the_pattern() -> None:
    query = compile_query("regex(text, '(a+)+', 'i')")
    assert ("regex", (None, "(a+)+", "i")) in query.literal_args


@pytest.mark.parametrize(
    ("source", "parts"),
    [
        ("a && b", ["a", "b"]),
        ("a == 'x && y' && b", ["a == 'x && y'", "b"]),
        ('a == `"&&"` && b', ['a == `"&&"`', "b"]),
        ("a[?x && y] && b", ["a[?x && y]", "b"]),
        ("(a && b) && c", ["(a && b)", "c"]),
        ("a == 'it\\'s && so' && b", ["a == 'it\\'s && so'", "b"]),
        ("a || b && c", ["a || b", "c"]),
        ('a == "x && y" && b', ['a == "x && y"', "b"]),
    ],
)
def test_query_conjuncts_split_top_level_respecting_quotes(source: str, parts: list[str]) -> None:
    assert [q.source for q in compile_query(source).conjuncts()] == parts


def test_query_conjuncts_single_is_itself() -> None:
    query = compile_query("a || b")
    assert query.conjuncts() == [query]


@pytest.mark.parametrize(
    ("source", "data", "expected"),
    [
        ("text == 'hi'", {"text": "hi"}, True),
        ("a.b", {"a": "str"}, None),
        ("a[0]", {"a": "str"}, None),
        ("a[-1]", {"a": [1, 2]}, 2),
        ("a[5]", {"a": [1, 2]}, None),
        ("a | [0]", {"a": [1]}, 1),
        ("`true` == `1`", {}, False),
        ("`0` == `false`", {}, False),
        ("!a", {"a": 0}, False),
        ("!a", {"a": ""}, True),
        ("a && b", {"a": [], "b": 1}, []),
        ("a || b", {"a": {}, "b": 1}, 1),
        ("a > `1`", {"a": True}, None),
        ("missing.to_string(@)", {}, "null"),
        ("items[?n > `1`].n", {"items": [{"n": 1}, {"n": 2}]}, [2]),
        ("lower(a) == 'x'", {"a": "X"}, True),
        ("length(a)", {"a": {"k": 1}}, 1),
    ],
)
def test_query_search_jmespath_semantics(source: str, data: Any, expected: Any) -> None:
    assert compile_query(source).search(data) == expected
    assert jmespath.search(source, data, options=_OPTIONS) == expected


@pytest.mark.parametrize(
    ("source", "data", "code"),
    [
        ("length(a)", {"a": 1}, "RT401"),
        ("lower(a)", {"a": 1}, "RT402"),
        ("a < b", {"a": "a", "b": 1}, "RT401"),
        ("clamp(a, `0`, `1`)", {"a": "x"}, "RT402"),
    ],
)
def test_query_search_errors_become_expression_error(source: str, data: Any, code: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_query(source).search(data)
    assert info.value.code == code and info.value.source == source


FIELDS = ["a", "b", "c"]
literals = st.sampled_from(
    [
        "`1`",
        "`0`",
        "`2.5`",
        "`true`",
        "`false`",
        "`null`",
        "'x'",
        "''",
        "`[]`",
        "`{}`",
        "`[1, 2]`",
        '`{"a": 1}`',
        '`"x"`',
    ]
)
paths = st.one_of(
    st.sampled_from(FIELDS),
    st.sampled_from(["@"]),
    st.tuples(st.sampled_from(FIELDS), st.sampled_from(FIELDS)).map(lambda t: f"{t[0]}.{t[1]}"),
    st.tuples(st.sampled_from(FIELDS), st.integers(-2, 2)).map(lambda t: f"{t[0]}[{t[1]}]"),
    st.tuples(st.sampled_from(FIELDS), st.integers(-1, 1), st.sampled_from(FIELDS)).map(
        lambda t: f"{t[0]}[{t[1]}].{t[2]}"
    ),
)
leaves = st.one_of(paths, literals)
ORDER = ["==", "!=", "<", "<=", ">", ">="]
FUNCS_1 = ["length", "to_string", "type", "not_null", "lower", "keys", "abs", "to_number", "reverse", "sort"]


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(ORDER), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        inner.map(lambda e: f"!({e})"),
        st.tuples(st.sampled_from(FUNCS_1), inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"contains({t[0]}, {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"not_null({t[0]}, {t[1]})"),
        st.tuples(st.sampled_from(FIELDS), st.sampled_from(FIELDS)).map(lambda t: f"{t[0]}[*].{t[1]}"),
        st.tuples(st.sampled_from(FIELDS), inner).map(lambda t: f"{t[0]}[?{t[1]}]"),
        st.tuples(inner, inner).map(lambda t: f"[{t[0]}, {t[1]}]"),
        st.tuples(inner, inner).map(lambda t: f"{{k: {t[0]}, j: {t[1]}}}"),
        st.tuples(inner, st.sampled_from(FIELDS)).map(lambda t: f"({t[0]}) | {t[1]}"),
        st.sampled_from(FIELDS).map(lambda f: f"{f}[]"),
        st.sampled_from(FIELDS).map(lambda f: f"{f}[1:]"),
    )


queries = st.recursive(leaves, _extend, max_leaves=10)
documents = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, -1.5]), st.text("ax", max_size=2)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(FIELDS), inner, max_size=3)
    ),
    max_leaves=10,
)


def _library(source: str, data: Any) -> tuple[str, Any]:
    try:
        return "value", jmespath.search(source, data, options=_OPTIONS)
    except (jmespath.exceptions.JMESPathError, ExpressionError, TypeError, ValueError):
        return "error", None


def _compiled(source: str, data: Any) -> tuple[str, Any]:
    try:
        return "value", compile_query(source).search(data)
    except ExpressionError:
        return "error", None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=queries, data=documents)
def test_compiled_query_agrees_with_jmespath_library(source: str, data: Any) -> None:
    try:
        compile_query(source)
    except ExpressionSyntaxError:
        assume(False)
    compiled, library = _compiled(source, data), _library(source, data)
    assert compiled[0] == library[0], (source, data, compiled, library)
    assert same_value(compiled[1], library[1]), (source, data, compiled, library)
