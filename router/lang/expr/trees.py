"""The walkers of parameter trees: nested dicts and lists whose leaves are values or templates
(an action's parameters, a signal's request), as written, compiled, cached and rendered."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from router.lang.expr.expression import Template

Path = tuple[str | int, ...]


def map_leaves(tree: Any, leaf: Callable[[Any], Any]) -> Any:
    """`tree` with the same shape and `leaf` applied to every value that is not a dict or a list."""
    if isinstance(tree, dict):
        return {key: map_leaves(value, leaf) for key, value in tree.items()}
    if isinstance(tree, list):
        return [map_leaves(value, leaf) for value in tree]
    return leaf(tree)


def leaves(tree: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every value that is not a dict or a list, with the keys and indexes that lead to it."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from leaves(value, (*path, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from leaves(value, (*path, index))
    else:
        yield path, tree


def templates_in(tree: Any) -> list[Template]:
    """The compiled templates of a tree, in order (the leaves' order, without their paths)."""
    found: list[Template] = []
    _collect_templates(tree, found)
    return found


def _collect_templates(tree: Any, found: list[Template]) -> None:
    if isinstance(tree, dict):
        for value in tree.values():
            _collect_templates(value, found)
    elif isinstance(tree, list):
        for value in tree:
            _collect_templates(value, found)
    elif isinstance(tree, Template):
        found.append(tree)
