"""Base class of action parameter models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


def show(value: object) -> str:
    """Short display of a parameter value for `describe`."""
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 120 else text[:117] + "..."
