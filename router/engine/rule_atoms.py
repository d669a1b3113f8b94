"""A rule's atoms: the leading conjuncts of its `match` and `when` that the rule index can answer
for many rules at once (an equality with a string literal, a keyword count, a pure comparison),
and how an atom reads a field path with the semantics of its language. router/engine/rule_index.py
explains which conjuncts are atoms and why leaving a rule out on one is exact."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from router.compile.ir import CompiledRule
from router.lang.expr.syntax import CONSTANTS

_MUTABLE_ROOTS = frozenset({"state", "signals", "signal_errors"})


Scope = Mapping[str, Any]


Getter = Callable[[Scope], Any]


class Unknown(Exception):
    """A path's value cannot be read without the error the rule's own evaluation would report."""


@dataclass(frozen=True)
class Equality:
    side: str  # "match" (JMESPath) or "when" (expression)
    path: tuple[str, ...]
    literal: str
    equal: bool


@dataclass(frozen=True)
class Keywords:
    path: tuple[str, ...]
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Pure:
    side: str
    key: str  # the canonical form of the subtree: equal keys, one evaluation
    tree: Any = field(compare=False, hash=False)


Atom = Equality | Keywords | Pure


def _conjuncts_match(node: dict[str, Any]) -> list[dict[str, Any]]:
    if node.get("type") == "and_expression":
        left, right = node["children"]
        return _conjuncts_match(left) + _conjuncts_match(right)
    return [node]


def _conjuncts_when(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [part for value in node.values for part in _conjuncts_when(value)]
    return [node]


def _field_chain(node: dict[str, Any]) -> tuple[str, ...] | None:
    """The names of a `a.b.c` field chain, else None."""
    if node.get("type") == "field" and isinstance(node.get("value"), str):
        return (node["value"],)
    if node.get("type") == "subexpression":
        names: list[str] = []
        for child in node["children"]:
            part = _field_chain(child)
            if part is None:
                return None
            names += part
        return tuple(names)
    return None


_PURE_MATCH = frozenset({"field", "subexpression", "comparator", "literal", "and_expression",
                         "or_expression", "not_expression", "index", "index_expression"})


def _pure_match(node: dict[str, Any], *, root: bool = True) -> bool:
    """Only field reads (never of state or signals), literals, comparisons and logic."""
    kind = node.get("type")
    if kind not in _PURE_MATCH:
        return False
    if kind == "field":
        return not (root and node.get("value") in _MUTABLE_ROOTS)
    children = node.get("children") or []
    if kind in ("subexpression", "index_expression"):
        return bool(children) and _pure_match(children[0], root=root) and all(
            _pure_match(c, root=False) for c in children[1:])
    return all(isinstance(c, dict) and _pure_match(c, root=True) for c in children)


def match_atom(node: dict[str, Any]) -> Atom | None:
    """The atom of one conjunct of a JMESPath match, or None."""
    if node.get("type") == "comparator" and node.get("value") in ("eq", "ne"):
        left, right = node["children"]
        for path_node, literal_node in ((left, right), (right, left)):
            path = _field_chain(path_node)
            literal = literal_node.get("value") if literal_node.get("type") == "literal" else None
            if path and isinstance(literal, str) and path[0] not in _MUTABLE_ROOTS:
                return Equality("match", path, literal, node["value"] == "eq")
    if _pure_match(node):
        return Pure("match", json.dumps(node, sort_keys=True, default=repr), node)
    return None


def _name_chain(node: ast.expr) -> tuple[str, ...] | None:
    """The names of a `a.b.c` chain rooted at a scope name, else None."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id not in CONSTANTS:
        return (node.id, *reversed(attrs))
    return None


_PURE_WHEN = (ast.Compare, ast.Name, ast.Attribute, ast.Constant, ast.BoolOp, ast.UnaryOp, ast.Load,
              ast.And, ast.Or, ast.Not, ast.Eq, ast.NotEq, ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.In,
              ast.NotIn, ast.Is, ast.IsNot)


def _pure_when(node: ast.expr) -> bool:
    for child in ast.walk(node):
        if not isinstance(child, _PURE_WHEN):
            return False
        if isinstance(child, ast.UnaryOp) and not isinstance(child.op, ast.Not):
            return False
        if isinstance(child, ast.Constant) and not isinstance(child.value, (str, int, float, bool,
                                                                            type(None))):
            return False
        if isinstance(child, ast.Name) and child.id in _MUTABLE_ROOTS:
            return False
    return True


def _keyword_call(node: ast.expr) -> Keywords | None:
    """`count_keywords(path, [literal words])` with its load-time pattern, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "count_keywords" and len(node.args) == 2):
        return None
    path, words = _name_chain(node.args[0]), node.args[1]
    if path is None or path[0] in _MUTABLE_ROOTS or not isinstance(words, ast.Constant):
        return None
    pattern = words.value
    if not isinstance(pattern, re.Pattern) or pattern.flags != re.IGNORECASE | re.UNICODE:
        return None
    return Keywords(path, pattern)


def when_atom(node: ast.expr) -> Atom | None:
    """The atom of one conjunct of a `when` expression, or None."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        op, right = node.ops[0], node.comparators[0]
        if isinstance(op, (ast.Eq, ast.NotEq)):
            for path_node, literal_node in ((node.left, right), (right, node.left)):
                path = _name_chain(path_node)
                if path and path[0] not in _MUTABLE_ROOTS and isinstance(literal_node, ast.Constant) \
                        and isinstance(literal_node.value, str):
                    return Equality("when", path, literal_node.value, isinstance(op, ast.Eq))
        bound = right.value if isinstance(right, ast.Constant) and type(right.value) is int else None
        if (isinstance(op, ast.Gt) and bound == 0) or (isinstance(op, ast.GtE) and bound == 1):
            found = _keyword_call(node.left)
            if found is not None:
                return found
    found = _keyword_call(node)
    if found is not None:
        return found
    if _pure_when(node):
        return Pure("when", ast.dump(node), node)
    return None


def rule_atoms(rule: CompiledRule) -> list[Atom]:
    """The leading conjuncts of the rule that are atoms, in evaluation order."""
    atoms: list[Atom] = []
    if rule.match is not None:
        tree = cast(dict[str, Any], rule.match.parsed.parsed)
        for conjunct in _conjuncts_match(tree):
            atom = match_atom(conjunct)
            if atom is None:
                return atoms
            atoms.append(atom)
    if rule.when is None or rule.when.run is None or rule.bindings:  # `let:` names shadow the scope
        return atoms
    for part in _conjuncts_when(rule.when.tree):
        atom = when_atom(part)
        if atom is None:
            break
        atoms.append(atom)
    return atoms


def match_getter(path: tuple[str, ...]) -> Getter:
    """JMESPath field reads: null for anything without fields (never an error)."""

    def get(scope: Scope) -> Any:
        value: Any = scope
        for name in path:
            try:
                value = value.get(name)
            except AttributeError:
                return None
        return value

    return get


def when_getter(path: tuple[str, ...]) -> Getter:
    """Expression field reads: null through null; a field of anything else is an error (Unknown)."""
    first, rest = path[0], path[1:]

    def get(scope: Scope) -> Any:
        value = scope.get(first)
        for name in rest:
            if isinstance(value, Mapping):
                value = value.get(name)
            elif value is None:
                return None
            else:
                raise Unknown
        return value

    return get
