"""What the executor offers the handler of an action it carries out (`runs="executor"`).

A handler is the action file's `run(params, local)`: `params` rendered, `local` the executor's
means (its log, whole-line appends, JSON updates, slots) for this one effect. It returns None when
done, or what went wrong and its code; an OSError it raises is reported with the file it names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

Failure = tuple[str, str]  # what went wrong, and its code


class Local(Protocol):
    """The executor, as one effect's handler sees it."""

    @property
    def rule_id(self) -> str: ...

    @property
    def checked(self) -> Mapping[str, Path]:
        """The confined parameters' paths, checked (links followed) before the handler runs."""
        ...

    def log(self, text: str) -> None:
        """A line in the router's own log."""

    def append(self, path: Path, line: str, *, named: str) -> Failure | None:
        """Append one whole line (or nothing), naming the file as the rule does on failure."""

    def escape(self, text: str) -> str:
        """`text` as one printable line (router/runtime/log_line.py)."""
        ...

    def update_json(self, path: Path, updates: list[tuple[list[str], Any]], *, backup: bool) -> None:
        """Set values in a JSON object file, keeping the rest of it."""

    def remove_json(self, path: Path, keys: list[str], *, backup: bool) -> None:
        """Remove one key path from a JSON object file, keeping the rest (a missing one: no write)."""

    def release(self, name: str) -> None:
        """Give back the slot `name`, if this session holds it."""


def path_of(value: Any) -> Path | None:
    """A file parameter as a path (`$VAR` and `~` expanded); None when it is empty or not text."""
    if not value or not isinstance(value, str):
        return None
    return Path(os.path.expandvars(value)).expanduser()


def target(params: Mapping[str, Any], local: Local, name: str = "file") -> Path | None:
    """The path of parameter `name`: as checked when confined, else as the rule gives it."""
    return local.checked.get(name) or path_of(params.get(name))
