"""`router.lock`, next to a layer's top policy file: per git source the URL, the ref, the commit
and the SHA-256 of each file used, read strictly and written whole."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.load.git_spec import UNAVAILABLE, GitSourceError, GitSpec

LOCK_NAME = "router.lock"
LOCK_VERSION = 1
MAX_LOCK_BYTES = 4 * 1024 * 1024


@dataclass
class Lock:
    """`router.lock`: per source key, the URL, ref, commit and the SHA-256 of each file used."""

    path: Path
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def read(cls, path: Path) -> Lock:
        """The lock at `path` (empty when absent); GitSourceError when it is not a lock."""
        from router.diagnostics.errors import SourceError
        from router.load.file_reading import read_text

        if not os.path.lexists(path):
            return cls(path)
        try:  # bounded, regular files only: a FIFO or /dev/zero in a clone cannot hang the router
            data = json.loads(read_text(path, limit=MAX_LOCK_BYTES))
        except SourceError as exc:
            reason = exc.diagnostics[0].message if exc.diagnostics else "cannot be read"
            raise GitSourceError(UNAVAILABLE, f"{path}: not a readable lock file ({reason})",
                                 _LOCK_HELP) from None
        except (OSError, ValueError) as exc:
            message = f"{path}: not a readable lock file ({exc})"
            raise GitSourceError(UNAVAILABLE, message, _LOCK_HELP) from None
        sources = data.get("sources") if isinstance(data, dict) else None
        if not isinstance(sources, dict) or not all(_entry_ok(v) for v in sources.values()):
            raise GitSourceError(UNAVAILABLE, f"{path}: not a lock file of this router (no valid `sources`)",
                                 _LOCK_HELP)
        return cls(path, dict(sources))

    def entry(self, key: str) -> dict[str, Any] | None:
        return self.sources.get(key)

    def pin(self, spec: GitSpec, commit: str) -> dict[str, Any]:
        entry = {"url": spec.safe_url, "ref": spec.ref or "HEAD", "commit": commit, "files": {}}
        self.sources[spec.key] = entry
        self.changed = True
        return entry

    def record(self, key: str, path: str, sha: str) -> None:
        files = self.sources[key].setdefault("files", {})
        if files.get(path) != sha:
            files[path] = sha
            self.changed = True

    def write(self) -> None:
        sources = {k: {**self.sources[k], "files": dict(sorted(self.sources[k].get("files", {}).items()))}
                   for k in sorted(self.sources)}
        body = {"version": LOCK_VERSION, "sources": sources}
        text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".router-lock-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temp, 0o644)
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        self.changed = False


_LOCK_HELP = "restore it from version control, or delete it and run `router lint`"


def _entry_ok(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("commit"), str):
        return False
    full = re.fullmatch(r"[0-9a-f]{40}", entry["commit"]) is not None
    return full and isinstance(entry.get("files", {}), dict)


def lock_path(policy_file: Path) -> Path:
    """The lock of the layer whose top file is `policy_file`: `router.lock` next to it."""
    return policy_file.absolute().parent / LOCK_NAME

