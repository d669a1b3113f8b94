"""The `context_message` action."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Params, show


class ContextMessageParams(Params):
    """Add an ephemeral message to this provider request only (never stored in the session).

    `after_user` puts it right after the run's triggering user message (keeps the request prefix
    stable and never lands between a tool call and its result); `end` appends it last. Messages
    of the same `custom_type` already present are removed first, so there is exactly one.
    """

    text: str
    role: Literal["user", "custom"] = "user"
    custom_type: str = "router-guidance"
    position: Literal["after_user", "end"] = "after_user"


@action("context_message", events={"context"}, shorthand="text",
        example="- context_message: {text: 'Decide the task type first.', position: end}")
def describe_context_message(params: dict[str, Any]) -> str:
    return f"add ephemeral {params.get('role', 'user')} message ({params.get('position', 'after_user')}): " \
           f"{show(params.get('text'))}"
