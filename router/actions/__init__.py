"""The action vocabulary: a fixed registry of what rules may ask for, one entry per action.

Each action registers with `@action` into `ACTIONS`: a pydantic model of its parameters (strings in
them are `{…}` templates, rendered when the rule fires; its docstring is the action's
documentation), where it runs (`interpreter`: state changes applied while evaluating; `executor`:
local effects such as files; `bridge`: applied through Pi's API), the capability each of its
parameters needs (docs/security.md), the event types it is valid on, a shorthand field (so
`notify: "hi"` means `notify: {text: "hi"}`), whether it refuses what the event asks for (`block`,
`cancel`: a rule with such an action is a guard, which fails closed, docs/reliability.md) and a
`describe` function that says what would be done.

The registry is built on first use of `ACTIONS` (the action modules import pydantic), so the
sidecar's start path, which reads what it needs from the compiled policy, never loads it.
Signal kinds have their registry in `router/actions/signal_kinds.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

Describe = Callable[[dict[str, Any]], str]
Runs = Literal["interpreter", "executor", "bridge"]
RUNS: tuple[Runs, ...] = ("interpreter", "executor", "bridge")


@dataclass(frozen=True)
class ActionSpec:
    """One action: its parameters, where it runs, what it may touch, how to describe it."""

    name: str
    params: type[BaseModel]
    describe: Describe
    runs: Runs = "bridge"
    capabilities: Mapping[str, str] = field(default_factory=dict)  # parameter -> capability
    events: frozenset[str] | None = None
    shorthand: str | None = None
    example: str = ""
    refuses: bool = False  # it refuses what the event asks for: its rule fails closed


_ACTIONS: dict[str, ActionSpec] = {}
if TYPE_CHECKING:
    ACTIONS: dict[str, ActionSpec]  # built on first access (module __getattr__)
_loaded: list[bool] = []


def action(
    name: str, *, runs: Runs = "bridge", capabilities: Mapping[str, str] | None = None,
    events: set[str] | None = None, shorthand: str | None = None, example: str = "",
    refuses: bool = False,
) -> Callable[[Describe], Describe]:
    """Register the decorated describe function as action `name` with params model `<Name>`."""

    def register(describe: Describe) -> Describe:
        params = describe.__globals__[_params_name(name)]
        _ACTIONS[name] = ActionSpec(name, params, describe, runs, dict(capabilities or {}),
                                    frozenset(events) if events is not None else None,
                                    shorthand, example.strip(), refuses)
        return describe

    return register


def _params_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Params"


def registry() -> dict[str, ActionSpec]:
    """Every action by name (the action modules are imported on the first call)."""
    if not _loaded:
        from router.actions import answers, panel, prompt, session, state, tools_models  # noqa: F401

        _loaded.append(True)
    return _ACTIONS


def action_names() -> list[str]:
    return sorted(registry())


def __getattr__(name: str) -> Any:
    if name == "ACTIONS":
        return registry()
    raise AttributeError(f"module 'router.actions' has no attribute {name!r}")
