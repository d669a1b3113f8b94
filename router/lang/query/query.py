"""JMESPath `match` expressions: compiled once at load, with the shared helper functions."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import jmespath
from jmespath import exceptions as jexc
from jmespath import functions as jfunctions
from jmespath import visitor
from jmespath.parser import ParsedResult

from router.diagnostics.code_names import EVALUATION_LIMIT, INVALID_JMESPATH, WRONG_ARGUMENT_COUNT
from router.diagnostics.errors import ExpressionError
from router.lang.expr.syntax import ExpressionSyntaxError
from router.lang.functions import FUNCTIONS, Function
from router.lang.query.closures import Compiled, compile_node
from router.lang.scanning import top_level

# JMESPath's built-in functions and their arity (min, max; None: any number).
JMESPATH_ARITY: dict[str, tuple[int, int | None]] = {
    "abs": (1, 1), "avg": (1, 1), "ceil": (1, 1), "contains": (2, 2), "ends_with": (2, 2),
    "floor": (1, 1), "join": (2, 2), "keys": (1, 1), "length": (1, 1), "map": (2, 2), "max": (1, 1),
    "max_by": (2, 2), "merge": (1, None), "min": (1, 1), "min_by": (2, 2), "not_null": (1, None),
    "reverse": (1, 1), "sort": (1, 1), "sort_by": (2, 2), "starts_with": (2, 2), "sum": (1, 1),
    "to_array": (1, 1), "to_number": (1, 1), "to_string": (1, 1), "type": (1, 1), "values": (1, 1),
}
JMESPATH_BUILTINS = frozenset(JMESPATH_ARITY)


def _adapter(spec: Function) -> Callable[..., Any]:
    def call(self: Any, *args: Any) -> Any:
        if spec.max_args is not None and len(args) > spec.max_args:
            raise ExpressionError(f"{spec.name}() takes at most {spec.max_args} arguments",
                                  code=WRONG_ARGUMENT_COUNT)
        return spec.impl(*args)

    arity = max(spec.min_args, 1)
    variadic = spec.max_args is None or spec.max_args > spec.min_args
    signature: list[dict[str, Any]] = [{"types": []} for _ in range(arity)]
    if variadic:
        signature[-1] = {"types": [], "variadic": True}
    call.signature = signature  # type: ignore[attr-defined]
    return call


def _functions_class() -> type[jfunctions.Functions]:
    methods = {f"_func_{name}": _adapter(spec) for name, spec in FUNCTIONS.items()
               if not spec.native_jmespath}
    return type("RouterFunctions", (jfunctions.Functions,), methods)


_FUNCTIONS = _functions_class()()
_OPTIONS = jmespath.Options(custom_functions=_FUNCTIONS)
_FALLBACK = visitor.TreeInterpreter(_OPTIONS)


@dataclass(frozen=True, eq=False)
class Query:
    """A compiled JMESPath expression with the field paths and functions it uses."""

    source: str
    parsed: ParsedResult
    paths: tuple[tuple[str, ...], ...]
    calls: tuple[tuple[str, int], ...]
    literal_args: tuple[tuple[str, tuple[Any, ...]], ...]
    run: Compiled

    def search(self, data: Any) -> Any:
        """Evaluate against `data`; failures become ExpressionError."""
        try:
            return self.run(data)
        except ExpressionError as exc:
            raise ExpressionError(exc.message, source=self.source, code=exc.code) from None
        except jexc.JMESPathError as exc:
            raise ExpressionError(_jmespath_message(exc), source=self.source) from None
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError,
                ZeroDivisionError) as exc:
            raise ExpressionError(str(exc), source=self.source) from None
        except RecursionError:
            raise ExpressionError("nested too deeply", source=self.source, code=EVALUATION_LIMIT) from None

    def conjuncts(self) -> list[Query]:
        """Split a top-level `a && b` into separately compiled parts (for `router explain`)."""
        parts = _split_top_level(self.source, "&&")
        if len(parts) < 2:
            return [self]
        try:
            return [compile_query(part) for part in parts]
        except ExpressionSyntaxError:
            return [self]


def compile_query(source: str) -> Query:
    """Parse a JMESPath expression; raise ExpressionSyntaxError (RT201) when it is invalid."""
    if not isinstance(source, str) or not source.strip():
        raise ExpressionSyntaxError("empty JMESPath expression", code=INVALID_JMESPATH)
    try:
        parsed = jmespath.compile(source)
    except jexc.ParseError as exc:
        position = exc.lex_position if isinstance(exc.lex_position, int) else 0
        raise ExpressionSyntaxError(f"invalid JMESPath: {_parse_message(exc)}", position,
                                    code=INVALID_JMESPATH) from None
    except jexc.JMESPathError as exc:
        raise ExpressionSyntaxError(f"invalid JMESPath: {exc}", code=INVALID_JMESPATH) from None
    except (RecursionError, ValueError):
        raise ExpressionSyntaxError("JMESPath expression is nested too deeply",
                                    code=INVALID_JMESPATH) from None
    tree = cast("dict[str, Any]", parsed.parsed)  # quoted: no generic alias built per call
    functions = _function_nodes(tree)
    calls = [(n["value"], len(n["children"])) for n in functions]
    literal_args = [
        (n["value"], tuple(c.get("value") if c["type"] == "literal" else None for c in n["children"]))
        for n in functions
    ]
    try:
        run = compile_node(tree, _FUNCTIONS, _FALLBACK)
    except ExpressionError as exc:
        raise ExpressionSyntaxError(exc.message, code=exc.code) from None
    return Query(source, parsed, tuple(root_paths(tree)), tuple(calls), tuple(literal_args), run)


def compile_subtree(node: dict[str, Any]) -> Compiled:
    """The closures of a subtree of a parsed JMESPath expression."""
    return compile_node(node, _FUNCTIONS, _FALLBACK)


def _parse_message(exc: jexc.ParseError) -> str:
    token = getattr(exc, "token_value", None)
    kind = getattr(exc, "msg", None) or "syntax error"
    return f"{kind} near {token!r}" if token not in (None, "") else str(kind)


def _jmespath_message(exc: jexc.JMESPathError) -> str:
    text = str(exc).replace("\n", " ")
    return re.sub(r"\s+", " ", text)


def _function_nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The function calls of a tree, depth first in the children's order (no recursion)."""
    found: list[dict[str, Any]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if node["type"] == "function_expression":
            found.append(node)
        stack.extend(reversed([c for c in node.get("children", []) if isinstance(c, dict)]))
    return found


def _chain(node: dict[str, Any]) -> tuple[str, ...] | None:
    """The field names of a pure `a.b.c` chain, else None."""
    if node["type"] == "field":
        return (node["value"],)
    if node["type"] == "subexpression":
        parts = [_chain(c) for c in node["children"]]
        if all(p is not None for p in parts):
            return tuple(name for part in parts if part is not None for name in part)
    return None


class UnlistedPaths(ValueError):
    """A JMESPath whose root paths cannot all be listed (`root_paths(..., strict=True)`)."""


_FIRST_CHILD = frozenset({"index_expression", "pipe", "projection", "filter_projection",
                          "value_projection", "flatten"})  # the rest reads what the first gives
_ALL_CHILDREN = frozenset({"comparator", "and_expression", "or_expression", "not_expression",
                           "function_expression", "multi_select_list", "multi_select_dict",
                           "key_val_pair"})


def root_paths(node: Any, *, strict: bool = False) -> list[tuple[str, ...]]:
    """Field paths read from the root document; element-relative parts are not followed. With
    `strict`, a node that may read the root in a way a path cannot name (`@`, an unknown node)
    raises UnlistedPaths instead of being passed over."""
    if not isinstance(node, dict):
        if strict:
            raise UnlistedPaths("an unknown JMESPath node")
        return []
    chain = _chain(node)
    if chain is not None:
        return [chain]
    kind, children = node.get("type"), node.get("children", [])
    if kind == "subexpression":
        prefix: list[str] = []
        for child in children:
            part = _chain(child) if isinstance(child, dict) else None
            if part is None:
                break
            prefix += part
        return [tuple(prefix)] if prefix else (root_paths(children[0], strict=strict) if children else [])
    if kind in _FIRST_CHILD:
        return root_paths(children[0], strict=strict) if children else []
    if kind in _ALL_CHILDREN:  # an expref reads the elements another argument gives
        return [p for child in children if not (isinstance(child, dict) and child.get("type") == "expref")
                for p in root_paths(child, strict=strict)]
    if strict and kind not in ("literal", "expref"):
        raise UnlistedPaths(f"JMESPath {kind} at the root")
    return []


def _split_top_level(source: str, sep: str) -> list[str]:
    parts, start = [], 0
    for i in top_level(source, "'\"`"):
        if i >= start and source.startswith(sep, i):
            parts.append(source[start:i].strip())
            start = i + len(sep)
    parts.append(source[start:].strip())
    return parts
