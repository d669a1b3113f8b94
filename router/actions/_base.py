"""Base class of action parameter models."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


def show(value: object) -> str:
    """Short display of a parameter value for `describe` (JSON for anything but text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
