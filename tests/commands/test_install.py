"""router.commands.install: copy the bridge where Pi finds it, idempotently; report and repair drift."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from router.commands import install as command

SOURCE = Path(command.__file__).resolve().parent.parent / "bridge"


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """(agent dir, project cwd), both empty."""
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    cwd.mkdir()
    return agent, cwd


def user_target(agent: Path) -> Path:
    return agent / "extensions" / "pi-policy-router"


MODULES = sorted(p.name for p in SOURCE.glob("*.mjs"))


def test_install_copies_every_module_and_writes_the_config(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    code, message = command.install(agent=agent, cwd=cwd, project=False)
    target = user_target(agent)
    assert code == 0
    assert {"index.mjs", "transport.mjs", "apply.mjs", "warm.mjs"} <= set(MODULES)
    assert "types.mjs" not in MODULES  # types only: nothing to run
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [*MODULES, "package.json", "router-bridge.json"])
    for name in [*MODULES, "package.json"]:
        assert (target / name).read_text() == (SOURCE / name).read_text(), name
    config = json.loads((target / "router-bridge.json").read_text())
    assert config == {"command": [sys.executable, "-P", "-m", "router", "serve"]}
    assert f"installed the bridge (user): {target}" in message
    assert f"updated: {', '.join(MODULES)}, package.json, router-bridge.json" in message
    assert f"sidecar: {sys.executable} -P -m router serve" in message
    assert "trusted" not in message


def test_install_twice_reports_nothing_changed(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    for path in user_target(agent).iterdir():  # an old mtime: a rewrite shows even within one clock tick
        os.utime(path, ns=(1, 1))
    code, message = command.install(agent=agent, cwd=cwd, project=False)
    assert (code, message) == (0, f"the bridge is already installed (user): {user_target(agent)}")
    assert {p.stat().st_mtime_ns for p in user_target(agent).iterdir()} == {1}


def test_installed_state_none_before_install(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    assert command.installed_state(agent=agent, cwd=cwd) == []


def test_installed_state_edited_copy_outdated_then_repaired(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    target = user_target(agent)
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", target, True)]
    (target / "index.mjs").write_text("// an old bridge\n")
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", target, False)]
    code, message = command.install(agent=agent, cwd=cwd, project=False)
    assert code == 0 and "updated: index.mjs\n" in message
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", target, True)]
    assert (target / "index.mjs").read_text() == (SOURCE / "index.mjs").read_text()


def test_installed_state_missing_module_outdated_then_repaired(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    (user_target(agent) / "transport.mjs").unlink()
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", user_target(agent), False)]
    assert "updated: transport.mjs\n" in command.install(agent=agent, cwd=cwd, project=False)[1]
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", user_target(agent), True)]


def test_install_removes_a_module_the_bridge_no_longer_has(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    stale = user_target(agent) / "old_module.ts"
    stale.write_text("export {};\n")
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", user_target(agent), False)]
    code, message = command.install(agent=agent, cwd=cwd, project=False)
    assert code == 0 and "removed: old_module.ts (no longer part of the bridge)" in message
    assert not stale.exists()
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", user_target(agent), True)]


def test_install_over_a_typescript_bridge_replaces_it(dirs: tuple[Path, Path]) -> None:
    """An install of a bridge that shipped `.ts` modules: outdated, then the `.ts` files go."""
    agent, cwd = dirs
    target = user_target(agent)
    target.mkdir(parents=True)
    for name in ("index.ts", "transport.ts"):
        (target / name).write_text("export {};\n")
    (target / "package.json").write_text('{"type": "module", "pi": {"extensions": ["./index.ts"]}}\n')
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", target, False)]
    code, message = command.install(agent=agent, cwd=cwd, project=False)
    assert code == 0 and "removed: index.ts, transport.ts (no longer part of the bridge)" in message
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [*MODULES, "package.json", "router-bridge.json"])
    assert json.loads((target / "package.json").read_text())["pi"]["extensions"] == ["./index.mjs"]
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", target, True)]


def test_installed_state_missing_package_json_outdated(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    (user_target(agent) / "package.json").unlink()
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", user_target(agent), False)]


def test_install_rewrites_a_config_naming_another_python(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    config = user_target(agent) / "router-bridge.json"
    config.write_text(json.dumps({"command": ["/old/python", "-m", "router", "serve"]}))
    _, message = command.install(agent=agent, cwd=cwd, project=False)
    assert "updated: router-bridge.json" in message
    assert json.loads(config.read_text())["command"][0] == sys.executable


def test_install_project_under_dot_pi_extensions(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    code, message = command.install(agent=agent, cwd=cwd, project=True)
    target = cwd / ".pi" / "extensions" / "pi-policy-router"
    assert code == 0 and (target / "index.mjs").is_file() and (target / "router-bridge.json").is_file()
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [*MODULES, "package.json", "router-bridge.json"])
    assert not agent.exists()
    assert f"installed the bridge (project): {target}" in message
    assert "sidecar: resolved on each machine; here " in message
    assert "once the project is trusted" in message
    assert command.installed_state(agent=agent, cwd=cwd) == [("project", target, True)]


def test_installed_state_lists_user_then_project(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=True)
    command.install(agent=agent, cwd=cwd, project=False)
    assert [scope for scope, _, _ in command.installed_state(agent=agent, cwd=cwd)] == ["user", "project"]


def test_uninstall_removes_then_says_not_installed(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    target = user_target(agent)
    assert command.uninstall(agent=agent, cwd=cwd, project=False) == (0, f"removed {target}")
    assert not target.exists() and (agent / "extensions").is_dir()
    assert command.uninstall(agent=agent, cwd=cwd, project=False) == (
        0, f"the bridge is not installed there: {target}")
    assert command.installed_state(agent=agent, cwd=cwd) == []


def test_uninstall_project_leaves_the_user_install(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    command.install(agent=agent, cwd=cwd, project=True)
    command.uninstall(agent=agent, cwd=cwd, project=True)
    assert command.installed_state(agent=agent, cwd=cwd) == [("user", user_target(agent), True)]


def tree(root: Path) -> list[str]:
    """Every path under `root`, relative, sorted (folders end with /)."""
    return sorted(f"{p.relative_to(root)}{'/' if p.is_dir() else ''}" for p in root.rglob("*"))


def test_uninstall_project_leaves_the_project_as_it_found_it(dirs: tuple[Path, Path]) -> None:
    """No .pi/ before: install makes .pi/extensions/pi-policy-router/, uninstall removes all three."""
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=True)
    target = cwd / ".pi" / "extensions" / "pi-policy-router"
    assert json.loads((target / "router-bridge.json").read_text())["created"] == [".pi"]
    again = command.install(agent=agent, cwd=cwd, project=True)[1]
    assert again.startswith("the bridge is already installed")
    code, message = command.uninstall(agent=agent, cwd=cwd, project=True)
    assert code == 0
    assert message.splitlines() == [f"removed {target}", f"removed {target.parent}", f"removed {cwd / '.pi'}"]
    assert tree(cwd) == []


def test_uninstall_project_keeps_a_pi_folder_it_did_not_make(dirs: tuple[Path, Path]) -> None:
    """An existing .pi/ (with a policy, or empty) stays; the emptied .pi/extensions/ goes, since
    Pi would still ask about trust for it."""
    agent, cwd = dirs
    (cwd / ".pi").mkdir()
    (cwd / ".pi" / "router.yaml").write_text("version: 1\n")
    command.install(agent=agent, cwd=cwd, project=True)
    assert "created" not in json.loads(
        (cwd / ".pi" / "extensions" / "pi-policy-router" / "router-bridge.json").read_text())
    command.uninstall(agent=agent, cwd=cwd, project=True)
    assert tree(cwd) == [".pi/", ".pi/router.yaml"]
    (cwd / ".pi" / "router.yaml").unlink()
    command.install(agent=agent, cwd=cwd, project=True)
    command.uninstall(agent=agent, cwd=cwd, project=True)
    assert tree(cwd) == [".pi/"]


def test_uninstall_project_keeps_other_extensions(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=True)
    other = cwd / ".pi" / "extensions" / "other.ts"
    other.write_text("export default () => {};\n")
    command.uninstall(agent=agent, cwd=cwd, project=True)
    assert tree(cwd) == [".pi/", ".pi/extensions/", ".pi/extensions/other.ts"]


def test_serve_command_is_this_python_without_a_shell() -> None:
    assert command.serve_command() == [sys.executable, "-P", "-m", "router", "serve"]
    assert command.expected_files()["router-bridge.json"].endswith("\n")


@pytest.mark.parametrize(("text", "expected"), [
    (None, "installed"),
    ('{"command": ["/x/python3", "-m", "router", "serve"]}', ["/x/python3", "-m", "router", "serve"]),
    ('{"command": []}', None), ('{"command": "python3 -m router"}', None), ("[1]", None), ("{oops", None)])
def test_configured_command(dirs: tuple[Path, Path], text: str | None, expected: Any) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=False)
    target = user_target(agent)
    if text is not None:
        (target / command.CONFIG_NAME).write_text(text)
    wanted = command.serve_command() if expected == "installed" else expected
    assert command.configured_command(target) == wanted
    (target / command.CONFIG_NAME).unlink()
    assert command.configured_command(target) is None


def test_project_config_names_no_command_and_no_path_of_this_machine(dirs: tuple[Path, Path]) -> None:
    """A committable `.pi/`: the project's router-bridge.json is the same on every machine."""
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=True)
    text = (cwd / ".pi" / "extensions" / "pi-policy-router" / "router-bridge.json").read_text()
    assert json.loads(text) == {"sidecar": command.PROJECT_SIDECAR, "created": [".pi"]}
    assert command.configured_command(cwd / ".pi" / "extensions" / "pi-policy-router") is None
    for machine_path in (sys.executable, str(cwd), str(agent), str(Path.home())):
        assert machine_path not in text
    for name in MODULES:  # nor does any module the install copies
        assert str(SOURCE) not in (SOURCE / name).read_text()


def test_a_user_install_keeps_naming_this_python(dirs: tuple[Path, Path]) -> None:
    agent, cwd = dirs
    command.install(agent=agent, cwd=cwd, project=True)
    command.install(agent=agent, cwd=cwd, project=False)
    assert command.configured_command(user_target(agent)) == command.serve_command()


@pytest.mark.parametrize("linked", [".pi", ".pi/extensions", ".pi/extensions/pi-policy-router"])
@pytest.mark.parametrize("uninstall", [False, True])
def test_a_project_install_never_goes_through_a_link_the_repository_made(
        dirs: tuple[Path, Path], tmp_path: Path, linked: str, uninstall: bool) -> None:
    """A cloned repository's `.pi` (or a folder in it) that is a symbolic link to a folder of the
    user's: the install would write and remove files there, the uninstall delete it whole."""
    agent, cwd = dirs
    victim = tmp_path / "victim"
    inner = victim / "extensions" / "pi-policy-router" if linked == ".pi" else \
        victim / "pi-policy-router" if linked == ".pi/extensions" else victim
    inner.mkdir(parents=True)
    for name in ("keep.mjs", "notes.ts", "package.json"):
        (inner / name).write_text("the user's\n")
    link = cwd / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim, target_is_directory=True)
    before = sorted((p.relative_to(victim), p.read_bytes()) for p in victim.rglob("*") if p.is_file())
    action = command.uninstall if uninstall else command.install
    code, message = action(agent=agent, cwd=cwd, project=True)
    assert code == 1 and f"{link} is a symbolic link" in message and "nothing was written" in message
    assert sorted((p.relative_to(victim), p.read_bytes()) for p in victim.rglob("*") if p.is_file()) == before


@pytest.mark.parametrize("name", ["index.mjs", "package.json", "router-bridge.json"])
def test_a_project_install_never_writes_through_a_file_link(dirs: tuple[Path, Path], tmp_path: Path,
                                                           name: str) -> None:
    """A real bridge folder in the repository, one of whose files links to a file of the user's."""
    agent, cwd = dirs
    bashrc = tmp_path / ".bashrc"
    bashrc.write_text("the user's\n")
    target = cwd / ".pi" / "extensions" / "pi-policy-router"
    target.mkdir(parents=True)
    (target / name).symlink_to(bashrc)
    code, message = command.install(agent=agent, cwd=cwd, project=True)
    assert code == 1 and f"{target / name} is a symbolic link" in message
    assert bashrc.read_text() == "the user's\n" and sorted(p.name for p in target.iterdir()) == [name]


def test_a_user_install_may_live_behind_the_user_s_own_link(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    """The agent dir is the user's: a linked extensions folder (dotfiles) is theirs to make."""
    agent, cwd = dirs
    real = tmp_path / "dotfiles" / "extensions"
    real.mkdir(parents=True)
    agent.mkdir()
    (agent / "extensions").symlink_to(real, target_is_directory=True)
    code, _ = command.install(agent=agent, cwd=cwd, project=False)
    assert code == 0 and (real / "pi-policy-router" / "index.mjs").is_file()
