"""What else Pi loads that breaks it beside the bridge: the original routers, and extensions that
register a tool or a command the policy registers (Pi refuses to start: `Tool "x" conflicts ...`).

Extensions are found where Pi finds them (docs/guide.md, section 9): the
directories and files under `<agent>/extensions` and `<project>/.pi/extensions`, and the
`packages` and `extensions` entries of both `settings.json` files. Their sources are read, never
run: at most `MAX_FILES` files of at most `MAX_BYTES` each, links not followed.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the original Pi extensions each built-in pack replaces: the pack, and the tools and commands the
# original registers (the pack pages' "Coming from ..." sections: docs/packs/)
ORIGINALS: dict[str, tuple[str, frozenset[str]]] = {
    "pi-decision-router": ("decision", frozenset({"decision_request", "decision-router-toggle",
                                                  "decision-router-status", "decision-router-log"})),
    "pi-deepseek-router": ("deepseek", frozenset()),
    "pi-cuttle": ("cuttle", frozenset({"cuttle"})),
}
OWN = "pi-policy-router"  # the bridge's own directory
SOURCE_SUFFIXES = (".ts", ".js", ".mjs", ".cjs", ".mts", ".cts")
MAX_FILES = 200
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Extension:
    """One thing Pi loads as an extension, and the command that stops it loading."""

    name: str  # a directory or file name, or a package source such as `npm:pi-cuttle@0.5.0`
    scope: str  # "user" or "project"
    remove: str
    path: Path | None = None  # its files on disk, when we know where they are


def installed(agent: Path, cwd: Path) -> list[Extension]:
    """Every extension Pi would load for the user (agent dir) and for the project in `cwd`."""
    found: list[Extension] = []
    for scope, base, flag in (("user", agent, ""), ("project", cwd / ".pi", " -l")):
        found += _in_directory(base / "extensions", scope)
        found += _in_settings(base / "settings.json", scope, flag)
    return found


def _in_directory(directory: Path, scope: str) -> Iterator[Extension]:
    if not directory.is_dir() or directory.is_symlink():
        return
    for child in sorted(directory.iterdir()):
        if child.name == OWN or child.name.startswith("."):
            continue
        if child.is_dir() or child.suffix in SOURCE_SUFFIXES:
            yield Extension(child.name, scope, f"rm -r {shlex.quote(str(child))}", child)


def _in_settings(settings: Path, scope: str, flag: str) -> Iterator[Extension]:
    data = read_json(settings)
    for entry in data.get("packages", []) if isinstance(data.get("packages"), list) else []:
        source = entry.get("source") if isinstance(entry, dict) else entry
        if isinstance(source, str) and source:
            yield Extension(source, scope, f"pi remove{flag} {shlex.quote(source)}", _local(settings, source))
    for entry in data.get("extensions", []) if isinstance(data.get("extensions"), list) else []:
        if isinstance(entry, str) and entry and not entry.startswith(("+", "-", "builtin:")):
            yield Extension(entry, scope, f'delete "{entry}" from "extensions" in {settings}',
                            _local(settings, entry))


def _local(settings: Path, source: str) -> Path | None:
    """The directory or file a settings entry names, when it is a path (not npm: or git:)."""
    if ":" in source.split("/", 1)[0]:
        return None
    return settings.parent / source


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of Pi's, bounded; {} when missing, too large, not a regular file (a FIFO
    would block the read) or not an object."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def original_of(extension: Extension) -> str | None:
    """The original router this extension is, by its name (a directory, a package source)."""
    lowered = extension.name.lower()
    return next((name for name in ORIGINALS if name in lowered), None)


def names_registered(extension: Extension, names: Iterable[str]) -> list[str]:
    """Which of `names` appear quoted in the extension's sources (a tool or command it registers)."""
    wanted = sorted(set(names))
    if extension.path is None or not wanted:
        return []
    quoted = {name: tuple(q + name + q for q in "\"'`") for name in wanted}
    hits: set[str] = set()
    for text in _sources(extension.path):
        hits |= {name for name, forms in quoted.items() if any(form in text for form in forms)}
    return sorted(hits)


def _sources(root: Path) -> Iterator[str]:
    files = [root] if root.is_file() else _walk(root)
    for count, path in enumerate(files):
        if count >= MAX_FILES:
            return
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
                continue  # a link, a FIFO or a device (whose read would block), or too large
            yield path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue


def _walk(root: Path) -> Iterator[Path]:
    if not root.is_dir() or root.is_symlink():
        return
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != "node_modules" and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES) and not name.endswith(".d.ts"):
                yield Path(folder) / name
