"""The `set` action."""

from __future__ import annotations

import copy
from typing import Any

from router.actions import action
from router.actions._base import Params, show


class SetParams(Params):
    """Write session state: `{key: value}`; dotted keys write nested objects (`ds.band`).

    Later rules of the same event already see the new values. State is persisted in the Pi
    session and restored when it resumes.
    """

    root: dict[str, Any]


@action("set", runs="interpreter", example="- set: {band: react, turns: '{state.turns + 1}'}")
def describe_set(params: dict[str, Any]) -> str:
    return "set state " + ", ".join(f"{k}={show(v)}" for k, v in params.items())


def run(state: dict[str, Any], params: dict[str, Any]) -> None:
    """Write each value (a copy) under its key; a dotted key writes into nested objects, copied."""
    for key, value in params.items():
        target, parts = state, key.split(".")
        for part in parts[:-1]:
            child = target.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            target[part] = child
            target = child
        target[parts[-1]] = copy.deepcopy(value)
