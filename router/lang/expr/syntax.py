"""What an expression may hold and what it reads: the default-deny check of its tree, literal
arguments prepared at load (compiled regexes, keyword sets), and the names, calls and field paths
the compiler records. Every refusal is an ExpressionSyntaxError located in the source."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from router.diagnostics.code_names import FORBIDDEN_CONSTRUCT, INVALID_EXPRESSION, INVALID_TEMPLATE
from router.diagnostics.errors import ExpressionError
from router.lang.functions import FUNCTIONS, NOT_LITERAL

CONSTANTS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Store, ast.Attribute, ast.Subscript,
    ast.Slice, ast.Call, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.List,
    ast.Tuple, ast.Dict, ast.JoinedStr, ast.FormattedValue, ast.ListComp, ast.DictComp, ast.comprehension,
    ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult, ast.Div,
    ast.FloorDiv, ast.Mod, ast.Pow, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In,
    ast.NotIn, ast.Is, ast.IsNot,
)


@dataclass(frozen=True)
class ExpressionSyntaxError(Exception):
    """An expression or template that cannot compile; `offset` is 0-based within the source."""

    message: str
    offset: int = 0
    code: str = INVALID_EXPRESSION

    def __str__(self) -> str:
        return self.message


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of `tree` in `ast.walk`'s order (breadth first), without its generator overhead.

    Left out: the `Load`/`Store` markers of names, attributes and subscripts (allowed everywhere,
    read by no pass), and the fields of leaves (a `Name`'s id, a `Constant`'s value)."""
    nodes = [tree]
    for node in nodes:  # the loop also visits the children appended while it runs
        kind = type(node)
        if kind is ast.Name or kind is ast.Constant:
            continue
        for name in node._fields:
            if name == "ctx":
                continue
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                nodes.append(value)
            elif isinstance(value, list):
                nodes.extend(v for v in value if isinstance(v, ast.AST))
    return nodes


# Argument nodes `ast.literal_eval` always refuses (it builds four closures to say so).
_NEVER_LITERAL: frozenset[type[ast.AST]] = frozenset({
    ast.Name, ast.Attribute, ast.Subscript, ast.Compare, ast.BoolOp, ast.IfExp, ast.JoinedStr})


def _literal(node: ast.expr) -> Any:
    if type(node) is ast.Constant:
        return node.value
    if type(node) in _NEVER_LITERAL:
        return NOT_LITERAL
    if type(node) is ast.List:
        values = [e.value for e in node.elts if type(e) is ast.Constant]
        if len(values) == len(node.elts):
            return values  # what literal_eval returns for a list of constants
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def prepare_calls(nodes: list[ast.AST], lead: int) -> None:
    """Replace literal arguments by their load-time form (compiled regexes, keyword sets)."""
    for node in nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        spec = FUNCTIONS.get(node.func.id)
        if spec is None or spec.prepare is None:
            continue
        try:
            replacements = spec.prepare(tuple(_literal(arg) for arg in node.args))
        except ExpressionError as exc:
            raise ExpressionSyntaxError(exc.message, lead + node.col_offset, code=exc.code) from None
        for index, value in replacements.items():
            node.args[index] = ast.copy_location(ast.Constant(value=value), node.args[index])


# Allowed node types that need no check of their own (most nodes: the loop below skips them).
_ALLOWED_TYPES = frozenset(_ALLOWED_NODES)


_PLAIN_NODES = _ALLOWED_TYPES - {ast.Attribute, ast.Name, ast.Call, ast.FormattedValue}


def check_tree(nodes: list[ast.AST], lead: int) -> None:
    plain = _PLAIN_NODES
    for node in nodes:
        if type(node) not in plain:
            _check_node(node, lead)


def _check_node(node: ast.AST, lead: int) -> None:
    offset = max(0, lead + getattr(node, "col_offset", 0))
    if type(node) not in _ALLOWED_TYPES and not isinstance(node, _ALLOWED_NODES):
        raise ExpressionSyntaxError(f"{describe(node)} is not allowed in expressions", offset,
                                    code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise ExpressionSyntaxError(f"field '{node.attr}' is not accessible (leading '_')",
                                    offset, code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        raise ExpressionSyntaxError(f"name '{node.id}' is not accessible", offset, code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise ExpressionSyntaxError("only helper functions can be called (no methods)",
                                        offset, code=FORBIDDEN_CONSTRUCT)
        if node.keywords:
            raise ExpressionSyntaxError("keyword arguments are not supported", offset,
                                        code=FORBIDDEN_CONSTRUCT)
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise ExpressionSyntaxError("*args are not supported", offset, code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.FormattedValue) and node.conversion != -1:
        raise ExpressionSyntaxError("conversions such as !r and !s are not supported in templates",
                                    offset, code=INVALID_TEMPLATE)
    if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
        spec = node.format_spec
        if not all(isinstance(v, ast.Constant) for v in getattr(spec, "values", [])):
            raise ExpressionSyntaxError("nested placeholders in a format spec are not allowed",
                                        offset, code=INVALID_TEMPLATE)
        text = "".join(str(v.value) for v in getattr(spec, "values", []))
        if re.search(r"\d{4,}", text):
            raise ExpressionSyntaxError(f"format spec '{text}' asks for a width over 999",
                                        offset, code=INVALID_TEMPLATE)


def describe(node: ast.AST) -> str:
    names = {ast.Lambda: "lambda", ast.NamedExpr: "':=' assignment", ast.Await: "await",
             ast.Yield: "yield", ast.SetComp: "a set comprehension",
             ast.GeneratorExp: "a generator expression", ast.Starred: "'*' unpacking",
             ast.Set: "a set literal", ast.BitAnd: "'&' (use 'and')", ast.BitOr: "'|' (use 'or')",
             ast.Invert: "'~'", ast.BitXor: "'^'", ast.LShift: "'<<'", ast.RShift: "'>>'"}
    return names.get(type(node), type(node).__name__)


Facts = tuple[frozenset[str], tuple[tuple[str, int], ...], tuple[tuple[str, ...], ...],
              tuple[tuple[str, tuple[Any, ...]], ...]]


def tree_facts(nodes: list[ast.AST]) -> Facts:
    """What the nodes of a tree read: names, calls with their arity, field paths, literal arguments."""
    bound = {t.id for c in nodes if isinstance(c, ast.comprehension)
             for t in ast.walk(c.target) if isinstance(t, ast.Name)}
    names = set()
    calls = []
    literal_args = []
    callee = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            names.add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            callee.add(node.func.id)
            calls.append((node.func.id, len(node.args)))
            literal_args.append((node.func.id, tuple(a.value if isinstance(a, ast.Constant) else None
                                                     for a in node.args)))
    return (frozenset(names - callee - CONSTANTS.keys()), tuple(calls), tuple(_paths(nodes, bound)),
            tuple(literal_args))


def _paths(nodes: list[ast.AST], bound: set[str]) -> list[tuple[str, ...]]:
    """Root-anchored field paths such as ('signals', 'p_complex')."""
    found: list[tuple[str, ...]] = []
    inner: set[int] = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    for node in nodes:
        if id(node) in inner or not isinstance(node, (ast.Attribute, ast.Subscript, ast.Name)):
            continue
        parts: list[str] = []
        cursor: ast.AST = node
        while True:
            if isinstance(cursor, ast.Attribute):
                parts.append(cursor.attr)
            elif isinstance(cursor, ast.Subscript):
                key = cursor.slice
                parts = [] if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) \
                    else [*parts, key.value]
            elif isinstance(cursor, ast.Name):
                if cursor.id not in bound and cursor.id not in CONSTANTS:
                    found.append((cursor.id, *reversed(parts)))
                break
            else:
                break
            inner.add(id(cursor.value))
            cursor = cursor.value
    return found
