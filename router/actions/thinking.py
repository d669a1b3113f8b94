"""The `thinking` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params


class ThinkingParams(Params):
    """Set the thinking level; with `ceiling`, never above it (off<minimal<low<medium<high<xhigh<max)."""

    level: str
    ceiling: str | None = None


@action("thinking", shorthand="level", example="- thinking: {level: high, ceiling: '{thinking_level}'}")
def describe_thinking(params: dict[str, Any]) -> str:
    ceiling = params.get("ceiling")
    return f"set thinking level {params.get('level')}" + (f" (ceiling {ceiling})" if ceiling else "")
