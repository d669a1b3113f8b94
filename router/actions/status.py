"""The `status` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show


class StatusParams(Params):
    """Set (or clear, with `text: null`) a status-bar entry under `key`."""

    key: str
    text: str | None = None


@action("status", example="- status: {key: my-router, text: 'Router: [ON]'}")
def describe_status(params: dict[str, Any]) -> str:
    text = params.get("text")
    return f"status {params.get('key')}: {show(text)}" if text is not None else \
        f"clear status {params.get('key')}"
