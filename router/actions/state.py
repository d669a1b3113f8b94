"""Actions on the per-session state that later events read."""

from __future__ import annotations

from typing import Any

from pydantic import RootModel

from router.actions import action
from router.actions._base import show


class SetParams(RootModel[dict[str, Any]]):
    """Write session state: `{key: value}`; dotted keys write nested objects (`ds.band`).

    Later rules of the same event already see the new values. State is persisted in the Pi
    session and restored when it resumes.
    """


@action("set", runs="interpreter", example="- set: {band: react, turns: '{state.turns + 1}'}")
def describe_set(params: dict[str, Any]) -> str:
    return "set state " + ", ".join(f"{k}={show(v)}" for k, v in params.items())


class UnsetParams(RootModel[list[str] | str]):
    """Remove session state keys (dotted keys remove nested ones); one key or a list."""


@action("unset", runs="interpreter", example="- unset: [band, snapshot]")
def describe_unset(params: Any) -> str:
    keys = [params] if isinstance(params, str) else params
    return "unset state " + ", ".join(str(k) for k in keys)
