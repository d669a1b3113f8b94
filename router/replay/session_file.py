"""Pi's session files (JSONL, one entry per line): read them without ever failing on content.

A file starts with a `session` header (id, cwd, timestamp); every other line is an entry with a
`type` (message, model_change, thinking_level_change, compaction, custom, ...). A line that is
not a JSON object, or an entry without a type, is skipped and reported as `file:line: reason`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.diagnostics.errors import SourceError
from router.load.file_reading import read_bytes
from router.load.paths import display_path

MAX_LINE_CHARS = 16 * 1024 * 1024  # a longer line is skipped (Pi's own lines are far shorter)
MAX_SESSION_BYTES = 512 * 1024 * 1024  # a larger session file is refused, not read into memory
LOG_PREFIX = "decisions"  # decisions*.jsonl inside the given paths are decision logs, not sessions


@dataclass(frozen=True)
class Problem:
    """A line (or a file) that could not be read."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Entry:
    """One session entry and its line number (1-based) in the file."""

    line: int
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.data.get("type"))

    @property
    def message(self) -> dict[str, Any]:
        """The entry's `message` (empty unless a well-formed message entry)."""
        message = self.data.get("message")
        return message if isinstance(message, dict) else {}


@dataclass
class SessionFile:
    """The readable part of one session file."""

    path: str  # as shown to people
    id: str
    cwd: str = ""
    timestamp: str = ""
    entries: list[Entry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def parse_session(text: str, path: str) -> SessionFile:
    """Parse a session file's text; every unreadable line becomes a Problem, never an exception."""
    session = SessionFile(path=path, id=_id_from_name(path))
    header_seen = False
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        data = _json_object(line, session, number)
        if data is None:
            continue
        kind = data.get("type")
        if not isinstance(kind, str) or not kind:
            session.problems.append(Problem(path, number, "entry without a `type`; skipped"))
            continue
        if kind == "session":
            if not header_seen:
                header_seen = True
                _read_header(session, data)
            continue
        if kind == "message" and not isinstance(data.get("message"), dict):
            session.problems.append(Problem(path, number, "message entry without a `message` object; "
                                                          "skipped"))
            continue
        session.entries.append(Entry(number, data))
    if not header_seen and (session.entries or session.problems):
        session.problems.insert(0, Problem(path, 1, "no `session` header line; the id is taken from "
                                                    "the file name"))
    return session


def read_session(path: Path) -> SessionFile:
    """Read one session file; an unreadable file is a SessionFile with one Problem."""
    shown = display_path(path)
    try:  # a regular file of bounded size: never a FIFO, a device or a file of /proc
        raw = read_bytes(path, display=shown, limit=MAX_SESSION_BYTES)
    except SourceError as exc:
        return SessionFile(path=shown, id=_id_from_name(shown),
                           problems=[Problem(shown, 0, "cannot read: " + "; ".join(
                               d.message for d in exc.diagnostics))])
    return parse_session(raw.decode("utf-8", "replace"), shown)


def session_paths(paths: Iterable[Path]) -> Iterator[Path]:
    """Session files among `paths`: files as given, directories searched recursively for *.jsonl
    (decision logs, `decisions*.jsonl`, left out), in sorted order."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.jsonl") if p.is_file() and not is_log_file(p))
        else:
            yield path


def log_paths_in(paths: Iterable[Path]) -> list[Path]:
    """Decision logs (`decisions*.jsonl`) inside the given directories."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob(f"{LOG_PREFIX}*.jsonl") if p.is_file())
    return found


def is_log_file(path: Path) -> bool:
    return path.name.startswith(LOG_PREFIX) and path.suffix == ".jsonl"


def _json_object(line: str, session: SessionFile, number: int) -> dict[str, Any] | None:
    if len(line) > MAX_LINE_CHARS:
        session.problems.append(Problem(session.path, number, f"line of {len(line)} characters is "
                                                              "longer than the limit; skipped"))
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        session.problems.append(Problem(session.path, number, f"not JSON ({reason}); skipped"))
        return None
    if not isinstance(data, dict):
        session.problems.append(Problem(session.path, number, f"a JSON {_kind(data)}, not an entry "
                                                              "object; skipped"))
        return None
    return data


def _read_header(session: SessionFile, data: dict[str, Any]) -> None:
    if isinstance(data.get("id"), str) and data["id"]:
        session.id = data["id"]
    session.cwd = data["cwd"] if isinstance(data.get("cwd"), str) else ""
    session.timestamp = data["timestamp"] if isinstance(data.get("timestamp"), str) else ""


def _id_from_name(path: str) -> str:
    """Pi names files `<timestamp>_<session id>.jsonl`."""
    stem = Path(path).stem
    return stem.rsplit("_", 1)[-1] if "_" in stem else stem


def _kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
