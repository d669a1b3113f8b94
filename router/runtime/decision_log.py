"""The decision log: one JSON record per live decision, in `<agent dir>/router/log/`.

`build_record` (router/runtime/decision_record.py) turns one evaluated event into the record;
`DecisionLog` appends records as whole lines (0600 files in a 0700 directory) and rotates
by size to `decisions.1.jsonl`, `decisions.2.jsonl`, … Prompt and message text is left out unless
the user's own router.yaml says `decision_log: {prompts: true}`; environment values the policy
reads never appear.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.compile.ir import CompiledPolicy
from router.load.paths import LOG_NAME, ROTATED_LOG, log_dir, log_files
from router.runtime.filelock import write_whole
from router.runtime.log_privacy import KEEP_FIELDS
from router.trust.capabilities import SYMLINK_CODE

LOCK_NAME = ".decisions.lock"


DEFAULT_MAX_BYTES = 10 * 1024 * 1024


DEFAULT_KEEP = 5


@dataclass(frozen=True)
class LogSettings:
    """What the user's own `decision_log:` says (defaults otherwise)."""

    enabled: bool = True
    prompts: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    keep: int = DEFAULT_KEEP
    keep_text: tuple[str, ...] = ()

    @classmethod
    def of(cls, policy: CompiledPolicy | None) -> LogSettings:
        raw = dict(policy.decision_log) if policy is not None else {}
        known = {k: raw[k] for k in ("enabled", "prompts", "max_bytes", "keep") if k in raw}
        fields = raw.get("keep_text") or ()
        return cls(**known, keep_text=tuple(f for f in fields if f in KEEP_FIELDS))

    @property
    def kept(self) -> frozenset[str]:
        """The record fields whose text the user opted in to keep (`prompts: true`: all of them)."""
        return frozenset(KEEP_FIELDS) if self.prompts else frozenset(self.keep_text)


def logged_seqs(directory: Path, session: str) -> dict[str, int]:
    """The highest `seq` per event type the log holds for `session` (lines of other sessions are
    skipped before they are parsed)."""
    needle = json.dumps(session).encode()
    found: dict[str, int] = {}
    for path in log_files(directory):
        try:
            handle = path.open("rb")
        except OSError:
            continue
        with handle:
            for line in handle:
                if needle not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict) or record.get("session") != session:
                    continue
                kind, seq = record.get("event"), record.get("seq")
                if isinstance(kind, str) and isinstance(seq, int) and seq >= found.get(kind, -1):
                    found[kind] = seq
    return found


HOLD_S = 0.25  # a log kept open is closed after this long without a record


KEY_NAME = ".digest-key"  # the key of the stubs' digests (router/runtime/log_privacy.py), 0600


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def digest_key(agent: Path) -> bytes:
    """The decision log's digest key of the agent dir `agent` (`<agent>/router/log/.digest-key`,
    made 0600 when missing, even when the log is off): what keys the project digests of records
    and telemetry, so they agree across sidecars and runs; a key of this process when it cannot
    be read or made."""
    return DecisionLog(log_dir(agent), LogSettings(), root=agent).digest_key()


class LinkedDirectory(OSError):
    """A directory of the log's path the engine creates is a symbolic link: never followed."""


class DecisionLog:
    """Appends records to `<directory>/decisions.jsonl`, rotating it by size.

    Several sidecars may share the directory: each append, and the rotation it may cause, happens
    under an exclusive lock on a lock file beside the log, as one whole-line write. With `later`
    (the sidecar's loop's `call_later`) the log stays open while records come, and is closed
    HOLD_S after the last one (a file open for writing keeps its file system from being remounted
    read-only, so it is not held between turns); a log another sidecar rotated, or somebody
    removed, is noticed by its inode and opened again. Without `later` nothing stays open. A
    failure is reported once (the return value of `write`) until a write succeeds again.

    The directories from `root` (the agent dir, the user's own) down to `directory` are the
    engine's: each is created 0700 and opened without following a link (O_NOFOLLOW), and every
    file is opened relative to the last one, so nothing is ever written through a link planted
    on the way. A link there turns the log off for the rest of the run, with one warning.
    """

    def __init__(self, directory: Path, settings: LogSettings,
                 later: Callable[[float, Callable[[], None]], Any] | None = None,
                 root: Path | None = None) -> None:
        self.directory = directory
        self.settings = settings
        self.failing = False
        self.refused = False  # a link on the way: nothing is written in this run
        self.later = later
        self.root = root if root is not None and directory.is_relative_to(root) else directory.parent
        self._dir: int | None = None  # the open log directory (every file is opened relative to it)
        self._log: int | None = None  # the open log (O_APPEND)
        self._lock: int | None = None  # the open lock file (read-only: flock needs no more)
        self._key: bytes | None = None
        self._end = -1  # the log's size after our last append (its last byte is then a newline)
        self._last = 0.0  # when the last record was written
        self._closing = False  # a close is scheduled

    @property
    def path(self) -> Path:
        return self.directory / LOG_NAME

    def write(self, record: Mapping[str, Any]) -> str | None:
        """Append one record; a warning the first time writing fails, else None."""
        if self.refused:
            return None
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        data = (line + "\n").encode("utf-8", "backslashreplace")
        try:
            lock = self._lock_fd()
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._append(data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        except LinkedDirectory as exc:
            self.close()
            self.refused = True
            return (f"decision log: {exc.filename} is a symbolic link; it is not followed and "
                    f"decisions are not logged in this run (they are still applied) [{SYMLINK_CODE}]")
        except OSError as exc:
            self.close()
            if self.failing:
                return None
            self.failing = True
            return (f"decision log: cannot write {self.path}: {exc.strerror or exc}; decisions are "
                    "not logged until it works again (they are still applied)")
        finally:
            self._hold()
        self.failing = False
        return None

    def digest_key(self) -> bytes:
        """The key of the stubs' digests, kept in the log's directory (0600) so that stubs of the
        same text are equal across sidecars; a key of this process when it cannot be read."""
        if self._key is None:
            try:
                self._key = self._read_key()
            except OSError:
                self._key = os.urandom(32)
            finally:
                self._hold()
        return self._key

    def close(self) -> None:
        for fd in (self._log, self._lock, self._dir):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._log = self._lock = self._dir = None

    def _hold(self) -> None:
        """Keep the files open until HOLD_S pass without a record (close now without `later`)."""
        if self.later is None:
            self.close()
            return
        self._last = time.monotonic()
        if not self._closing:
            self._closing = True
            self.later(HOLD_S, self._close_if_idle)

    def _close_if_idle(self) -> None:
        idle = time.monotonic() - self._last
        if idle < HOLD_S and self.later is not None:
            self.later(HOLD_S - idle, self._close_if_idle)
            return
        self._closing = False
        self.close()

    def _dir_fd(self) -> int:
        """The log's directory, each directory below `root` created 0700 and opened without
        following a link (LinkedDirectory when one is a link)."""
        if self._dir is not None:
            return self._dir
        try:  # the user's own directory (a link there is theirs), made when missing
            fd = os.open(self.root, _DIR_FLAGS)
        except FileNotFoundError:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.root, _DIR_FLAGS)
        shown = self.root
        try:
            for part in self.directory.relative_to(self.root).parts:
                shown = shown / part
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                try:
                    child = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(
                            os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                        raise LinkedDirectory(errno.ELOOP, "is a symbolic link", str(shown)) from None
                    raise
                os.close(fd)
                fd = child
                info = os.fstat(fd)
                if info.st_uid == os.getuid() and info.st_mode & 0o077:
                    os.fchmod(fd, 0o700)
        except BaseException:
            os.close(fd)
            raise
        self._dir = fd
        return fd

    def _open(self, name: str, flags: int) -> int:
        """A regular file of the log's directory (0600), never through a link."""
        fd = os.open(name, flags | _FILE_FLAGS, 0o600, dir_fd=self._dir_fd())
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", str(self.directory / name))
            if info.st_uid == os.getuid() and info.st_mode & 0o077:
                os.fchmod(fd, 0o600)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _read_key(self) -> bytes:
        for _ in range(3):
            try:
                fd = self._open(KEY_NAME, os.O_RDONLY)
            except FileNotFoundError:
                self._make_key()
                continue
            with os.fdopen(fd, "rb") as handle:
                key = handle.read(64)
            if len(key) >= 32:
                return key
            raise OSError(errno.EINVAL, "the digest key is too short", str(self.directory / KEY_NAME))
        raise OSError(errno.ENOENT, "the digest key could not be made", str(self.directory / KEY_NAME))

    def _make_key(self) -> None:
        """A new key, written whole under a temporary name, then linked into place (another
        sidecar making one at the same time wins or loses whole)."""
        directory = self._dir_fd()
        temp = f"{KEY_NAME}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=directory)
        fd = self._open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            write_whole(fd, os.urandom(32), 0, self.directory / temp)
        finally:
            os.close(fd)
        try:
            os.link(temp, KEY_NAME, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
        except FileExistsError:
            pass
        finally:
            os.unlink(temp, dir_fd=directory)

    def _lock_fd(self) -> int:
        """The lock file, opened again when it is not the one at its path any more."""
        if self._lock is not None and not self._same_file(self._lock, LOCK_NAME):
            self.close()
        if self._lock is None:
            self._lock = self._open(LOCK_NAME, os.O_RDONLY | os.O_CREAT)
        return self._lock

    def _append(self, data: bytes) -> None:
        fd = self._log_fd()
        size = os.fstat(fd).st_size
        if size > 0 and size + len(data) > self.settings.max_bytes:
            self._rotate()
            fd, size = self._log_fd(), 0
        if size > 0 and size != self._end and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # another program left the last line without its newline
        self._end = size + write_whole(fd, data, size, self.path)

    def _log_fd(self) -> int:
        """The log, opened again when another sidecar rotated it or it was removed."""
        if self._log is not None and not self._same_file(self._log, LOG_NAME):
            os.close(self._log)
            self._log = None
        if self._log is None:
            self._log = self._open(LOG_NAME, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            self._end = -1
        return self._log

    def _rotate(self) -> None:
        if self._log is not None:
            os.close(self._log)
            self._log = None
        keep, directory = self.settings.keep, self._dir_fd()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"decisions.{keep}.jsonl", dir_fd=directory)
        for number in range(keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"decisions.{number}.jsonl", f"decisions.{number + 1}.jsonl",
                           src_dir_fd=directory, dst_dir_fd=directory)
        os.replace(LOG_NAME, "decisions.1.jsonl", src_dir_fd=directory, dst_dir_fd=directory)
        for name in os.listdir(directory):  # a smaller `keep` than before: drop the extra files
            match = ROTATED_LOG.match(name)
            if match and match.group(1) and int(match.group(1)) > keep:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=directory)

    def _same_file(self, fd: int, name: str) -> bool:
        try:
            at_path = os.stat(name, dir_fd=self._dir_fd(), follow_symlinks=False)
        except OSError:
            return False
        mine = os.fstat(fd)
        return (at_path.st_ino, at_path.st_dev) == (mine.st_ino, mine.st_dev)
