"""The `block` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show


class BlockParams(Params):
    """Block a tool call; the model reads `reason` as the tool result."""

    reason: str = "Blocked by policy."


@action("block", events={"tool_call"}, shorthand="reason", refuses=True,
        example="- block: 'rm -rf is not allowed here'")
def describe_block(params: dict[str, Any]) -> str:
    return f"block the tool call: {show(params.get('reason'))}"
