"""The `thinking` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params
from router.diagnostics.errors import ExpressionError
from router.lang.functions.models import cap_level


class ThinkingParams(Params):
    """Set the thinking level; with `ceiling`, never above it (off<minimal<low<medium<high<xhigh<max)."""

    level: str
    ceiling: str | None = None


@action("thinking", shorthand="level", example="- thinking: {level: high, ceiling: '{thinking_level}'}")
def describe_thinking(params: dict[str, Any]) -> str:
    """`set thinking level high`; a ceiling that lowers the level says so (thinking off: stays off)."""
    level, ceiling = params.get("level"), params.get("ceiling")
    if not ceiling:
        return f"set thinking level {level}"
    try:
        capped = cap_level(level, ceiling)
    except ExpressionError:
        capped = level
    if capped == level:
        return f"set thinking level {level} (ceiling {ceiling})"
    return f"set thinking level {capped}: {level} capped by the ceiling {ceiling}"
