"""The session's state as the bridge stores it: transient keys left out, compared as canonical
JSON so an entry is stored only when the state really changed."""

from __future__ import annotations

import copy
import json
from typing import Any


def without_keys(state: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """A copy of `state` without the dotted `keys`; a parent they leave empty goes too."""
    result = copy.deepcopy(state)
    for key in keys:
        _drop(result, key.split("."))
    return result


def _drop(target: dict[str, Any], parts: list[str]) -> None:
    head, rest = parts[0], parts[1:]
    if not rest:
        target.pop(head, None)
        return
    child = target.get(head)
    if isinstance(child, dict) and child:
        _drop(child, rest)
        if not child:
            del target[head]


def canonical_json(value: Any) -> str:
    """One text per JSON value (key order and tuples vs lists do not matter)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
