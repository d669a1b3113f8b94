"""Appending and updating shared files safely across processes (POSIX advisory locks).

Files are created private to the user (0600) and never written through a symbolic link: the last
component is opened with O_NOFOLLOW (a planted link fails with ELOOP, see `is_symlink_error`), and
only regular files are read or written (a FIFO would block the sidecar).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from router.lang.jsonout import dumps

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
BOM = "\ufeff"
INDENT = re.compile(r"^[ \t]+(?=\S)", re.MULTILINE)


class JsonFileError(ValueError):
    """A JSON file that cannot be used; the message names the place (file:line:col)."""


def is_symlink_error(exc: OSError) -> bool:
    """Whether `exc` is the refusal to open a symbolic link (O_NOFOLLOW)."""
    return exc.errno == errno.ELOOP


def open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
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
    """Append one whole line, or nothing: OSError when it could not be written completely.

    One `write` of the whole line with O_APPEND under an exclusive lock, so concurrent writers
    never interleave; on a short write or an error (a full disk) the file is cut back to its size
    before, so no partial line stays to be glued to the next one. A file whose last line was left
    without its newline (by another program) gets one first. The file is private (0600).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8", "backslashreplace")
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            _append_whole(fd, data, path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read_text(path: Path, *, nofollow: bool = False) -> str:
    """The text of a regular file (`nofollow`: never through a final symbolic link)."""
    return _read_bytes(path, nofollow=nofollow).decode("utf-8", errors="replace")


def _read_bytes(path: Path, *, nofollow: bool) -> bytes:
    flags = os.O_RDONLY | _NONBLOCK | os.O_CLOEXEC | (_NOFOLLOW if nofollow else 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return handle.read()


def _append_whole(fd: int, data: bytes, path: Path) -> None:
    size = os.fstat(fd).st_size
    if size > 0 and _last_byte(path, size) != b"\n":
        data = b"\n" + data
    write_whole(fd, data, size, path)


def write_whole(fd: int, data: bytes, size: int, path: Path | str) -> int:
    """One `write` of `data` to the O_APPEND file `fd` of `size` bytes; the bytes written. On an
    error or a short write (a full disk) the file is cut back to `size` and OSError raised, so no
    partial line stays to be glued to the next one."""
    try:
        written = os.write(fd, data)
    except OSError:
        truncate_to(fd, size)
        raise
    if written != len(data):
        truncate_to(fd, size)
        raise OSError(errno.ENOSPC, f"only {written} of {len(data)} bytes could be written; the line "
                      "was not kept", str(path))
    return written


def _last_byte(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(size - 1)
            return handle.read(1)
    except OSError:
        return b"\n"


def truncate_to(fd: int, size: int) -> None:
    """Truncate back to `size` (best effort: the error that caused it is what gets reported)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)


def read_json(path: Path, *, nofollow: bool = False) -> Any:
    """The JSON content of a file, or None when it is missing or not JSON."""
    try:
        return load_json(path, nofollow=nofollow)
    except OSError as exc:
        if nofollow and is_symlink_error(exc):
            raise
        return None
    except JsonFileError:
        return None


def load_json(path: Path, *, nofollow: bool = False) -> Any:
    """The JSON content of a file (a leading UTF-8 byte order mark is skipped); None when missing.

    Raises JsonFileError, located at file:line:col, when the text is not JSON (comments and
    trailing commas are not JSON either); OSError (ELOOP) for a symbolic link with `nofollow`.
    """
    text = _read_text(path, nofollow=nofollow)
    return None if text is None else parse_json_text(text.removeprefix(BOM), path)


def parse_json_text(text: str, path: Path | str) -> Any:
    """Parse JSON text; a failure is a JsonFileError located at `path`:line:col."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
                            f"{_hint(text, exc.pos)}") from None


def _hint(text: str, pos: int) -> str:
    """What the usual hand edits that break JSON look like, when one is at `pos`."""
    if text.startswith(("//", "/*"), pos):
        return " (a comment: JSON has none)"
    before = text[:pos].rstrip()
    if before.endswith(",") and text[pos:pos + 1] in ("}", "]"):
        return " (a trailing comma: JSON allows none)"
    return ""


def update_json(path: Path, key: str | list[str], value: Any, *, backup: bool = False) -> bool:
    """Set `key` (or a nested key path) in a JSON object file, under an exclusive lock."""
    keys = [key] if isinstance(key, str) else list(key)
    return update_json_values(path, [(keys, value)], backup=backup)


REMOVE: Any = object()  # a value for `update_json_values` that removes its key (`forget`)


def update_json_values(path: Path, updates: list[tuple[list[str], Any]], *, backup: bool = False) -> bool:
    """Set each (key path, value) in a JSON object file in one write, under an exclusive lock.

    The rest of the document is kept: its keys, their order, its indentation and a leading byte
    order mark. A file that is not a JSON object is never overwritten (JsonFileError); a missing
    or empty file starts as {}. With `backup`, the previous content is kept in `<file>.bak`. A
    write that changes nothing leaves the file alone. Returns whether the file was written. A file
    (or lock file) that is a symbolic link is refused (ELOOP), not replaced or followed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # not `<file>.lock`: Pi's own lockfile takes `settings.json.lock` for a held lock
    lock_fd = open_regular(path.parent / f".{path.name}.router-lock", os.O_WRONLY | os.O_CREAT)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if os.path.islink(path):
            raise OSError(errno.ELOOP, "is a symbolic link", str(path))
        original = _read_text(path, nofollow=True)
        data = _object(original, path)
        updated = json.loads(json.dumps(data))
        for keys, value in updates:
            _set(updated, keys, value)
        if original is not None and updated == data:
            return False
        text = dumps(updated, indent=_indent(original)) + "\n"
        if original is not None and original.startswith(BOM):
            text = BOM + text
        if backup and original is not None:
            _replace(Path(f"{path}.bak"), original)
        _replace(path, text)
        return True
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)


def _read_text(path: Path, *, nofollow: bool = True) -> str | None:
    try:
        data = _read_bytes(path, nofollow=nofollow)
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{path}: not UTF-8 text (byte {exc.start}); not overwriting it") from None


def _object(text: str | None, path: Path) -> dict[str, Any]:
    """The JSON object `text` holds ({} for no or blank text); anything else is refused."""
    if text is None or not text.strip(BOM + " \t\r\n"):
        return {}
    data = parse_json_text(text.removeprefix(BOM), path)
    if not isinstance(data, Mapping):
        raise JsonFileError(f"{path}: not a JSON object (it holds {json_kind(data)}); not overwriting it")
    return dict(data)


def json_kind(value: Any) -> str:
    """What a JSON value that is not an object is, as JSON names it (`an array`, `null`, …)."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _set(data: dict[str, Any], keys: list[str], value: Any) -> None:
    """Set `value` at `keys`, creating objects on the way; `REMOVE` takes the key out (if it is there)."""
    target = data
    for part in keys[:-1]:
        child = target.get(part)
        if value is REMOVE and not isinstance(child, dict):
            return
        target[part] = child if isinstance(child, dict) else {}
        target = target[part]
    if value is REMOVE:
        target.pop(keys[-1], None)
    else:
        target[keys[-1]] = value


def _indent(text: str | None) -> str | int:
    """The indentation of the first indented line of `text` (2 spaces without one)."""
    found = INDENT.search(text or "")
    return found.group(0) if found else 2


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (a private temporary file renamed over it)."""
    import tempfile  # here: a sidecar's start does without it (~3 ms)

    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
