"""Silent mistakes: a comparison of an event object with a text (RT317), and a policy file that
says nothing (RT318). Rules that can never fire are RT306 (router/lint/checks.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from router.compile.ir import CompiledPolicy, CompiledRule
from router.diagnostics.code_names import (
    EMPTY_POLICY_FILE,
    OBJECT_COMPARED_WITH_TEXT,
)
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.events.fields import ANY, DictOf, event_tree
from router.lang.expr.expression import Expression
from router.lint import check

_COMPARISONS = (ast.Eq, ast.NotEq)


@check(OBJECT_COMPARED_WITH_TEXT)
def object_compared_with_text(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """`model == 'fake/x'`: an event object equals no text, so the condition is always false."""
    for rule in policy.rules:
        if rule.when is None:
            continue
        tree = event_tree(rule.on)
        for path, text in _object_text_pairs(rule.when, tree):
            fields = _fields_at(tree, path)
            shown = ".".join(path)
            better = f"{shown}.ref" if "ref" in fields else f"{shown}.{fields[0]}" if fields else shown
            yield Diagnostic(
                OBJECT_COMPARED_WITH_TEXT,
                f"rule '{rule.id}' compares {shown}, an object, with the text {text!r}: "
                "the two are never equal", rule.when_span or rule.span, Severity.WARNING, rule_id=rule.id,
                help=f"compare one of its fields, e.g. {better} == {text!r} "
                     f"(the fields of {shown}: {', '.join(fields)})")


def _object_text_pairs(expr: Expression, tree: dict[str, Any]) -> Iterator[tuple[tuple[str, ...], str]]:
    for node in ast.walk(expr.tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            if not isinstance(op, _COMPARISONS):
                continue
            for side, other in ((left, right), (right, left)):
                path = _path_of(side)
                if path and isinstance(other, ast.Constant) and isinstance(other.value, str) \
                        and isinstance(_node_at(tree, path), dict):
                    yield path, other.value


def _path_of(node: ast.expr) -> tuple[str, ...] | None:
    """`a.b.c` as ("a", "b", "c"); None for anything but a plain name or attribute chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))


def _node_at(tree: Any, path: tuple[str, ...]) -> Any:
    node = tree
    for part in path:
        if isinstance(node, DictOf):
            node = node.item
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return ANY
    return node


def _fields_at(tree: dict[str, Any], path: tuple[str, ...]) -> list[str]:
    node = _node_at(tree, path)
    return sorted(node) if isinstance(node, dict) else []


@check(EMPTY_POLICY_FILE)
def empty_files(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """A policy file of the user's that sets nothing: empty, comments only, or `version: 1` alone."""
    for f in policy.files:
        if f.layer == "pack" or f.policy.model_fields_set - {"version"}:
            continue
        yield Diagnostic(EMPTY_POLICY_FILE,
                         "this policy file sets nothing: no rules, no `use:`, no vars",
                         f.doc.span(()), Severity.WARNING,
                         help="add `use: [default]` or rules (`router init` writes a starter policy); "
                              "an empty file changes nothing")


def always_true(rule: CompiledRule) -> bool:
    """A rule whose conditions hold for every event (none, or only constant true ones)."""
    return all(_constant_true(cond) for _, cond, _ in rule.conditions)


def _constant_true(cond: Any) -> bool:
    if isinstance(cond, Expression):
        tree = cond.tree
        return (isinstance(tree, ast.Constant) and bool(tree.value)) or \
            (isinstance(tree, ast.Name) and tree.id in ("true", "True"))
    source = getattr(cond, "source", "")
    return isinstance(source, str) and source.strip() == "`true`"
