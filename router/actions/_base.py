"""What an action's file declares its parameters with, without importing pydantic.

An action's parameters are a class of annotated fields deriving from `Params`, written as a
pydantic model would be (`text: str`, `level: Literal[...] = "info"`, `key: str = Field(description=...)`,
a `check` method for what spans fields). The registry turns each into a pydantic model on first use
(router/actions/_build.py), so the sidecar imports an action's file, and runs its handler, without
pydantic.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

REQUIRED: Any = ...  # the default of a field that has none


class Params:
    """Base of action parameter classes (extra fields forbidden); `root: T` makes it a root model.

    A `check(self)` method, if defined, runs after the fields validate; a ValueError it raises is
    the validation error."""

    if TYPE_CHECKING:
        model_fields_set: set[str]  # the fields the rule gave (in `check`)


class FieldInfo:
    """A field's default and description (a plain class: a dataclass costs ~1 ms to create, on
    the sidecar's first effect)."""

    __slots__ = ("bounds", "default", "description")

    def __init__(self, default: Any = REQUIRED, description: str | None = None,
                 bounds: dict[str, Any] | None = None) -> None:
        self.default = default
        self.description = description
        self.bounds = bounds or {}


def Field(default: Any = REQUIRED, *, description: str | None = None, ge: float | None = None,
          le: float | None = None) -> Any:
    """A field's default, its description (the reference's "meaning" column) and the bounds of a
    number (`ge`, `le`)."""
    bounds = {name: value for name, value in (("ge", ge), ("le", le)) if value is not None}
    return FieldInfo(default, description, bounds)


def show(value: object) -> str:
    """Short display of a parameter value for `describe` (JSON for anything but text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
