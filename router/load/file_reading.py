"""Reading a policy, test or event file: regular files only, at most MAX_FILE_BYTES, UTF-8, and
never a kernel file or a project file whose links lead out of its project (RT104)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

from router.diagnostics.code_names import (
    FILE_REFUSED,
    FILE_UNREADABLE,
    TOO_LARGE,
)
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import SourceError

MAX_FILE_BYTES = 4 * 1024 * 1024  # a 5,000-rule policy is about 1 MiB


def read_text(path: Path, *, display: str | None = None, limit: int = MAX_FILE_BYTES,
              within: Path | None = None) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; SourceError otherwise
    (`read_bytes`); invalid UTF-8 is located by line and column, and none of it is shown."""
    data = read_bytes(path, display=display, limit=limit, within=within)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        raise SourceError([no_excerpt(Diagnostic(
            FILE_UNREADABLE, f"cannot read {path}: it is not UTF-8 text (byte {exc.start + 1})",
            Span(display or str(path), line, col),
            help="policy, test and event files are UTF-8 text; this one looks binary"))]) from None


def read_bytes(path: Path, *, display: str | None = None, limit: int = MAX_FILE_BYTES,
               within: Path | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; SourceError otherwise.

    The path is resolved first (links followed, `refused_read` checks where it leads) and the
    resolved file is opened without following a final link. FIFOs, devices and directories are
    refused without reading (opening does not block), so `/dev/zero` or a pipe nobody writes to
    cannot hang or exhaust the router; files of `/proc` and `/sys` are refused before they are
    opened (RT104), and so is a file that reports no size yet gives bytes (a kernel file
    elsewhere). With `within` (a project's directory), a file whose links lead out of it, or
    into a `.git` directory, is refused (RT104).
    """
    where = Span(display or str(path))
    real = Path(os.path.realpath(path))
    problem = refused_read(path, within, real=real)
    if problem is not None:
        raise SourceError([no_excerpt(Diagnostic(
            FILE_REFUSED, f"{display or path} is not read: it {problem}", where,
            help=READ_HELP))])
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SourceError([Diagnostic(FILE_UNREADABLE, f"file not found: {path}", where)]) from None
    except OSError as exc:
        raise SourceError([_unreadable(path, exc, where)]) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SourceError([Diagnostic(FILE_UNREADABLE, f"cannot read {path}: {_file_kind(info.st_mode)}, "
                                          "not a regular file", where,
                                          help="policy, test and event files must be regular files")])
        if info.st_size > limit:
            raise SourceError([_too_large(path, info.st_size, limit, where)])
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise SourceError([_unreadable(path, exc, where)]) from None
    finally:
        os.close(fd)
    if len(data) > limit:  # the file grew while it was read
        raise SourceError([_too_large(path, len(data), limit, where)])
    if data and info.st_size == 0:  # a kernel file (procfs, sysfs, debugfs) reports no size
        raise SourceError([no_excerpt(Diagnostic(
            FILE_REFUSED, f"{display or path} is not read: it is a kernel file (its size is 0, yet it "
            "gives bytes)", where, help=READ_HELP))])
    return data


READ_HELP = ("policy, test, event and data files are regular files; a project's own files stay "
             "inside the project (a link may point to another file of the project)")


SPECIAL_ROOTS = (Path("/proc"), Path("/sys"))  # devices are refused by their kind (fstat)


def refused_read(path: Path, within: Path | None, *, real: Path | None = None) -> str | None:
    """Why the file at `path` is not read (`is a file of /proc`, `leads to ~/.netrc, outside the
    project ~/src/x`), or None. `within` is the directory a project's file must stay inside."""
    from router.trust.capabilities import show_path

    real = real or Path(os.path.realpath(path))
    special = next((root for root in SPECIAL_ROOTS if real.is_relative_to(root)), None)
    if special is not None:
        return f"is a file of {special} (a kernel file system), not a policy file" \
            if real == Path(os.path.normpath(path.absolute())) else \
            f"leads to {show_path(real)}, a file of {special} (a kernel file system)"
    if within is None:
        return None
    area = Path(os.path.realpath(within))
    if not real.is_relative_to(area):
        outside = f"outside the project {show_path(area)}"
        return f"leads to {show_path(real)}, {outside}" \
            if real != Path(os.path.normpath(path.absolute())) else f"is {outside}"
    if ".git" in real.relative_to(area).parts:
        return "is inside a .git directory"
    return None


def no_excerpt(diagnostic: Diagnostic) -> Diagnostic:
    """A diagnostic about a file that is not (or not yet) a policy: renderers quote none of it."""
    return replace(diagnostic, extra={**diagnostic.extra, "excerpt": False})


def _unreadable(path: Path, exc: OSError, where: Span) -> Diagnostic:
    return Diagnostic(FILE_UNREADABLE, f"cannot read {path}: {exc.strerror or exc}", where)


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _too_large(path: Path, size: int, limit: int, where: Span) -> Diagnostic:
    return Diagnostic(TOO_LARGE, f"{path} is {_mib(size)}; files of at most {_mib(limit)} are read",
                      where, help="split the policy into files that `use:` each other, or generate "
                      "fewer rules")


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB" if size >= 1024 * 1024 else f"{size} bytes"


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")
