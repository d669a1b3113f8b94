"""The `route` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Field, Params


class RouteParams(Params):
    """Answer a virtual model's `route` request: the physical model (and thinking level) to use.

    `state` is stored by Pi on the session branch and comes back as `route_state`.
    """

    model: str = Field(description="template: physical model ref 'provider/id'")
    thinking: str | None = None
    state: Any = None
    error: str | None = Field(None, description="fail this request with this message instead")


@action("route", events={"route"}, shorthand="model",
        example="- route: {model: '{vars.cloud}', thinking: medium}")
def describe_route(params: dict[str, Any]) -> str:
    thinking = params.get("thinking")
    return f"route this request to {params.get('model')}" + (f" at thinking {thinking}" if thinking else "")
