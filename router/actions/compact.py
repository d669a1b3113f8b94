"""The `compact` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params


class CompactParams(Params):
    """Compact the context (`ctx.compact`).

    Pi aborts a running run when compaction starts, so by default the bridge waits until the
    agent is idle (`agent_settled`). `abort: true` compacts right away, interrupting the run.
    The outcome arrives as a `compaction_done` or `compaction_failed` event with `by_router`.
    """

    instructions: str | None = None
    abort: bool = False


@action("compact", example="- compact: {}")
def describe_compact(params: dict[str, Any]) -> str:
    return "compact the context" + (" now (aborting the run)" if params.get("abort") else " when idle")
