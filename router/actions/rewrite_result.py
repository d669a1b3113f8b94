"""The `rewrite_result` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show


class RewriteResultParams(Params):
    """Replace a tool's result text (and error flag) before the model sees it."""

    text: str
    is_error: bool | None = None


@action("rewrite_result", events={"tool_result"}, shorthand="text", refuses=True,
        example="- rewrite_result: {text: 'The user answered: yes', is_error: false}")
def describe_rewrite_result(params: dict[str, Any]) -> str:
    return f"rewrite the tool result: {show(params.get('text'))}"
