"""A policy as committed at a git revision, for `router diff REV:PATH`: the policy files of the
tree at REV (every `.yaml`/`.yml`/`.json` file and `router.lock`, so that relative `use:` entries,
project data files and the lock committed at REV are all there) written into a scratch directory.

`git` runs as an argument list (never a shell) with a timeout; the sizes `git ls-tree` lists are
checked before anything is read, and only regular files with plain relative names are written."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

GIT_TIMEOUT_S = 60.0
MAX_TREE_BYTES = 64 * 1024 * 1024  # as a git source's commit (router/load/git_cache.py)
POLICY_SUFFIXES = (".yaml", ".yml", ".json")
LOCK_NAME = "router.lock"


class RevisionError(Exception):
    """The revision cannot be read: what is wrong, as one line."""


@dataclass(frozen=True)
class Revision:
    """`REV:PATH` read into `root`: the policy file there and how reports name the copies."""

    spec: str
    revision: str
    root: Path
    path: Path

    def label(self, copy: Path) -> str | None:
        """`REV:path` for a file inside the copy, None for any other file."""
        try:
            inside = copy.resolve().relative_to(self.root.resolve())
        except ValueError:
            return None
        return f"{self.revision}:{inside.as_posix()}"


def is_revision(spec: str) -> bool:
    """Whether `spec` is written `REV:PATH` (and is not an existing file)."""
    revision, sep, inner = spec.partition(":")
    return bool(sep and revision and inner) and not Path(spec).is_file()


def read_revision(spec: str, scratch: Path) -> Revision:
    """The tree of `REV` (its policy files) under `scratch`, and where PATH is in it.

    PATH is git's: relative to the repository's top, or to the working directory when it starts
    with `./` or `../`."""
    revision, _, inner = spec.partition(":")
    prefix = _git(["rev-parse", "--show-prefix"], what=spec).strip()
    name = os.path.normpath(prefix + inner) if inner.startswith(("./", "../")) else os.path.normpath(inner)
    if name.startswith("..") or os.path.isabs(name):
        raise RevisionError(f"{spec}: {inner} is outside the repository")
    commit = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"],
                  what=f"{spec}: no such revision {revision!r}").strip()
    blobs = _policy_blobs(commit, spec)
    if name not in {path for path, _ in blobs}:
        raise RevisionError(f"{spec}: revision {revision} has no file {name}")
    scratch.mkdir(parents=True, exist_ok=True)
    _write_blobs(blobs, scratch, spec)
    return Revision(spec, revision, scratch, scratch / name)


def _policy_blobs(commit: str, spec: str) -> list[tuple[str, str]]:
    """(path, object id) of the regular files at `commit` a policy may read, size-checked."""
    listing = _git(["ls-tree", "-r", "-l", "-z", "--full-tree", "--end-of-options", commit], what=spec)
    blobs, total = [], 0
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) != 4 or fields[0] not in ("100644", "100755") or fields[1] != "blob":
            continue
        if not (path.endswith(POLICY_SUFFIXES) or PurePosixPath(path).name == LOCK_NAME):
            continue
        if not _plain(path):
            continue
        total += int(fields[3]) if fields[3].isdigit() else 0
        if total > MAX_TREE_BYTES:
            raise RevisionError(f"{spec}: the policy files at that revision hold more than "
                                f"{MAX_TREE_BYTES >> 20} MiB; nothing was read")
        blobs.append((path, fields[2]))
    return blobs


def _plain(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(parts) and not path.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def _write_blobs(blobs: list[tuple[str, str]], root: Path, spec: str) -> None:
    """Each blob's bytes into `root/path`, read with one `git cat-file --batch`."""
    if not blobs:
        return
    request = "".join(f"{oid}\n" for _, oid in blobs).encode()
    out = _run(["cat-file", "--batch"], spec, stdin=request)
    offset = 0
    for path, oid in blobs:
        header_end = out.index(b"\n", offset)
        header = out[offset:header_end].decode().split()
        if len(header) != 3 or header[0] != oid or header[1] != "blob":
            raise RevisionError(f"{spec}: git cat-file gave no blob for {path}")
        size = int(header[2])
        start = header_end + 1
        target = root / path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(out[start:start + size])
        except OSError as exc:  # a crafted tree naming one path twice (a file and a directory)
            raise RevisionError(f"{spec}: cannot write {path} of that revision ({exc.strerror})") from None
        offset = start + size + 1  # the newline after each object


def _git(args: list[str], *, what: str) -> str:
    return _run(args, what).decode("utf-8", "replace")


def _run(args: list[str], what: str, stdin: bytes | None = None) -> bytes:
    """`git <args>`'s stdout; RevisionError with git's last error line (or `what` alone)."""
    try:
        done = subprocess.run(["git", *args], input=stdin, capture_output=True, timeout=GIT_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RevisionError(f"{what}: cannot run git: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RevisionError(f"{what}: {reason[-1]}" if reason else what)
    return done.stdout
