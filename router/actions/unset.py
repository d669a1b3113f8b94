"""The `unset` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params


class UnsetParams(Params):
    """Remove session state keys (dotted keys remove nested ones); one key or a list."""

    root: list[str] | str


@action("unset", runs="interpreter", example="- unset: [band, snapshot]")
def describe_unset(params: Any) -> str:
    keys = [params] if isinstance(params, str) else params
    return "unset state " + ", ".join(str(k) for k in keys)


def run(state: dict[str, Any], params: Any) -> None:
    """Remove each key; a dotted key removes from nested objects (copied), a missing one is no error."""
    for key in [params] if isinstance(params, str) else params:
        target, parts = state, key.split(".")
        for part in parts[:-1]:
            child = target.get(part)
            if not isinstance(child, dict):
                break
            child = dict(child)
            target[part] = child
            target = child
        else:
            target.pop(parts[-1], None)
