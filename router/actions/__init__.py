"""The action vocabulary: a fixed registry of what rules may ask the executor to do.

Each action registers with `@action` into `ACTIONS`: a pydantic model of its parameters (strings in
them are `{…}` templates, rendered when the rule fires), the event types it is valid on, a
shorthand field (so `notify: "hi"` means `notify: {text: "hi"}`) and a `describe` function that
says what the executor would do. The docstring of the params model is the action's documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

Describe = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class ActionSpec:
    """One action: its parameters, where it is valid and how to describe its effect."""

    name: str
    params: type[BaseModel]
    describe: Describe
    events: frozenset[str] | None = None
    shorthand: str | None = None
    example: str = ""


ACTIONS: dict[str, ActionSpec] = {}


def action(
    name: str, *, events: set[str] | None = None, shorthand: str | None = None, example: str = ""
) -> Callable[[Describe], Describe]:
    """Register the decorated describe function as action `name` with params model `<Name>`."""

    def register(describe: Describe) -> Describe:
        params = describe.__globals__[_params_name(name)]
        ACTIONS[name] = ActionSpec(name, params, describe,
                                   frozenset(events) if events is not None else None,
                                   shorthand, example.strip())
        return describe

    return register


def _params_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Params"


def action_names() -> list[str]:
    return sorted(ACTIONS)


def _load() -> None:
    from router.actions import answers, panel, prompt, session, state, tools_models  # noqa: F401


_load()
