"""The `entry` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params


class EntryParams(Params):
    """Store a custom entry in the Pi session (`pi.appendEntry`): kept, never sent to the model."""

    type: str
    data: Any = None


@action("entry", example="- entry: {type: my-router, data: {decided: '{state.band}'}}")
def describe_entry(params: dict[str, Any]) -> str:
    return f"append a session entry of type {params.get('type')}"
