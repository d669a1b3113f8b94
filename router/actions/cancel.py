"""The `cancel` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params


class CancelParams(Params):
    """Cancel a compaction that is about to start (`compaction_before`)."""


@action("cancel", events={"compaction_before"}, refuses=True, example="- cancel: {}")
def describe_cancel(params: dict[str, Any]) -> str:
    return "cancel this compaction"
