"""The action vocabulary: a fixed registry of what rules may ask for, one file per action.

Each action is a file `router/actions/<name>.py` (a new file is found by its name, nothing else
lists it). It holds a `Params` class of the action's parameters (strings in them are `{…}`
templates, rendered when the rule fires; its docstring is the action's documentation) and an
`@action` describe function that says what would be done, declaring where the action runs
(`interpreter`: state changes applied while evaluating; `executor`: local effects such as files;
`bridge`: applied through Pi's API), the capability each of its parameters needs
(docs/security.md), the event types it is valid on, a shorthand field (so `notify: "hi"` means
`notify: {text: "hi"}`) and whether it refuses what the event asks for (`block`, `cancel`: a rule
with such an action is a guard, which fails closed, docs/reliability.md). An action the interpreter
or the executor carries out has its handler there too, `run`; the bridge's are in
router/bridge/apply.ts.

The files import no pydantic: the sidecar's start path, which reads what it needs from the compiled
policy, imports an action's file to run its handler and never loads pydantic. The registry (`ACTIONS`,
`registry()`) builds the parameter models on first use (router/actions/_registry.py).
Signal kinds are one file each too, in router/actions/signals/ (their registry is there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from router.actions._registry import RUNS, ActionSpec, Describe, Runs, action, declared, registry, runner

if TYPE_CHECKING:
    from collections.abc import Mapping

    ACTIONS: Mapping[str, ActionSpec]  # built on first access (module __getattr__)

__all__ = ["RUNS", "ActionSpec", "Describe", "Runs", "action", "action_names", "declared", "registry",
           "runner"]


def action_names() -> list[str]:
    return sorted(registry())


def __getattr__(name: str) -> Any:
    if name == "ACTIONS":
        return registry()
    raise AttributeError(f"module 'router.actions' has no attribute {name!r}")
