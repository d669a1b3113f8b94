"""`router install`: register the bridge with Pi, idempotently, recording which Python serves it.

The bridge (router/bridge: index.ts + package.json) is copied into
`<agent dir>/extensions/pi-policy-router/` (or `.pi/extensions/pi-policy-router/` with
`--project`), where Pi discovers it, next to a `router-bridge.json` naming the command that starts
the sidecar: this Python with `-m router serve`.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

BRIDGE_SOURCE = Path(__file__).resolve().parent.parent / "bridge"
BRIDGE_FILES = ("index.ts", "package.json")
EXTENSION_NAME = "pi-policy-router"
CONFIG_NAME = "router-bridge.json"


def target_dir(*, agent: Path, cwd: Path, project: bool) -> Path:
    base = cwd / ".pi" if project else agent
    return base / "extensions" / EXTENSION_NAME


def serve_command() -> list[str]:
    """How the bridge starts the sidecar: this interpreter, never a shell."""
    return [sys.executable, "-m", "router", "serve"]


def expected_files() -> dict[str, str]:
    files = {name: (BRIDGE_SOURCE / name).read_text(encoding="utf-8") for name in BRIDGE_FILES}
    files[CONFIG_NAME] = json.dumps({"command": serve_command()}, indent=2) + "\n"
    return files


def install(*, agent: Path, cwd: Path, project: bool) -> tuple[int, str]:
    """Copy the bridge and write its config; report what changed."""
    target = target_dir(agent=agent, cwd=cwd, project=project)
    target.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in expected_files().items():
        path = target / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    scope = "project" if project else "user"
    if not changed:
        return 0, f"the bridge is already installed ({scope}): {target}"
    lines = [f"installed the bridge ({scope}): {target}", f"updated: {', '.join(changed)}",
             f"sidecar: {' '.join(serve_command())}"]
    if project:
        lines.append("note: Pi loads project extensions only once the project is trusted (/trust)")
    lines.append("next: router doctor")
    return 0, "\n".join(lines)


def uninstall(*, agent: Path, cwd: Path, project: bool) -> tuple[int, str]:
    target = target_dir(agent=agent, cwd=cwd, project=project)
    if not target.exists():
        return 0, f"the bridge is not installed there: {target}"
    shutil.rmtree(target)
    return 0, f"removed {target}"


def configured_command(target: Path) -> list[str] | None:
    """The sidecar command an installed bridge runs (its router-bridge.json), or None if unreadable."""
    try:
        command = json.loads((target / CONFIG_NAME).read_text(encoding="utf-8")).get("command")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
        return command
    return None


def installed_state(*, agent: Path, cwd: Path) -> list[tuple[str, Path, bool]]:
    """(scope, directory, up to date) for each place the bridge is installed."""
    found = []
    expected = expected_files()
    for scope, project in (("user", False), ("project", True)):
        target = target_dir(agent=agent, cwd=cwd, project=project)
        if (target / "index.ts").is_file():
            current = all((target / n).is_file() and (target / n).read_text(encoding="utf-8") == t
                          for n, t in expected.items() if n != CONFIG_NAME)
            found.append((scope, target, current))
    return found
