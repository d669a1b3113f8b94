"""The base of the policy file's pydantic models (router/load/model.py, router/load/provides.py)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STATE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")
