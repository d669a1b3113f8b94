"""Where things live: the agent dir, the built-in packs, the policy layers (no heavy imports)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

PACKS_DIR = Path(__file__).resolve().parents[2] / "rules"


def display_path(path: Path) -> str:
    """A path as people want to read it: relative to the working directory, or with ~."""
    absolute = Path(os.path.normpath(path.absolute()))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        pass
    try:
        inside = absolute.relative_to(Path.home())
    except ValueError:
        return str(absolute)
    return "~" if str(inside) == "." else f"~/{inside}"


def packs_dir() -> Path:
    """Where the built-in packs live (the installed `router.packs`, else the checkout's rules/)."""
    try:
        import router.packs as packs  # type: ignore[import-not-found,unused-ignore]

        return Path(next(iter(packs.__path__)))
    except (ImportError, StopIteration):
        return PACKS_DIR


def pack_names() -> list[str]:
    return sorted(p.stem for p in packs_dir().glob("*.yaml") if not p.stem.endswith(".test"))


def agent_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    configured = env.get("PI_CODING_AGENT_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".pi" / "agent"


def layer_paths(cwd: Path, *, agent: Path, include_project: bool = True) -> list[tuple[str, Path]]:
    """The policy layer files in force for a Pi started in `cwd`: (layer name, path).

    The layers: the built-in default pack, the managed policy (router/load/managed.py), the user's
    file, the project's. The one place that decides which layers load: the sidecar (`router serve`)
    and every command (`lint`, `test`, `explain`, `doctor`) take their layers from here. A FIFO or
    device in a layer's place is kept, so loading it reports the problem instead of silently
    dropping the layer; a directory is not a layer.
    """
    from router.load.managed import MANAGED, managed_policy

    layers = [("pack", packs_dir() / "default.yaml")]
    managed = managed_policy()
    if managed.exists() and not managed.is_dir():
        layers.append((MANAGED, managed))
    user = agent / "router.yaml"
    if user.exists() and not user.is_dir():
        layers.append(("user", user))
    project = project_policy(cwd)
    if include_project and project.exists() and not project.is_dir():
        layers.append(("project", project))
    return layers


def project_policy(cwd: Path) -> Path:
    """The project layer of a Pi started in `cwd`: `.pi/router.yaml` there, never a parent's."""
    return cwd / ".pi" / "router.yaml"


def project_policy_above(cwd: Path) -> Path | None:
    """The nearest parent directory's `.pi/router.yaml` when `cwd` has none (Pi would not load it)."""
    if project_policy(cwd).is_file():
        return None
    for parent in Path(os.path.normpath(cwd.absolute())).parents:
        candidate = project_policy(parent)
        if candidate.is_file():
            return candidate
    return None


# --- a project's identity in records and telemetry (docs/security.md, "A project's name") -------

PROJECT_DIGEST_CHARS = 12  # hex digits of the keyed digest of the project's resolved root
PROJECT_DIGEST_DOMAIN = b"router project\0"  # the digest of a root never equals a stub's of the same text
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")  # a name kept as it is


def project_identity(cwd: str | os.PathLike[str] | None, key: bytes) -> dict[str, str | None] | None:
    """`{name, digest}` of the project Pi runs in (its working directory, whose `.pi/` holds the
    project layer), None without one. `digest`: the first hex digits of the HMAC-SHA256, keyed with
    `key` (the decision log's `.digest-key`, router/runtime/decision_log.py), of the resolved root
    path, so a guessed path cannot be confirmed from a record without the key. `name`: the root's
    directory name when it is a plain name (letters, digits, `._+-`, at most 64, not hidden); `~`
    for the home directory; else None (the digest alone tells the project apart)."""
    import hashlib
    import hmac

    if not cwd:
        return None
    root = _resolved(Path(os.path.normpath(Path(cwd).absolute())))
    digest = hmac.new(key, PROJECT_DIGEST_DOMAIN + os.fsencode(root),
                      hashlib.sha256).hexdigest()[:PROJECT_DIGEST_CHARS]
    home = Path(os.path.normpath(Path.home().absolute()))
    name: str | None = "~" if root in (home, _resolved(home)) else root.name
    if name != "~" and not PLAIN_NAME.fullmatch(name or ""):
        name = None
    return {"name": name, "digest": digest}


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


# --- the decision log: `<agent dir>/router/log/decisions.jsonl` and its rotations ----------------

LOG_NAME = "decisions.jsonl"
ROTATED_LOG = re.compile(r"^decisions(?:\.(\d+))?\.jsonl$")  # the live file (no number) or a rotation


def log_dir(agent: Path) -> Path:
    """Where the decision log lives."""
    return agent / "router" / "log"


def log_order(paths: Iterable[Path]) -> list[Path]:
    """Log files oldest first: a higher rotation number is older; the live file comes last."""
    def key(path: Path) -> tuple[str, int]:
        match = ROTATED_LOG.match(path.name)
        number = int(match.group(1)) if match and match.group(1) else 0
        return (str(path.parent), -number)

    return sorted(dict.fromkeys(paths), key=key)


def log_files(directory: Path) -> list[Path]:
    """The live log and its rotations in `directory`, oldest first (none when it does not exist)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return log_order(directory / name for name in names if ROTATED_LOG.match(name))
