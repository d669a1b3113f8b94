"""The `release` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params
from router.actions._local import Failure, Local


class ReleaseParams(Params):
    """Give back a slot taken by a `slot` signal (by its `name`)."""

    name: str = "turn"


@action("release", runs="executor", shorthand="name", example="- release: turn")
def describe_release(params: dict[str, Any]) -> str:
    return f"release slot {params.get('name')}"


def run(params: dict[str, Any], local: Local) -> Failure | None:
    local.release(str(params.get("name") or "turn"))
    return None
