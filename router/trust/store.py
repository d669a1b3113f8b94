"""Trust by content: a project's policy applies only when the user trusted its exact bytes.

The project layer is `.pi/router.yaml` of Pi's working directory plus every file it reaches
through `use:` (built-in packs excluded: they ship with the router). Its digest is the SHA-256 of
those files' paths (relative to the project) and contents, in load order. The user's trust store,
`<agent dir>/router/trust.json` (0600), maps a project directory to the digest the user trusted;
any other content, a file that appears mid-session included, is not applied until trusted again.

Pure functions compute digests and decisions; `TrustStore` is the only part that touches a file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

STORE_VERSION = 1

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

    @property
    def applies(self) -> bool:
        return self.state in ("trusted", "approved")

    def message(self) -> str | None:
        """One line for the user when the project policy is not applied (or only for this run)."""
        policy = self.root / ".pi" / "router.yaml"
        command = f"router trust {_quote(self.root)}"
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
