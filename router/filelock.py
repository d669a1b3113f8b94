"""Appending and updating shared files safely across processes (POSIX advisory locks).

Files are created private to the user (0600) and never written through a symbolic link: the last
component is opened with O_NOFOLLOW (a planted link fails with ELOOP, see `is_symlink_error`), and
only regular files are read or written (a FIFO would block the sidecar).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def is_symlink_error(exc: OSError) -> bool:
    """Whether `exc` is the refusal to open a symbolic link (O_NOFOLLOW)."""
    return exc.errno == errno.ELOOP


def _open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """Open `path` (never through a final symlink) and insist it is a regular file."""
    fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK | os.O_CLOEXEC, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_line(path: Path, line: str) -> None:
    """Append one line atomically with respect to other processes; the file is private (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8", "backslashreplace")
    fd = _open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
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


def read_text(path: Path, *, nofollow: bool = False) -> str:
    """The text of a regular file (`nofollow`: never through a final symbolic link)."""
    flags = os.O_RDONLY | _NONBLOCK | os.O_CLOEXEC | (_NOFOLLOW if nofollow else 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return handle.read().decode("utf-8", errors="replace")


def read_json(path: Path, *, nofollow: bool = False) -> Any:
    """The JSON content of a file, or None when it is missing or not JSON."""
    try:
        return json.loads(read_text(path, nofollow=nofollow))
    except OSError as exc:
        if nofollow and is_symlink_error(exc):
            raise
        return None
    except ValueError:
        return None


def update_json(path: Path, key: str | list[str], value: Any) -> None:
    """Set `key` (or a nested key path) in a JSON object file, under an exclusive lock.

    A file (or lock file) that is a symbolic link is refused (ELOOP), not replaced or followed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_fd = _open_regular(Path(f"{path}.lock"), os.O_WRONLY | os.O_CREAT)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if os.path.islink(path):
            raise OSError(errno.ELOOP, "is a symbolic link", str(path))
        current = read_json(path, nofollow=True)
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
