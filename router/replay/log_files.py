"""Reading the decision log: its rotated files in order, filters, `--since`, and following it.

Readers ignore fields they do not know and skip (and count) lines that are not JSON objects, so a
log written by a newer router, or cut by a crash, still reads.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from router.load.paths import LOG_NAME, log_files

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class SinceError(ValueError):
    """A `--since` value that is neither a time nor a duration."""


@dataclass
class ReadStats:
    records: int = 0
    skipped: int = 0  # lines that are not JSON objects
    files: list[Path] = field(default_factory=list)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`10m`, `2h`, `1d`, `1w`, `30s` before now, or an ISO time (UTC unless it says otherwise)."""
    now = now or datetime.now(UTC)
    match = DURATION.match(text)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * UNITS[match.group(2)])
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SinceError(f"--since {text!r} is neither a duration nor a time; expected a duration such "
                         "as 10m, 2h, 1d or 1w, or an ISO time such as 2026-12-01T11:00:00Z") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def record_time(record: dict[str, Any]) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(record.get("time")).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def resolve_files(location: Path) -> list[Path]:
    """A log directory's files oldest first, or the one file named."""
    if location.is_dir():
        return log_files(location)
    return [location] if location.exists() else []


def parse_line(line: bytes | str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def read_records(files: Iterable[Path], stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Every record of `files` in order; unparsable lines are counted in `stats.skipped`."""
    stats = stats if stats is not None else ReadStats()
    for path in files:
        try:
            handle = path.open("rb")
        except OSError:
            continue
        stats.files.append(path)
        with handle:
            for line in handle:
                if not line.strip():
                    continue
                record = parse_line(line)
                if record is None:
                    stats.skipped += 1
                    continue
                stats.records += 1
                yield record


@dataclass(frozen=True)
class Filter:
    session: str | None = None
    rule: str | None = None
    since: datetime | None = None
    project: str | None = None  # a project's name, or the first characters of its digest

    def __call__(self, record: dict[str, Any]) -> bool:
        if self.session is not None and not str(record.get("session") or "").startswith(self.session):
            return False
        if self.project is not None and not in_project(record, self.project):
            return False
        if self.rule is not None and self.rule not in fired_ids(record) + shadow_ids(record):
            return False
        if self.since is not None:
            moment = record_time(record)
            if moment is None or moment < self.since:
                return False
        return True


def project_of(record: dict[str, Any]) -> tuple[str | None, str | None]:
    """The record's project as (name, digest); (None, None) for a record without one."""
    project = record.get("project")
    if not isinstance(project, dict):
        return None, None
    name, digest = project.get("name"), project.get("digest")
    return (name if isinstance(name, str) else None), (digest if isinstance(digest, str) else None)


def in_project(record: dict[str, Any], wanted: str) -> bool:
    """Whether the record's project is named `wanted` or its digest begins with it."""
    name, digest = project_of(record)
    return bool(wanted) and (name == wanted or (digest is not None and digest.startswith(wanted.lower())))


def fired_ids(record: dict[str, Any]) -> list[str]:
    rules = record.get("rules")
    return [str(r.get("id")) for r in rules if isinstance(r, dict) and r.get("fired")] \
        if isinstance(rules, list) else []


def shadow_ids(record: dict[str, Any]) -> list[str]:
    shadow = record.get("shadow")
    return [str(s.get("id")) for s in shadow if isinstance(s, dict)] if isinstance(shadow, list) else []


def actions_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    actions = record.get("actions")
    return [a for a in actions if isinstance(a, dict)] if isinstance(actions, list) else []


def follow(directory: Path, emit: Callable[[dict[str, Any]], None], *, start_at_end: bool = True,
           poll: float = 0.2, stop: Callable[[], bool] = lambda: False,
           stats: ReadStats | None = None) -> None:
    """Emit records appended to `<directory>/decisions.jsonl` as they come, across rotations.

    A rotation renames the file: what is left in the old one is read to its end, then the new
    file is read from its start. Runs until `stop()` is true (or forever).
    """
    stats = stats if stats is not None else ReadStats()
    path = directory / LOG_NAME
    handle, inode = _open(path)
    if handle is not None and start_at_end:
        handle.seek(0, os.SEEK_END)
    pending = b""
    while not stop():
        chunk = handle.read() if handle is not None else b""
        if chunk:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    record = parse_line(line)
                    if record is None:
                        stats.skipped += 1
                    else:
                        emit(record)
            continue
        current = _inode(path)
        if current is not None and current != inode:  # rotated (or created): the old file is drained
            if handle is not None:
                handle.close()
            handle, inode = _open(path)
            pending = b""
            continue
        if handle is not None and current == inode and os.fstat(handle.fileno()).st_size < handle.tell():
            handle.seek(0)  # truncated in place
        time.sleep(poll)
    if handle is not None:
        handle.close()


def _open(path: Path) -> tuple[BinaryIO | None, int | None]:
    try:
        handle = path.open("rb")
    except OSError:
        return None, None
    return handle, os.fstat(handle.fileno()).st_ino


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
