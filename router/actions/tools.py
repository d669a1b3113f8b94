"""The `tools` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show


class ToolsParams(Params):
    """Set the active tools: `only` replaces the set, `add`/`remove` edit it.

    Names Pi does not know are dropped (Pi ignores them); the bridge calls `setActiveTools` only
    when the resulting list differs from the active one. Changes made on `input` or
    `before_agent_start` reach the first request of the run; later ones reach the next request.
    """

    only: list[str] | str | None = None
    add: list[str] | str | None = None
    remove: list[str] | str | None = None

    def check(self) -> None:
        if sum(v is not None for v in (self.only, self.add, self.remove)) != 1:
            raise ValueError("give exactly one of only, add, remove")


@action("tools", shorthand="only", example="- tools: {only: [read, edit, write]}")
def describe_tools(params: dict[str, Any]) -> str:
    for key in ("only", "add", "remove"):
        if params.get(key) is not None:
            return f"set active tools ({key}): {show(params[key])}"
    return "set active tools"
