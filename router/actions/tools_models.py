"""Actions on the tool set, the model and the thinking level."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

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

    @model_validator(mode="after")
    def _one(self) -> ToolsParams:
        if sum(v is not None for v in (self.only, self.add, self.remove)) != 1:
            raise ValueError("give exactly one of only, add, remove")
        return self


@action("tools", shorthand="only", example="- tools: {only: [read, edit, write]}")
def describe_tools(params: dict[str, Any]) -> str:
    for key in ("only", "add", "remove"):
        if params.get(key) is not None:
            return f"set active tools ({key}): {show(params[key])}"
    return "set active tools"


class ModelParams(Params):
    """Switch the session's model (`pi.setModel`) to a ref `provider/id` from Pi's registry.

    A ref Pi does not know, or a model without credentials, leaves the model unchanged and
    produces a warning. Set the thinking level after the model: Pi clamps it per model.
    """

    ref: str = Field(description="template: 'provider/id'")


@action("model", shorthand="ref", example="- model: fake/fake-cloud")
def describe_model(params: dict[str, Any]) -> str:
    return f"switch model to {params.get('ref')}"


class ThinkingParams(Params):
    """Set the thinking level; with `ceiling`, never above it (off<minimal<low<medium<high<xhigh<max)."""

    level: str
    ceiling: str | None = None


@action("thinking", shorthand="level", example="- thinking: {level: high, ceiling: '{thinking_level}'}")
def describe_thinking(params: dict[str, Any]) -> str:
    ceiling = params.get("ceiling")
    return f"set thinking level {params.get('level')}" + (f" (ceiling {ceiling})" if ceiling else "")


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
