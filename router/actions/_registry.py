"""The action registry's machinery: `@action` declarations, found by file, built into `ActionSpec`s.

An action is one file, `router/actions/<name>.py`: its `Params` class, its `@action(...)` describe
function and, when the interpreter or the executor carries it out, its `run` handler. Importing the
file declares the action without pydantic (the sidecar does that to find a handler, by the action's
name); `registry()` imports every file, and builds an action's parameter model (pydantic) the first
time that action is looked up (a policy's compile builds the few it uses, not all).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

    from router.actions._base import Params

Describe = Callable[[Any], str]
Runs = Literal["interpreter", "executor", "bridge"]
RUNS: tuple[Runs, ...] = ("interpreter", "executor", "bridge")
NOT_ACTIONS = frozenset({"signals"})  # the package of the signal kinds (a folder: listed by name)


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


@dataclass(frozen=True)
class Declared:
    """An action as its file declares it: the `ActionSpec` with the parameters not yet a model."""

    spec: ActionSpec  # `params` is the file's `Params` class until `registry()` builds it
    module: str

    def handler(self) -> Any:
        """The file's `run`: what the interpreter or the executor calls (None for the bridge's)."""
        return getattr(importlib.import_module(self.module), "run", None)


_DECLARED: dict[str, Declared] = {}
_RUNNERS: dict[str, tuple[Runs, Any]] = {}


def action(
    name: str, *, runs: Runs = "bridge", capabilities: Mapping[str, str] | None = None,
    events: set[str] | None = None, shorthand: str | None = None, example: str = "",
    refuses: bool = False,
) -> Callable[[Describe], Describe]:
    """Declare the decorated describe function as action `name` with params class `<Name>Params`."""

    def register(describe: Describe) -> Describe:
        params = describe.__globals__[params_name(name)]
        spec = ActionSpec(name, params, describe, runs, dict(capabilities or {}),
                          frozenset(events) if events is not None else None, shorthand, example.strip(),
                          refuses)
        _DECLARED[name] = Declared(spec, describe.__module__)
        return describe

    return register


def params_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Params"


def declared(name: str) -> Declared | None:
    """Action `name` as its file declares it (the file is imported, pydantic is not); None if unknown."""
    if name not in _DECLARED and name.isidentifier() and not name.startswith("_") and name not in NOT_ACTIONS:
        try:
            importlib.import_module(f"router.actions.{name}")
        except ModuleNotFoundError:
            return None
    return _DECLARED.get(name)


def runner(name: str) -> tuple[Runs, Any]:
    """Where action `name` runs and its file's handler (None for the bridge's, or an unknown name);
    looked up once per name: the interpreter and the executor ask for every effect."""
    found = _RUNNERS.get(name)
    if found is None:
        spec = declared(name)
        found = _RUNNERS[name] = (spec.spec.runs, spec.handler()) if spec else ("bridge", None)
    return found


def module_names() -> list[str]:
    """The action files: every module of the package but the private ones and the signal kinds."""
    folder = os.path.dirname(__file__)
    return sorted(entry[:-3] for entry in os.listdir(folder)
                  if entry.endswith(".py") and not entry.startswith("_") and entry[:-3] not in NOT_ACTIONS)


def declarations() -> dict[str, Declared]:
    """Every action as declared (each file imported; no model built)."""
    for module in module_names():
        importlib.import_module(f"router.actions.{module}")
    return _DECLARED


class Registry(Mapping[str, ActionSpec]):
    """Every declared action by name, in name order; an action's `ActionSpec` (its parameters a
    pydantic model) is built on its first lookup and kept."""

    def __init__(self, declared: Mapping[str, Declared]) -> None:
        self._declared = declared
        self._built: dict[str, ActionSpec] = {}

    def __getitem__(self, name: str) -> ActionSpec:
        if name not in self._built:
            from dataclasses import replace

            from router.actions._build import model_of

            spec = self._declared[name].spec
            params: type[Params] = spec.params  # type: ignore[assignment]
            self._built[name] = replace(spec, params=model_of(params))
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._declared

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._declared))

    def __len__(self) -> int:
        return len(self._declared)


@functools.cache
def registry() -> Registry:
    """Every action by name (the files are imported on the first call, each model on its lookup)."""
    return Registry(declarations())
