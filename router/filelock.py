"""Appending and updating shared files safely across processes (POSIX advisory locks)."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def append_line(path: Path, line: str) -> None:
    """Append one line atomically with respect to other processes; the file is private (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8", "backslashreplace")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
                json.dump(data, handle, indent=2, ensure_ascii=False)
                handle.write("\n")
            os.chmod(temp, 0o600)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)
