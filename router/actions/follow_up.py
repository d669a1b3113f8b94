"""The `follow_up` action."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Params, show


class FollowUpParams(Params):
    """Send a message that makes Pi take another turn (`pi.sendMessage`, stored in the session).

    `hidden: true` keeps it out of the TUI transcript (display false).
    """

    text: str
    custom_type: str = "router-follow-up"
    hidden: bool = True
    deliver: Literal["followUp", "steer", "nextTurn"] = "followUp"
    details: Any = None


@action("follow_up", shorthand="text",
        example="- follow_up: {text: 'Continue the interrupted task.', hidden: true}")
def describe_follow_up(params: dict[str, Any]) -> str:
    return f"send a {'hidden ' if params.get('hidden', True) else ''}follow-up: {show(params.get('text'))}"
