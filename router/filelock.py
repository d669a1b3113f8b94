"""Appending and updating shared files safely across processes (POSIX advisory locks)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from router.jsonout import dumps


def append_line(path: Path, line: str) -> None:
    """Append one whole line, or nothing: OSError when it could not be written completely.

    One `write` of the whole line with O_APPEND under an exclusive lock, so concurrent writers
    never interleave; on a short write or an error (a full disk) the file is cut back to its size
    before, so no partial line stays to be glued to the next one. A file whose last line was left
    without its newline (by another program) gets one first. The file is private (0600).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8", "backslashreplace")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            _append_whole(fd, data, path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _append_whole(fd: int, data: bytes, path: Path) -> None:
    size = os.fstat(fd).st_size
    if size > 0 and _last_byte(path, size) != b"\n":
        data = b"\n" + data
    try:
        written = os.write(fd, data)
    except OSError:
        _cut(fd, size)
        raise
    if written != len(data):
        _cut(fd, size)
        raise OSError(errno.ENOSPC, f"only {written} of {len(data)} bytes could be written; the line "
                      "was not kept", str(path))


def _last_byte(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(size - 1)
            return handle.read(1)
    except OSError:
        return b"\n"


def _cut(fd: int, size: int) -> None:
    """Truncate back to `size` (best effort: the error that caused it is what gets reported)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)


def read_json(path: Path) -> Any:
    """The JSON content of a file, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def update_json(path: Path, key: str | list[str], value: Any) -> None:
    """Set `key` (or a nested key path) in a JSON object file, under an exclusive lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        current = read_json(path)
        data = current if isinstance(current, dict) else {}
        keys = [key] if isinstance(key, str) else list(key)
        target = data
        for part in keys[:-1]:
            child = target.get(part)
            target[part] = child if isinstance(child, dict) else {}
            target = target[part]
        target[keys[-1]] = value
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(dumps(data, indent=2) + "\n")
            os.chmod(temp, 0o600)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)
