"""The `notify` action."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Params, show


class NotifyParams(Params):
    """Show a notification to the user (`ctx.ui.notify`; stderr in print mode)."""

    text: str
    level: Literal["info", "warning", "error"] = "info"


@action("notify", shorthand="text", example="- notify: {text: 'Compacting…', level: warning}")
def describe_notify(params: dict[str, Any]) -> str:
    return f"notify ({params.get('level', 'info')}): {show(params.get('text'))}"
