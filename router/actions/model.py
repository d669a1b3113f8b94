"""The `model` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Field, Params


class ModelParams(Params):
    """Switch the session's model (`pi.setModel`) to a ref `provider/id` from Pi's registry.

    A ref Pi does not know, or a model without credentials, leaves the model unchanged and
    produces a warning. Set the thinking level after the model: Pi clamps it per model.
    """

    ref: str = Field(description="template: 'provider/id'")


@action("model", shorthand="ref", example="- model: fake/fake-cloud")
def describe_model(params: dict[str, Any]) -> str:
    return f"switch model to {params.get('ref')}"
