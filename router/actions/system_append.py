"""The `system_append` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show


class SystemAppendParams(Params):
    """Append text to Pi's system prompt (never replacing it), after a blank line.

    With `marker`, nothing is appended when the prompt already contains the marker, so the text
    is never duplicated.
    """

    text: str
    marker: str | None = None


@action("system_append", events={"before_agent_start"}, shorthand="text",
        example="- system_append: {text: '[policy] be brief', marker: '[policy]'}")
def describe_system_append(params: dict[str, Any]) -> str:
    return f"append to the system prompt: {show(params.get('text'))}"
