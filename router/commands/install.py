"""`router install`: register the bridge with Pi, idempotently, recording which Python serves it.

The bridge (router/bridge: its `.mjs` modules, JavaScript Pi loads as it is, + package.json) is
copied into `<agent dir>/extensions/pi-policy-router/` (or `.pi/extensions/pi-policy-router/`
with `--project`), where Pi discovers it, next to a `router-bridge.json`. For the user it names
the command that starts the sidecar: this Python with `-m router serve`. For a project it names
no command and no path of this machine, so `.pi/` can be committed: the bridge resolves the
sidecar on each machine (router/commands/sidecar_command.py). A project install that had to make
`.pi/` records it there (`"created": [".pi"]`), so `--uninstall` can take away what it made. A
project install never goes through a symbolic link a repository committed (`linked_folder`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from router.commands.project_paths import link_on_the_way

BRIDGE_SOURCE = Path(__file__).resolve().parent.parent / "bridge"
BRIDGE_FILES = (*sorted(p.name for p in BRIDGE_SOURCE.iterdir() if p.suffix == ".mjs"), "package.json")
MODULE_SUFFIXES = ("*.mjs", "*.ts")  # what an installed bridge's modules are named (an older one: .ts)
PROJECT_SIDECAR = ("resolved on each machine: $ROUTER_PYTHON, the user's own install, "
                   "router or python3 on PATH (docs/guide.md)")
EXTENSION_NAME = "pi-policy-router"
CONFIG_NAME = "router-bridge.json"
PROJECT_DIR = ".pi"


def target_dir(*, agent: Path, cwd: Path, project: bool) -> Path:
    base = cwd / ".pi" if project else agent
    return base / "extensions" / EXTENSION_NAME


def serve_command() -> list[str]:
    """How the bridge starts the sidecar: this interpreter, never a shell; `-P` keeps the working
    directory off `sys.path`, so a module a project ships can never shadow the router's own."""
    return [sys.executable, "-P", "-m", "router", "serve"]


def expected_files(created: list[str] | None = None, *, project: bool = False) -> dict[str, str]:
    """The files an install writes; `created` records the project folders the install made."""
    files = {name: (BRIDGE_SOURCE / name).read_text(encoding="utf-8") for name in BRIDGE_FILES}
    config: dict[str, Any] = {"sidecar": PROJECT_SIDECAR} if project else {"command": serve_command()}
    if created:
        config["created"] = created
    files[CONFIG_NAME] = json.dumps(config, indent=2) + "\n"
    return files


def linked_folder(target: Path, cwd: Path) -> Path | None:
    """The first of `.pi`, `.pi/extensions`, the bridge's folder and the files an install writes
    in it that is a symbolic link (or a folder that is not one), None when none is: an install or
    uninstall through a link a repository committed would write or delete wherever it points
    (router/commands/project_paths.py)."""
    link = link_on_the_way(target, cwd)
    if link is not None:
        return link
    folders = (cwd / ".pi", cwd / ".pi" / "extensions", target)
    files = [target / name for name in (*BRIDGE_FILES, CONFIG_NAME)]
    found = next((path for path in folders if path.exists() and not path.is_dir()), None)
    return found or next((path for path in files if path.is_symlink()), None)


def _refused(target: Path, cwd: Path) -> tuple[int, str] | None:
    found = linked_folder(target, cwd)
    if found is None:
        return None
    return 1, (f"error: {found} is a symbolic link or not a folder; the bridge is installed only into "
               "real files and folders of the project (nothing was written or removed)")


def install(*, agent: Path, cwd: Path, project: bool) -> tuple[int, str]:
    """Copy the bridge and write its config; report what changed."""
    target = target_dir(agent=agent, cwd=cwd, project=project)
    if project and (refusal := _refused(target, cwd)):
        return refusal
    created = _created_folders(target, cwd) if project else []
    target.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in expected_files(created, project=project).items():
        path = target / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    stale = _remove_stale(target)
    scope = "project" if project else "user"
    if not changed and not stale:
        return 0, f"the bridge is already installed ({scope}): {target}"
    lines = [f"installed the bridge ({scope}): {target}"]
    lines += [f"updated: {', '.join(changed)}"] if changed else []
    lines += [f"removed: {', '.join(stale)} (no longer part of the bridge)"] if stale else []
    lines.append(f"sidecar: {_sidecar_note(agent) if project else ' '.join(serve_command())}")
    if project:
        lines.append("note: Pi loads project extensions only once the project is trusted (/trust)")
    lines.append("next: router doctor")
    return 0, "\n".join(lines)


def _remove_stale(target: Path) -> list[str]:
    """Remove the modules an older bridge had and this one has not (all `.ts` ones); their names."""
    stale = sorted(p.name for p in _modules(target) if p.name not in BRIDGE_FILES)
    for name in stale:
        (target / name).unlink()
    return stale


def _modules(target: Path) -> list[Path]:
    return [path for pattern in MODULE_SUFFIXES for path in target.glob(pattern)]


def _sidecar_note(agent: Path) -> str:
    """How a project install finds the sidecar, and what it resolves to here."""
    from router.commands.sidecar_command import resolve  # it reads the user's config through this module

    return f"resolved on each machine; here {resolve(os.environ, agent).describe()}"


def _created_folders(target: Path, cwd: Path) -> list[str]:
    """`.pi` when this install makes it, or when an earlier install recorded making it."""
    recorded = _read_config(target).get("created")
    earlier = recorded if isinstance(recorded, list) and PROJECT_DIR in recorded else []
    return [PROJECT_DIR] if earlier or not (cwd / PROJECT_DIR).exists() else []


def uninstall(*, agent: Path, cwd: Path, project: bool) -> tuple[int, str]:
    """Remove the bridge; for a project also the folders it leaves empty that Pi would gate.

    An empty `.pi/extensions/` still makes Pi ask about trust, so it goes whoever made it; `.pi/`
    goes only when the install made it and it is empty now.
    """
    target = target_dir(agent=agent, cwd=cwd, project=project)
    if project and (refusal := _refused(target, cwd)):
        return refusal
    if not target.exists():
        return 0, f"the bridge is not installed there: {target}"
    recorded = _read_config(target).get("created")
    shutil.rmtree(target)
    removed = [target]
    if project:
        made_pi = isinstance(recorded, list) and PROJECT_DIR in recorded
        for folder, remove in ((target.parent, True), (cwd / PROJECT_DIR, made_pi)):
            if remove and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                removed.append(folder)
    return 0, "\n".join(f"removed {path}" for path in removed)


def _read_config(target: Path) -> dict[str, Any]:
    """The installed router-bridge.json as an object ({} when missing or unreadable)."""
    text = bridge_text(target / CONFIG_NAME)
    try:
        data = json.loads(text) if text is not None else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def bridge_text(path: Path) -> str | None:
    """An installed bridge file's text; None when it is missing, is not a regular UTF-8 file of at
    most 4 MiB, or leads out of its folder (a project's `.pi/extensions/…/index.mjs` linked to a file
    of the user's is never read: `read_text`)."""
    from router.diagnostics.errors import SourceError
    from router.load.file_reading import read_text

    try:
        return read_text(path, within=path.parent)
    except SourceError:
        return None


def configured_command(target: Path) -> list[str] | None:
    """The sidecar command an installed bridge runs (its router-bridge.json), or None if unreadable."""
    command = _read_config(target).get("command")
    if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
        return command
    return None


def installed_state(*, agent: Path, cwd: Path) -> list[tuple[str, Path, bool]]:
    """(scope, directory, up to date) for each place the bridge is installed."""
    found = []
    expected = expected_files()
    for scope, project in (("user", False), ("project", True)):
        target = target_dir(agent=agent, cwd=cwd, project=project)
        if (target / "index.mjs").is_file() or (target / "index.ts").is_file():
            current = all(bridge_text(target / n) == t
                          for n, t in expected.items() if n != CONFIG_NAME)
            current = current and not any(p.name not in BRIDGE_FILES for p in _modules(target))
            found.append((scope, target, current))
    return found
