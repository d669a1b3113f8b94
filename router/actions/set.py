"""The `set` action."""

from __future__ import annotations

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
