"""router.lang.expr.closures: the closure-compiled expressions agree with the simpleeval reference."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from router.diagnostics.code_names import EVALUATION_LIMIT
from router.diagnostics.errors import ExpressionError
from router.lang.expr.evaluator import Evaluator
from router.lang.expr.expression import compile_expression
from router.lang.expr.syntax import ExpressionSyntaxError
from tests.helpers import same_value

NAMES = ["a", "b", "n", "s", "items", "d", "missing"]
FIELDS = ["x", "y", "a", "b"]
FUNCTIONS_1 = ["lower", "length", "to_string", "abs", "not_null", "trim", "keys", "to_number", "sum"]
FUNCTIONS_2 = ["contains", "not_null", "get", "starts_with", "head", "split"]
COMPARE = ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is", "is not"]
ARITH = ["+", "-", "*", "/", "//", "%"]

literals = st.one_of(
    st.integers(-5, 5).map(str),
    st.sampled_from(
        ["0.5", "2.5", "-1.0", "true", "false", "null", "''", "'x'", "'ab'", "[]", "{}", "[1, 2]", "{'x': 1}"]
    ),
)
leaves = st.one_of(st.sampled_from(NAMES), literals)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(FIELDS)).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(inner, st.integers(-2, 3)).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(inner, st.sampled_from(FIELDS)).map(lambda t: f"({t[0]})['{t[1]}']"),
        st.tuples(inner, st.sampled_from(COMPARE), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]}) < ({t[1]}) <= ({t[2]})"),
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        inner.map(lambda e: f"not ({e})"),
        inner.map(lambda e: f"-({e})"),
        st.tuples(inner, st.sampled_from(ARITH), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, st.integers(0, 3)).map(lambda t: f"({t[0]}) ** {t[1]}"),
        st.tuples(st.sampled_from(FUNCTIONS_1), inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(FUNCTIONS_2), inner, inner).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"clamp({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]}) if ({t[1]}) else ({t[2]})"),
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(st.sampled_from(FIELDS), inner).map(lambda t: f"{{'{t[0]}': {t[1]}}}"),
        st.tuples(inner, inner).map(lambda t: f"[v for v in ({t[0]}) if ({t[1]})]"),
        st.tuples(inner, inner).map(lambda t: f"{{v: ({t[1]}) for v in ({t[0]})}}"),
        st.tuples(inner, inner).map(lambda t: f"[[w, v] for v in ({t[0]}) for w in ({t[1]}) if w != v]"),
        st.tuples(inner, inner).map(lambda t: f"[[w for w in ({t[1]})] + [v] for v in ({t[0]})]"),
        inner.map(lambda e: f"[[w, v] for v, w in ({e})]"),
        inner.map(lambda e: f"({e})[1:]"),
        inner.map(lambda e: f"f'<{{{e}}}>'"),
    )


expressions = st.recursive(leaves, _extend, max_leaves=12)

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-10, 10),
        st.floats(-10, 10, allow_nan=False, allow_infinity=False),
        st.text("abxy ", max_size=4),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(FIELDS), inner, max_size=3)
    ),
    max_leaves=8,
)
scopes = st.fixed_dictionaries({name: json_values for name in NAMES if name != "missing"})


def _outcome(evaluator: Evaluator, expression: Any) -> tuple[str, Any]:
    try:
        return "value", evaluator.value(expression)
    except ExpressionError as exc:
        return "error", exc.code


def _both(source: str, scope: dict[str, Any]) -> tuple[tuple[str, Any], tuple[str, Any]]:
    expression = compile_expression(source)
    assert expression.run is not None
    reference = dataclasses.replace(expression, run=None)
    return _outcome(Evaluator(dict(scope)), expression), _outcome(Evaluator(dict(scope)), reference)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=expressions, scope=scopes)
def test_closures_agree_with_simpleeval_reference(source: str, scope: dict[str, Any]) -> None:
    try:
        compiled, reference = _both(source, scope)
    except ExpressionSyntaxError:
        assume(False)
        return
    assert compiled[0] == reference[0], (source, compiled, reference)
    if compiled[0] == "value":
        assert same_value(compiled[1], reference[1]), (source, compiled, reference)


@pytest.mark.parametrize(
    "source",
    [
        "a.x.y",
        "items[0]",
        "items[-1]",
        "items[1:]",
        "d['x']",
        "missing.x",
        "n < 1",
        "n == null",
        "a and b or n",
        "1 < 2 < 3 > 2",
        "not items",
        "lower(s) if s else 'none'",
        "[v for v in items if v]",
        "{v: v * 2 for v in items if v}",
        "[[v, w] for v in items for w in range(v) if w != 1]",
        "[x for [x, y] in [[1, 2], [3]]]",
        "[x for x, y in [1]]",
        "[v.x for v in items]",
        "{[v]: 1 for v in items}",
        "[a for a in items]",
        "[[w for w in range(5000)] for v in range(3)]",
        "[d for d in range(3) if d]",
        "{'x': a, 'y': [b, n]}",
        "f'{a}-{b:>3}'",
        "clamp(a, 0, 1)",
        "contains(items, 1)",
        "not_null(n, b)",
        "items * 2",
        "-a + b * 2 ** 2",
        "a / 0",
        "s.x",
        "items['x']",
        "lower(items)",
    ],
)
def test_closures_agree_on_fixed_cases(source: str) -> None:
    scope = {"a": 1, "b": 2.5, "n": None, "s": "Hi", "items": [1, 0, 3], "d": {"x": {"y": 1}}}
    compiled, reference = _both(source, scope)
    assert compiled[0] == reference[0]
    if compiled[0] == "value":
        assert same_value(compiled[1], reference[1])


def test_a_comprehension_counts_the_items_of_those_nested_in_it_as_simpleeval_does() -> None:
    source = "[[w for w in range(5000)] for v in range(2)]"  # 2 + 2 x 5,000 > 10,000 items
    for expression in (compile_expression(source), dataclasses.replace(compile_expression(source), run=None)):
        with pytest.raises(ExpressionError, match="Comprehension generates too many elements") as caught:
            Evaluator({}).value(expression)
        assert caught.value.code == EVALUATION_LIMIT
    assert len(Evaluator({}).value(compile_expression("[[w for w in range(4999)] for v in range(2)]"))) == 2


def test_closures_read_the_scope_at_run_time_not_compile_time() -> None:
    expression = compile_expression("a.x + 1")
    assert Evaluator({"a": {"x": 1}}).value(expression) == 2
    assert Evaluator({"a": {"x": 41}}).value(expression) == 42


def test_closures_short_circuit_like_python() -> None:
    expression = compile_expression("n != null and n.x > 1 or 'fallback'")
    assert Evaluator({"n": None}).value(expression) == "fallback"
    assert Evaluator({"n": {"x": 2}}).value(expression) is True


def test_closures_chain_stops_at_first_false_comparison() -> None:
    expression = compile_expression("1 > 2 > lower(5)")
    assert Evaluator({}).value(expression) is False
