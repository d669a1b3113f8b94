"""Trust by content: a project's policy applies only when the user trusted its exact bytes.

The project layer is `.pi/router.yaml` of Pi's working directory plus every file it reaches
through `use:` (built-in packs excluded: they ship with the router). Its digest is the SHA-256 of
those files' paths (relative to the project) and contents, in load order. The user's trust store,
`<agent dir>/router/trust.json` (0600), maps a project directory to the digest the user trusted
and the files it covered; any other content, a file that appears mid-session included, is not
applied until trusted again.

`precheck` decides before anything is parsed: it hashes the bytes of the files the record lists
(bounded reads) and compares; only content that passes is handed to the YAML parser at all.
`decide` then checks the content the loader actually read. `TrustStore` is the only part that
writes a file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

STORE_VERSION = 1
MAX_TRUSTED_BYTES = 4 * 1024 * 1024  # as router/load/source.py reads a policy file
_GIT_NAME = re.compile(r"(git\+.+)@([0-9a-f]{40}):(.+)")  # project_content._git_name

TrustState = Literal["none", "trusted", "untrusted", "changed", "approved"]
"""none: no project policy; trusted: content trusted; untrusted: never trusted; changed: trusted
before with other content; approved: applied for this run only (`pi --approve`, or Pi's
`defaultProjectTrust: always`), not recorded."""


class TrustStoreError(Exception):
    """The trust store exists but cannot be read or written; nothing was changed."""


@dataclass(frozen=True)
class ProjectContent:
    """The bytes that make a project's policy layer, as the loader read them."""

    root: Path
    files: tuple[tuple[str, str], ...]
    """(path relative to the root, or absolute when outside it; SHA-256 of the file)."""

    @property
    def digest(self) -> str:
        lines = "".join(f"{name}\0{sha}\n" for name, sha in self.files)
        return hashlib.sha256(lines.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class TrustDecision:
    """Whether the project layer applies, and what to tell the user when it does not."""

    state: TrustState
    root: Path
    digest: str | None = None
    cause: str | None = None
    """Why content the user trusted is not applied, when no edit is the reason: `unlisted` (a
    record of an older router, without its files), or the git source missing from the cache (or,
    with `tampered`, the file of a git source whose cached copy does not match the lock)."""
    tampered: Path | None = None
    """With a git cause: the cached tree whose copy differs from the lock (to delete and fetch again)."""
    checked: frozenset[tuple[str, str]] = field(default=frozenset(), compare=False, repr=False)
    """After a `trusted` precheck: (name, SHA-256) of the files it hashed, the only bytes the loader
    may parse."""

    @property
    def applies(self) -> bool:
        return self.state in ("trusted", "approved")

    @property
    def status(self) -> str | None:
        """The status-line text while the project policy is off."""
        if self.cause == "unlisted":
            return "router: project policy needs trust again"
        if self.tampered is not None:
            return "router: project policy off (git cache does not match the lock)"
        if self.cause is not None:
            return "router: project policy off (run router lint)"
        return {"untrusted": "router: project policy not trusted",
                "changed": "router: project policy changed (not trusted)"}.get(self.state)

    def message(self) -> str | None:
        """One line for the user when the project policy is not applied (or only for this run)."""
        policy = self.root / ".pi" / "router.yaml"
        command = f"router trust {_quote(self.root)}"
        if self.cause == "unlisted":
            return (f"{policy} is not applied: it was trusted by an older router that did not record "
                    f"which files the trust covers; review it, then run `{command}` again "
                    "(or /policy trust in Pi)")
        if self.tampered is not None:
            return (f"{policy} is not applied: the cached copy of {self.cause} does not match "
                    f"{self.root / '.pi' / 'router.lock'} (the cache was changed after it was fetched); "
                    f"delete {self.tampered} and run `router lint` in {_quote(self.root)} to fetch it "
                    "again; your trust stays as it is")
        if self.cause is not None:
            return (f"{policy} is not applied: {self.cause} is not in this machine's git cache (the "
                    f"policy engine never fetches); run `router lint` in {_quote(self.root)} to "
                    "fetch it (`router update` to move it); your trust stays as it is")
        if self.state == "untrusted":
            return (f"{policy} is not applied: its content is not trusted; review it, then run "
                    f"`{command}` (or /policy trust in Pi)")
        if self.state == "changed":
            return (f"{policy} (or a file trusted with it) changed since you trusted it and is not "
                    "applied; review it, then run "
                    f"`{command}` (or /policy trust in Pi)")
        if self.state == "approved":
            return f"{policy} is applied for this run only (approved, not recorded); `{command}` keeps it"
        return None


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def project_content(root: Path, files: Iterable[tuple[Path | str, str]]) -> ProjectContent:
    """The content record of a project layer from (file path, SHA-256 of its bytes) pairs; a name
    given as a string (a git source's `git+url@ref@commit:path`) is kept as it is."""
    base = _resolved(root)
    named = []
    for path, sha in files:
        if isinstance(path, str):
            named.append((path, sha))
            continue
        resolved = _resolved(path)
        try:
            name = str(resolved.relative_to(base))
        except ValueError:
            name = str(resolved)
        named.append((name, sha))
    return ProjectContent(base, tuple(named))


def decide(content: ProjectContent | None, root: Path, records: Mapping[str, Any], *,
           approve: bool = False) -> TrustDecision:
    """Whether `content` (None: no project policy) is trusted by `records` (the store's projects)."""
    base = _resolved(root)
    if content is None:
        return TrustDecision("none", base)
    digest = content.digest
    record = records.get(str(base))
    if isinstance(record, dict) and record.get("sha256") == digest:
        return TrustDecision("trusted", base, digest)
    if approve:
        return TrustDecision("approved", base, digest)
    return TrustDecision("changed" if isinstance(record, dict) else "untrusted", base, digest)


def bounded_sha256(path: Path, limit: int = MAX_TRUSTED_BYTES) -> str | None:
    """SHA-256 of a regular file of at most `limit` bytes; None otherwise (missing, a FIFO or a
    device, too big, unreadable). Opening never blocks and no more than `limit` + 1 bytes are read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        digest, left = hashlib.sha256(), limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        return digest.hexdigest() if left > 0 else None
    except OSError:
        return None
    finally:
        os.close(fd)


def recorded_files(record: Any) -> list[str] | None:
    """The file names a trust record covers, None for a record without them (an older router)."""
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
        return None
    return list(files)


GitTree = Callable[[str, str, str], "Path | None"]
"""(source key, commit, path in the repository) → the cached file, None when that commit is not in
the cache (router/runtime/session_policy.py gives one: the trust stage reads no git cache itself)."""

GitLocked = Callable[[str, str, str], "str | None"]
"""(source key, commit, path in the repository) → the SHA-256 the project's lock records for that
file at that commit, None when it records none (only to say why trust fails, never to apply)."""


def recorded_path(root: Path, name: str, git: GitTree | None = None) -> tuple[Path | None, str | None]:
    """Where the file a record names lives, and for a git source's file whose commit is not in the
    cache its `key (commit …)`: nothing to hash there, a fetch to ask for."""
    found = _GIT_NAME.fullmatch(name)
    if found is None:
        return (Path(name) if os.path.isabs(name) else root / name), None
    key, commit, inside = found.groups()
    path = git(key, commit, inside) if git is not None else None
    return path, None if path is not None else f"{key} (commit {commit[:7]})"


def precheck(root: Path, records: Mapping[str, Any], git: GitTree | None = None,
             locked: GitLocked | None = None) -> TrustDecision:
    """The trust decision from the bytes of the files the record lists, before anything is parsed.

    `trusted` means those files hold exactly the trusted bytes (`checked`: the loader then parses
    only those bytes, and `decide` checks what it read); anything else is decided here and nothing
    is parsed."""
    base = _resolved(root)
    record = records.get(str(base))
    raw = bounded_sha256(base / ".pi" / "router.yaml")
    if not isinstance(record, dict):
        first = project_content(base, [(".pi/router.yaml", raw or "unreadable")])
        return TrustDecision("untrusted", base, first.digest)
    names = recorded_files(record)
    if names is None:
        first = project_content(base, [(".pi/router.yaml", raw or "unreadable")])
        return TrustDecision("changed", base, first.digest, cause="unlisted")
    hashes: list[tuple[str, str]] = []
    as_locked: list[tuple[str, str]] = []  # a git source's file as its lock records it
    missing: str | None = None
    unlocked = False  # a missing file the lock has no SHA-256 for: its cache state is all we know
    tampered: tuple[str, Path] | None = None
    for name in names:
        path, absent = recorded_path(base, name, git)
        missing = missing or absent
        sha = (bounded_sha256(path) if path is not None else None) or "unreadable"
        expected = _locked_sha(name, locked)
        if path is not None and expected not in (None, sha) and tampered is None:
            tampered = _tampered(name, path)
        unlocked = unlocked or (absent is not None and expected is None)
        hashes.append((name, sha))
        as_locked.append((name, expected or sha))
    digest = ProjectContent(base, tuple(hashes)).digest
    if digest == record.get("sha256"):
        return TrustDecision("trusted", base, digest, checked=frozenset(hashes))
    cache_only = ProjectContent(base, tuple(as_locked)).digest == record.get("sha256")
    if tampered is not None and cache_only:
        return TrustDecision("changed", base, digest, cause=tampered[0], tampered=tampered[1])
    if missing is not None and (cache_only or (unlocked and raw is not None)):
        return TrustDecision("changed", base, digest, cause=missing)
    return TrustDecision("changed", base, digest)


def _locked_sha(name: str, locked: GitLocked | None) -> str | None:
    """The SHA-256 the lock records for a git source's file `name`; None for another file."""
    found = _GIT_NAME.fullmatch(name)
    return locked(*found.groups()) if found is not None and locked is not None else None


def _tampered(name: str, path: Path) -> tuple[str, Path]:
    """`path of key (commit …)` of a git source's file and the cached tree it is in."""
    found = _GIT_NAME.fullmatch(name)
    assert found is not None  # a name with a locked SHA-256 is a git source's
    key, commit, inside = found.groups()
    tree = Path(str(path)[: -len(inside)].rstrip("/"))
    return f"{inside} of {key} (commit {commit[:7]})", tree


class TrustStore:
    """`<agent dir>/router/trust.json`: project directory → the digest the user trusted."""

    def __init__(self, agent: Path) -> None:
        self.path = agent / "router" / "trust.json"

    def projects(self) -> dict[str, Any]:
        """The trusted projects; empty when there is no store. Raises TrustStoreError when unreadable."""
        data = self._read()
        projects = data.get("projects")
        return projects if isinstance(projects, dict) else {}

    def records(self) -> dict[str, Any]:
        """Like projects(), but an unreadable store trusts nothing instead of raising."""
        try:
            return self.projects()
        except TrustStoreError:
            return {}

    def trust(self, content: ProjectContent) -> None:
        """Record `content` as trusted for its project (replacing an earlier digest)."""
        record = {"sha256": content.digest, "trusted_at": _now(), "files": [n for n, _ in content.files]}
        self._update(lambda projects: projects.__setitem__(str(content.root), record))

    def untrust(self, root: Path) -> bool:
        """Forget a project; False when it was not in the store."""
        key = str(_resolved(root))
        found = key in self.projects()
        if found:
            self._update(lambda projects: projects.pop(key, None))
        return found

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise TrustStoreError(f"cannot read {self.path}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise TrustStoreError(f"{self.path}:{exc.lineno}:{exc.colno}: not valid JSON "  # type: ignore[attr-defined]
                                  "(the file is left as it is; fix or remove it)") from None
        if not isinstance(data, dict):
            raise TrustStoreError(f"{self.path}: expected a JSON object (the file is left as it is)")
        return data

    def _update(self, change: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(f"{self.path}.lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read()
            projects = data.get("projects")
            projects = dict(projects) if isinstance(projects, dict) else {}
            change(projects)
            self._write({"version": STORE_VERSION, **data, "projects": projects})
        finally:
            os.close(lock)

    def _write(self, data: dict[str, Any]) -> None:
        import tempfile  # here: a sidecar's start does without it (~3 ms)

        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".trust-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=2, ensure_ascii=False, sort_keys=True)
                handle.write("\n")
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def _quote(path: Path) -> str:
    text = str(path)
    return text if all(c.isalnum() or c in "/._-~+" for c in text) else "'" + text.replace("'", "'\\''") + "'"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
