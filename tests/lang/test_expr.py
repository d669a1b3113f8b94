"""lang.expr.expression: compiling `when` expressions and `{…}` templates, nulls, limits, metadata."""

from __future__ import annotations

from typing import Any

import pytest

from router.diagnostics.errors import ExpressionError
from router.lang.expr.evaluator import Evaluator
from router.lang.expr.expression import compile_expression, compile_template
from router.lang.expr.syntax import ExpressionSyntaxError
from tests.helpers import fails, refused, render, run


@pytest.mark.parametrize(
    ("source", "offset"),
    [
        ("a +", 0),
        ("  a +", 2),
        ("1 if 2", 0),
        ("(a", 0),
        ("a b", 0),
        ("x = 1", 0),
    ],
)
def test_compile_expression_syntax_error_rt202_with_offset(source: str, offset: int) -> None:
    error = refused(source)
    assert error.code == "RT202" and error.offset == offset
    assert error.message.startswith("invalid expression")


@pytest.mark.parametrize("source", ["", "   ", "\n"])
def test_compile_expression_empty_rt202(source: str) -> None:
    assert refused(source).code == "RT202"


def test_compile_expression_too_long_rt202() -> None:
    assert refused("x" * 20_001).code == "RT202"


@pytest.mark.parametrize(
    "source",
    [
        "text.lower()",
        "lower(text).strip()",
        "lambda: 1",
        "__class__",
        "x.__class__",
        "x._private",
        "lower(text=1)",
        "lower(*args)",
        "max(**kw)",
        "[*a]",
        "{1, 2}",
        "a & b",
        "a | b",
        "a ^ b",
        "~a",
        "a << 1",
        "a >> 1",
        "a @ b",
        "(y := 1)",
        "{x for x in a}",
        "(x for x in a)",
        "await x",
        "yield",
        "1 + x.lower()",
    ],
)
def test_compile_expression_forbidden_construct_rt203(source: str) -> None:
    assert refused(source).code == "RT203"


OFFSET_BUG = (
    "BUG: compile_expression parses f'({text}\\n)' (to allow line breaks), so every AST "
    "col_offset is one too far right: RT203/RT210 columns point one character past the "
    "construct, and Expression.conjuncts() cuts the first character of each part "
    "(`router explain` prints 'first miss: ength(text) > 3')"
)


@pytest.mark.parametrize(
    ("source", "offset"),
    [
        ("text.lower()", 0),
        ("[*a]", 1),
        ("(y := 1)", 1),
        ("1 + x.lower()", 4),
        ("   x.y()", 3),
    ],
)
def test_compile_expression_forbidden_construct_offset(source: str, offset: int) -> None:
    assert refused(source).offset == offset


def test_compile_expression_dict_comprehension_allowed_and_bounded() -> None:
    assert run("{k: v for k, v in [[1, 2], [3, 4]]}") == {1: 2, 3: 4}
    assert fails("{x: 1 for x in r for y in r for z in r}", r=list(range(30))).code == "RT403"


def test_compile_expression_spans_lines() -> None:
    assert run("a and\n  b", a=1, b=2) == 2


def test_compile_expression_forbidden_message_names_the_construct() -> None:
    assert "method" in refused("a.b()").message
    assert "keyword" in refused("lower(x=1)").message
    assert "'&'" in refused("a & b").message
    assert "set literal" in refused("{1}").message


def test_template_without_braces_constant() -> None:
    template = compile_template("plain text")
    assert template.is_constant and template.constant == "plain text"
    assert render("plain text") == "plain text"


@pytest.mark.parametrize(
    ("source", "scope", "expected"),
    [
        ("{n}", {"n": 3}, 3),
        ("{flag}", {"flag": False}, False),
        ("{items}", {"items": [1, 2]}, [1, 2]),
        ("{missing}", {}, None),
        ("  {n}  ", {"n": 3}, 3),
        ("{ {'a': n}['a'] }", {"n": 4}, 4),
    ],
)
def test_template_single_placeholder_yields_typed_value(
    source: str, scope: dict[str, Any], expected: Any
) -> None:
    assert render(source, **scope) == expected


@pytest.mark.parametrize(
    ("source", "scope", "expected"),
    [
        ("p={p:.2f}", {"p": 0.856}, "p=0.86"),
        ("{p:.0f}%", {"p": 92.4}, "92%"),
        ("{n:>4}|", {"n": 7}, "   7|"),
        ("{n:03d}", {"n": 7}, "007"),
        ("a={a} b={b}", {"a": 1, "b": "x"}, "a=1 b=x"),
        ("{{literal}} {n}", {"n": 1}, "{literal} 1"),
        ("{{a}} {{b}}", {}, "{a} {b}"),
        ("{p:.1%}", {"p": 0.5}, "50.0%"),
        ("x{n}y", {"n": None}, "xnully"),
    ],
)
def test_template_fstring_formats(source: str, scope: dict[str, Any], expected: Any) -> None:
    assert render(source, **scope) == expected


@pytest.mark.parametrize("source", ["p={p:.2f", "{", "}", "a}b", "{a!x}", "{x:{y}}", "{x:>1000}"])
def test_template_invalid_rt204_or_syntax(source: str) -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        compile_template(source)
    assert info.value.code in ("RT204", "RT202", "RT203")


@pytest.mark.parametrize("source", ["p={p:.2f", "{", "}", "{x:{y}}", "{x:>1000}"])
def test_template_unclosed_or_bad_spec_is_rt204(source: str) -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        compile_template(source)
    assert info.value.code == "RT204"


def test_template_only_escaped_braces_renders_literal_text() -> None:
    assert render("{{n}}", n=1) == "{n}"


def test_template_forbidden_construct_inside_placeholder_rt203() -> None:
    with pytest.raises(ExpressionSyntaxError) as info:
        compile_template("hello {name.upper()}")
    assert info.value.code == "RT203"


def test_template_format_of_wrong_type_raises_expression_error() -> None:
    with pytest.raises(ExpressionError):
        render("{s:.2f}", s="text")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("n < 1", False),
        ("n > 1", False),
        ("n <= n", False),
        ("n >= 0", False),
        ("1 < n", False),
        ("n == null", True),
        ("n != null", False),
        ("not n", True),
        ("n is null", True),
    ],
)
def test_null_ordering_false_and_equality_exact(source: str, expected: bool) -> None:
    assert run(source, n=None) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("n.b", None),
        ("n.b.c", None),
        ("a.missing", None),
        ("a.b.c", None),
        ("missing", None),
        ("missing.x.y", None),
        ("a['missing']", None),
        ("n[0]", None),
        ("items[10]", None),
        ("items[-1]", 3),
        ("a.b is null and a.c == 1", True),
        ("usage.percent > 95", False),
    ],
)
def test_null_propagation_paths_and_missing_keys(source: str, expected: Any) -> None:
    scope = {"n": None, "a": {"b": None, "c": 1}, "items": [1, 2, 3], "usage": None}
    assert run(source, **scope) == expected


@pytest.mark.parametrize("source", ["s.x", "items.x", "items['k']", "n + 1", "-s", "1 in n", "1 / 0"])
def test_type_errors_raise_expression_error_rt401(source: str) -> None:
    error = fails(source, s="str", items=[1], n=None)
    assert error.code == "RT401" and error.source == source


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("true and false", False),
        ("True or False", True),
        ("null", None),
        ("None", None),
        ("1 < 2 < 3", True),
        ("3 > 2 > 2", False),
        ("'a' in 'cat'", True),
        ("2 not in [1]", True),
        ("a and b", 0),
        ("b or 'x'", "x"),
        ("1 if a else 2", 1),
        ("[x * 2 for x in [1, 2] if x > 1]", [4]),
        ("items[1:]", [2, 3]),
        ("{'k': 1}.k", 1),
        ("-(2 ** 3)", -8),
        ("7 // 2 + 7 % 2", 4),
    ],
)
def test_expression_semantics_python_like(source: str, expected: Any) -> None:
    assert run(source, a=1, b=0, items=[1, 2, 3]) == expected


@pytest.mark.parametrize(
    "source",
    [
        "'x' * 100001",
        "s * 50001",
        "items * 100001",
        "2 ** 4001",
        "4001 ** 2",
        "(-5000) ** 2",
        "'a' * 60000 + 'b' * 60000",
    ],
)
def test_limits_raise_rt403(source: str) -> None:
    assert fails(source, s="ab", items=[0]).code == "RT403"


def test_limits_at_the_bound_allowed() -> None:
    assert len(run("'x' * 100000")) == 100_000
    assert run("2 ** 10") == 1024


def test_limits_template_output_bounded_rt403() -> None:
    source = "".join("{s:>999}" for _ in range(120))
    with pytest.raises(ExpressionError) as info:
        render(source, s="x")
    assert info.value.code == "RT403"


def test_comprehension_size_bounded_rt403() -> None:
    assert fails("[1 for a in r for b in r for c in r]", r=list(range(30))).code == "RT403"


def test_expression_names_exclude_constants_functions_and_bound() -> None:
    expr = compile_expression(
        "lower(text) == 'x' and [i for i in items if i.ok] and null != true and signals.p"
    )
    assert expr.names == {"text", "items", "signals"}


def test_expression_calls_record_name_and_arity() -> None:
    expr = compile_expression("clamp(lower(a), 0, max([b]))")
    assert sorted(expr.calls) == [("clamp", 3), ("lower", 1), ("max", 1)]


def test_expression_paths_root_anchored_dotted_and_string_subscripts() -> None:
    expr = compile_expression("a.b.c and d['e'].f or g[0].h or state.x is null")
    assert set(expr.paths) >= {("a", "b", "c"), ("d", "e", "f"), ("g",), ("state", "x")}


def test_expression_paths_exclude_function_names() -> None:
    assert compile_expression("lower(text) == 'x'").paths == (("text",),)


def test_expression_literal_args_keep_original_regex_text() -> None:
    expr = compile_expression("regex(text, '(a+)+', 'i')")
    assert ("regex", (None, "(a+)+", "i")) in expr.literal_args


def test_expression_conjuncts_values_of_each_part() -> None:
    parts = compile_expression("a > 1 and (b or c) and lower(d) == 'x'").conjuncts()
    values = [Evaluator({"a": 2, "b": 0, "c": 0, "d": "X"}).value(p) for p in parts]
    assert values == [True, 0, True]


def test_expression_conjuncts_sources() -> None:
    parts = compile_expression("a > 1 and (b or c) and lower(d) == 'x'").conjuncts()
    assert [p.source for p in parts] == ["a > 1", "b or c", "lower(d) == 'x'"]


def test_expression_conjuncts_of_non_and_is_itself() -> None:
    expr = compile_expression("a or b")
    assert expr.conjuncts() == [expr]


def test_literal_regex_compiled_at_load_rt210() -> None:
    assert refused("regex(text, '(unclosed')").code == "RT210"


def test_literal_regex_error_offset_at_the_call() -> None:
    assert refused("regex(text, '(unclosed')").offset == 0


def test_literal_regex_bad_flag_refused_at_load() -> None:
    assert refused("regex(text, 'a', 'z')").code.startswith("RT")


def test_evaluator_value_wraps_errors_with_source() -> None:
    error = fails("lower(x)", x=1)
    assert error.source == "lower(x)" and error.message.startswith("lower()")
