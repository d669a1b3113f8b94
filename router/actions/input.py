"""The `input` action."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Params, show


class InputParams(Params):
    """Reply to an `input` event: `transform` its text or mark it `handled` (no agent run)."""

    action: Literal["continue", "transform", "handled"]
    text: str | None = None


@action("input", events={"input"}, shorthand="action", example="- input: {action: handled}")
def describe_input(params: dict[str, Any]) -> str:
    if params.get("action") == "transform":
        return f"replace the input text with {show(params.get('text'))}"
    return f"input: {params.get('action')}"
