"""The declarations cache: what the last sidecar declared, for the next bridge to register at once.

Pi resolves `--model` before the sidecar could answer, so the bridge registers the virtual models,
commands, tools and skills of the policy from this cache and starts the sidecar alongside Pi
(router/bridge/startup.mjs reads it). The sidecar writes one entry per key at the bridge's startup
`hello`; the key is the bridge's digest of where and how it runs (the project directory, the agent
dir, the sidecar command, the `ROUTER_*` environment, the trust facts of Pi's command line and
settings). The entry records the SHA-256 of every file the policy in force was read from, every
file whose appearance would change it (the watched layers, the project's files even when they are
not trusted) and the trust store: the bridge uses the entry only when all of them still hold those
bytes. The sidecar's own answer always wins: a mismatch re-registers and is logged.

The file is `<agent dir>/router/declarations/<key>.json`, written atomically with mode 0600.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMAT = 1
KEY = re.compile(r"[0-9a-f]{64}")


def entry_path(agent: Path, key: str) -> Path | None:
    """Where the entry for `key` lives; None for a key that is not a SHA-256 hex digest."""
    if not isinstance(key, str) or KEY.fullmatch(key) is None:
        return None
    return agent / "router" / "declarations" / f"{key}.json"


def file_digest(path: Path) -> str | None:
    """The SHA-256 of a file's bytes; None when there is no such file (or it cannot be read)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def engine_files() -> list[Path]:
    """The engine's own files whose change may change the declarations of the same policy files
    (its version, its `/policy` command)."""
    import router
    from router.runtime import policy_command

    return [Path(router.__file__), Path(policy_command.__file__)]


def entry(key: str, engine: str, declarations: dict[str, Any], files: Iterable[Path]) -> dict[str, Any]:
    """The entry the bridge reads: the declarations (as JSON text with its SHA-256, so an entry cut
    or edited by hand is not used) and the digest of every file they depend on."""
    unique = sorted({str(Path(p).absolute()) for p in [*files, *engine_files()]})
    text = json.dumps(declarations, allow_nan=False, separators=(",", ":"))
    return {"format": FORMAT, "key": key, "engine": engine, "declarations": text,
            "digest": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "files": [[name, file_digest(Path(name))] for name in unique]}


def write(agent: Path, key: str, value: dict[str, Any]) -> bool:
    """Store the entry atomically, mode 0600 (best effort: False when it could not be written)."""
    import tempfile  # here: a sidecar's start does without it (~3 ms)

    target = entry_path(agent, key)
    if target is None:
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".declarations-")  # mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(value, handle, allow_nan=False, separators=(",", ":"))
            os.replace(temp, target)
        except BaseException:
            os.unlink(temp)
            raise
    except (OSError, TypeError, ValueError, RecursionError):
        return False
    return True
