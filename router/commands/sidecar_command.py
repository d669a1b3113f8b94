"""Which command starts the sidecar on this machine: the bridge's resolution (router/bridge/resolve.mjs),
in Python for `router install` and `router doctor`. tests/bridge/test_bridge_resolve.py runs both on the same
cases.

In order: `$ROUTER_SERVE` (a JSON array, for tests and development), `$ROUTER_PYTHON` (an
interpreter, run as `-P -m router serve`), the `command` of the user's own install
(`<agent dir>/extensions/pi-policy-router/router-bridge.json`), `router` on PATH, `python3` on PATH.
Nothing a project's files say is a step: a project's `router-bridge.json` never names a command.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from router.commands.install import CONFIG_NAME, EXTENSION_NAME, configured_command

PYTHON_ARGS = ("-P", "-m", "router", "serve")


@dataclass(frozen=True)
class Resolved:
    """The command, and the step of the resolution that gave it."""

    command: list[str]
    via: str

    def describe(self) -> str:
        return f"{' '.join(self.command)} (from {self.via})"


def user_config(agent: Path) -> Path:
    """Where `router install` (for the user) writes the bridge's config."""
    return agent / "extensions" / EXTENSION_NAME / CONFIG_NAME


def resolve(env: Mapping[str, str], agent: Path) -> Resolved:
    """The first step that gives a command (as the bridge resolves it in Pi)."""
    serve = _parse_serve(env.get("ROUTER_SERVE") or "")
    if serve:
        return Resolved(serve, "ROUTER_SERVE")
    if env.get("ROUTER_PYTHON"):
        return Resolved([env["ROUTER_PYTHON"], *PYTHON_ARGS], "ROUTER_PYTHON")
    user = configured_command(user_config(agent).parent)
    if user:
        return Resolved(user, "user install")
    router = on_path("router", env.get("PATH"))
    if router:
        return Resolved([router, "serve"], "router on PATH")
    python = on_path("python3", env.get("PATH"))
    if python:
        return Resolved([python, *PYTHON_ARGS], "python3 on PATH")
    return Resolved(["router", "serve"], "default")


def _parse_serve(text: str) -> list[str] | None:
    """`$ROUTER_SERVE`: a JSON array, else words split on spaces (as the bridge reads it)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return [word for word in text.split(" ") if word] or None
    if isinstance(parsed, list) and parsed:
        return [_js_string(part) for part in parsed]
    return None


def _js_string(value: object) -> str:
    """`String(value)` as JavaScript writes the JSON values a command might hold."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def on_path(name: str, path_value: str | None) -> str | None:
    """An executable file `name` in an absolute directory of PATH (relative entries are skipped)."""
    for directory in (path_value or "").split(os.pathsep):
        if not os.path.isabs(directory):
            continue
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
