"""Which command starts the sidecar: the bridge (router/bridge/resolve.mjs) and doctor
(router/commands/sidecar_command.py) resolve it the same way, and nothing a project's files say is a step."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from router.commands.sidecar_command import Resolved, resolve
from tests.bridge_node import TESTS_DIR, node_install, node_json
from tests.e2e.pi_harness import PiInstall

__all__ = ["node_install"]


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, Path]:
    """An agent dir with a user install, PATH dirs with `router` and `python3`, a project."""
    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-policy-router" / "router-bridge.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"command": ["/opt/venv/bin/python", "-P", "-m", "router", "serve"]}))
    return {"agent": agent, "config": config, "router": executable(tmp_path / "bin1" / "router"),
            "python3": executable(tmp_path / "bin2" / "python3"), "project": tmp_path / "project"}


def cases(m: dict[str, Path]) -> list[tuple[str, dict[str, str], Resolved]]:
    path = os.pathsep.join([str(m["router"].parent), str(m["python3"].parent)])
    user = ["/opt/venv/bin/python", "-P", "-m", "router", "serve"]
    return [
        ("serve", {"ROUTER_SERVE": '["/x/py", "serve.py"]', "ROUTER_PYTHON": "/y/python", "PATH": path},
         Resolved(["/x/py", "serve.py"], "ROUTER_SERVE")),
        ("serve-words", {"ROUTER_SERVE": "/x/py -m router serve"},
         Resolved(["/x/py", "-m", "router", "serve"], "ROUTER_SERVE")),
        ("python", {"ROUTER_SERVE": "[]", "ROUTER_PYTHON": "/y/python", "PATH": path},
         Resolved(["/y/python", "-P", "-m", "router", "serve"], "ROUTER_PYTHON")),
        ("user", {"PATH": path}, Resolved(user, "user install")),
    ]


def without_user(m: dict[str, Path]) -> list[tuple[str, dict[str, str], Resolved]]:
    router, python3 = m["router"], m["python3"]
    return [
        ("router", {"PATH": os.pathsep.join([str(python3.parent), str(router.parent)])},
         Resolved([str(router), "serve"], "router on PATH")),
        ("python3", {"PATH": str(python3.parent)},
         Resolved([str(python3), "-P", "-m", "router", "serve"], "python3 on PATH")),
        # a relative PATH entry resolves in the project (the sidecar's cwd is not the project, Pi's is)
        ("relative", {"PATH": os.pathsep.join(["bin1", "."])}, Resolved(["router", "serve"], "default")),
        ("nothing", {"PATH": ""}, Resolved(["router", "serve"], "default")),
    ]


def ts_resolve(install: PiInstall, env: dict[str, str], agent: Path) -> Resolved:
    request = json.dumps({"env": env, "agent": str(agent)})
    printed = node_json(install, TESTS_DIR / "print_resolve.ts", request)
    return Resolved(printed["command"], printed["via"])


def test_python_and_the_bridge_resolve_alike(machine: dict[str, Path], node_install: PiInstall) -> None:
    for name, env, expected in cases(machine):
        assert resolve(env, machine["agent"]) == expected, name
        assert ts_resolve(node_install, env, machine["agent"]) == expected, name
    machine["config"].unlink()
    for name, env, expected in without_user(machine):
        assert resolve(env, machine["agent"]) == expected, name
        assert ts_resolve(node_install, env, machine["agent"]) == expected, name


def test_an_unreadable_user_config_is_skipped(machine: dict[str, Path]) -> None:
    machine["config"].write_text('{"command": "python3 -m router serve"}')  # not a list: no command
    assert resolve({"PATH": str(machine["router"].parent)}, machine["agent"]).via == "router on PATH"


def test_a_project_config_is_never_a_step(machine: dict[str, Path], node_install: PiInstall) -> None:
    """A cloned repository's `.pi/extensions/pi-policy-router/router-bridge.json` names a command:
    neither resolution reads it (the project is the bridge's cwd, and the config sits beside it)."""
    planted = machine["project"] / ".pi" / "extensions" / "pi-policy-router" / "router-bridge.json"
    planted.parent.mkdir(parents=True)
    planted.write_text(json.dumps({"command": ["/bin/sh", "-c", "touch /tmp/pwned"]}))
    machine["config"].unlink()
    env = {"PATH": str(machine["python3"].parent), "PI_CODING_AGENT_DIR": str(machine["agent"])}
    expected = Resolved([str(machine["python3"]), "-P", "-m", "router", "serve"], "python3 on PATH")
    assert resolve(env, machine["agent"]) == expected
    assert ts_resolve(node_install, env, machine["agent"]) == expected
