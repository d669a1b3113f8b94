"""Compile a JMESPath AST into nested Python closures, with the library's exact semantics.

The library's TreeInterpreter dispatches on every node of every evaluation; a policy evaluates
thousands of small matches per second, so each parsed AST is turned once into closures. Node
types without a closure here fall back to the library's interpreter for that subtree, so the
semantics stay the library's (`jmespath.visitor`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from jmespath import functions as jfunctions
from jmespath import visitor

from router.lang.functions import FUNCTIONS, NOT_LITERAL

Compiled = Callable[[Any], Any]

_ORDERING = {"lt": operator.lt, "gt": operator.gt, "lte": operator.le, "gte": operator.ge}
_LIBRARY: Any = visitor  # jmespath's private helpers (not in its stubs): the library's own semantics


def _equals(x: Any, y: Any) -> bool:
    """visitor._equals, with a fast path for strings and null (no number/boolean special case)."""
    if type(x) is str or type(y) is str or x is None or y is None:
        return bool(x == y)
    return bool(_LIBRARY._equals(x, y))


def _comparable(x: Any) -> bool:
    kind = type(x)
    return kind is int or kind is float or kind is str or _LIBRARY._is_comparable(x)


def _through(fallback: visitor.TreeInterpreter, node: dict[str, Any]) -> Compiled:
    """Evaluate `node` with jmespath's own interpreter (node kinds we do not compile)."""
    tree: Any = node
    return lambda value: fallback.visit(tree, value)


def _string_literal(node: dict[str, Any]) -> str | None:
    value = node.get("value") if node["type"] == "literal" else None
    return value if isinstance(value, str) else None


def _get(value: Any, name: str) -> Any:
    try:
        return value.get(name)
    except AttributeError:
        return None


def _is_false(value: Any) -> bool:
    return value is None or value is False or value == "" or value == [] or value == {}


def compile_node(node: dict[str, Any], functions: jfunctions.Functions,
                 fallback: visitor.TreeInterpreter) -> Compiled:
    """Closures for `node`; unknown node types evaluate through `fallback`."""
    kind = node["type"]
    builder = _BUILDERS.get(kind)
    if builder is None:
        return _through(fallback, node)
    return builder(node, functions, fallback)


def _children(node: dict[str, Any], functions: jfunctions.Functions,
              fallback: visitor.TreeInterpreter) -> list[Compiled]:
    return [compile_node(c, functions, fallback) for c in node["children"]]


def _field(node: dict[str, Any], *_: Any) -> Compiled:
    name = node["value"]

    def field(value: Any) -> Any:
        try:
            return value.get(name)
        except AttributeError:
            return None

    return field


def _chain(node: dict[str, Any], functions: jfunctions.Functions,
           fallback: visitor.TreeInterpreter) -> Compiled:
    parts = _children(node, functions, fallback)
    if len(parts) == 2:
        first, second = parts
        return lambda value: second(first(value))

    def chain(value: Any) -> Any:
        for part in parts:
            value = part(value)
        return value

    return chain


def _comparator(node: dict[str, Any], functions: jfunctions.Functions,
                fallback: visitor.TreeInterpreter) -> Compiled:
    left, right = _children(node, functions, fallback)
    op = node["value"]
    literal = _string_literal(node["children"][1])
    if literal is not None and op in ("eq", "ne"):
        if node["children"][0]["type"] == "field":
            name = node["children"][0]["value"]
            equal = op == "eq"

            def compare_field(value: Any) -> bool:
                try:
                    return (value.get(name) == literal) is equal
                except AttributeError:
                    return not equal

            return compare_field
        if op == "eq":
            return lambda value: left(value) == literal
        return lambda value: left(value) != literal
    if op == "eq":
        return lambda value: _equals(left(value), right(value))
    if op == "ne":
        return lambda value: not _equals(left(value), right(value))
    compare = _ORDERING[op]

    def ordering(value: Any) -> Any:
        a, b = left(value), right(value)
        if not (_comparable(a) and _comparable(b)):
            return None
        return compare(a, b)

    return ordering


def _literal(node: dict[str, Any], *_: Any) -> Compiled:
    constant = node["value"]
    return lambda value: constant


def _current(node: dict[str, Any], *_: Any) -> Compiled:
    return lambda value: value


def _and(node: dict[str, Any], functions: jfunctions.Functions,
         fallback: visitor.TreeInterpreter) -> Compiled:
    left, right = _children(node, functions, fallback)

    def both(value: Any) -> Any:
        matched = left(value)
        if matched is True:
            return right(value)
        return matched if _is_false(matched) else right(value)

    return both


def _or(node: dict[str, Any], functions: jfunctions.Functions,
        fallback: visitor.TreeInterpreter) -> Compiled:
    left, right = _children(node, functions, fallback)

    def either(value: Any) -> Any:
        matched = left(value)
        return right(value) if _is_false(matched) else matched

    return either


def _not(node: dict[str, Any], functions: jfunctions.Functions,
         fallback: visitor.TreeInterpreter) -> Compiled:
    (inner,) = _children(node, functions, fallback)

    def negate(value: Any) -> Any:
        result = inner(value)
        if _LIBRARY._is_actual_number(result) and result == 0:
            return False
        return not result

    return negate


def _function(node: dict[str, Any], functions: jfunctions.Functions,
              fallback: visitor.TreeInterpreter) -> Compiled:
    node = _prepared(node)
    args = _children(node, functions, fallback)
    name = node["value"]
    call = functions.call_function
    if any(child["type"] == "expref" for child in node["children"]):
        return _through(fallback, node)
    return lambda value: call(name, [arg(value) for arg in args])


def _prepared(node: dict[str, Any]) -> dict[str, Any]:
    """Replace literal arguments by their load-time form (see `Function.prepare`)."""
    spec = FUNCTIONS.get(node["value"])
    if spec is None or spec.prepare is None or spec.native_jmespath:
        return node
    literals = tuple(c["value"] if c["type"] == "literal" else NOT_LITERAL for c in node["children"])
    replacements = spec.prepare(literals)
    if not replacements:
        return node
    children = [
        {"type": "literal", "value": replacements[i], "children": []} if i in replacements else child
        for i, child in enumerate(node["children"])
    ]
    return {**node, "children": children}


def _index(node: dict[str, Any], *_: Any) -> Compiled:
    position = node["value"]

    def index(value: Any) -> Any:
        if not isinstance(value, list):
            return None
        try:
            return value[position]
        except IndexError:
            return None

    return index


_BUILDERS: dict[str, Callable[..., Compiled]] = {
    "field": _field,
    "subexpression": _chain,
    "index_expression": _chain,
    "pipe": _chain,
    "comparator": _comparator,
    "literal": _literal,
    "current": _current,
    "identity": _current,
    "and_expression": _and,
    "or_expression": _or,
    "not_expression": _not,
    "function_expression": _function,
    "index": _index,
}
