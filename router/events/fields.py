"""The field tree of the evaluation scope, for checking paths such as `tool.name` at load time."""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from router.events.catalog import EVENT_MODELS


class _Any:
    """Any value: paths below it are not checked."""

    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()


@dataclass(frozen=True)
class DictOf:
    """An object with free keys whose values follow `item`."""

    item: Any


Tree = Any  # dict[str, Tree] | ANY | DictOf | None (a leaf)


def _tree_of(tp: Any, depth: int = 0) -> Tree:
    if depth > 6:
        return ANY
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(tp) if a is not type(None)]
        return _tree_of(members[0], depth) if len(members) == 1 else ANY
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {(f.alias or n): _tree_of(f.annotation, depth + 1) for n, f in tp.model_fields.items()}
    if origin is dict:
        return DictOf(_tree_of(get_args(tp)[1], depth + 1))
    if origin is list or tp is Any:
        return ANY
    return None


_EVENT_TREES: dict[str, dict[str, Tree]] = {name: _tree_of(model) for name, model in EVENT_MODELS.items()}


def event_tree(event_types: Iterable[str]) -> dict[str, Tree]:
    """Union of the field trees of the given event types: a new top level, whose subtrees are
    shared (nothing changes a tree once built)."""
    return dict(_merged_tree(tuple(event_types)))


@lru_cache(maxsize=256)
def _merged_tree(event_types: tuple[str, ...]) -> dict[str, Tree]:
    """The union, merged once per process for each list of event types: a compile checks every
    signal against the union of all the events (87 merges of the same trees for the cuttle pack)."""
    merged: dict[str, Tree] = {}
    for name in event_types:
        for key, sub in _EVENT_TREES.get(name, {}).items():
            merged[key] = _merge(merged[key], sub) if key in merged else sub
    return merged


def events_with_field(name: str) -> list[str]:
    """The event types whose top level has a field `name` (for a hint when a rule's own has not)."""
    return [event_type for event_type, tree in _EVENT_TREES.items() if name in tree]


def _merge(a: Tree, b: Tree) -> Tree:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for key, sub in b.items():
            out[key] = _merge(out[key], sub) if key in out else sub
        return out
    return a if a == b else ANY


def scope_tree(event_types: Iterable[str], *, var_names: Iterable[str],
               signal_names: Iterable[str]) -> dict[str, Tree]:
    """Every name a rule on these events can read, with the policy's vars and signals."""
    tree = dict(event_tree(event_types))
    tree["vars"] = {name: ANY for name in var_names}
    tree["signals"] = {name: ANY for name in signal_names}
    tree["signal_errors"] = {name: None for name in signal_names}
    tree["state"] = ANY
    tree["type"] = None
    return tree


@dataclass(frozen=True)
class PathProblem:
    """Where a path leaves the known tree: the index of the bad part and the names known there."""

    index: int
    known: tuple[str, ...]


def check_path(tree: Mapping[str, Tree], path: tuple[str, ...]) -> PathProblem | None:
    """None when the path exists (or enters a free part of the tree)."""
    node: Tree = tree
    for index, part in enumerate(path):
        if node is ANY:
            return None
        if isinstance(node, DictOf):
            node = node.item
            continue
        if not isinstance(node, dict):
            return PathProblem(index, ())
        if part not in node:
            return PathProblem(index, tuple(sorted(node)))
        node = node[part]
    return None
