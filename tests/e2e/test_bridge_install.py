"""`router install` puts the bridge where Pi discovers it; `--uninstall` takes it away."""

from __future__ import annotations

import json
import os

import pytest

from tests.e2e import helpers_router
from tests.e2e.helpers_router import BRIDGE, BUILTIN, SERVE_ARGV, RouterRig

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

CUT = """
rules:
  - id: read-only
    on: input
    do:
      - tools: {only: [read]}
"""


def test_install_discovered_by_plain_pi_then_uninstall(rig: RouterRig) -> None:
    rig.policy(CUT)
    # no ROUTER_SERVE and no `router` on PATH: the sidecar command must come from router-bridge.json
    env = {key: value for key, value in rig.env.items() if key != "ROUTER_SERVE"}
    env["PATH"] = os.pathsep.join([rig.install.path_prefix, "/usr/bin", "/bin"])
    target = rig.agent / "extensions" / "pi-policy-router"

    first = rig.router("install", env=env)
    for path in target.iterdir():  # an old mtime: a rewrite shows even within one clock tick
        os.utime(path, ns=(1, 1))
    snapshot = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in target.iterdir()}
    second = rig.router("install", env=env)

    assert first.returncode == 0, first.stderr
    assert "installed the bridge (user)" in first.stdout
    assert sorted(snapshot) == ["index.ts", "package.json", "router-bridge.json"]
    assert (target / "index.ts").read_text() == BRIDGE.read_text()
    assert json.loads((target / "router-bridge.json").read_text()) == {"command": SERVE_ARGV}
    assert second.returncode == 0, second.stderr
    assert "already installed" in second.stdout
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in target.iterdir()} == snapshot
    assert {p.stat().st_mtime_ns for p in target.iterdir()} == {1}  # not rewritten

    loaded = rig.print("hello", bridge=False, env=env)  # plain pi: no -e

    assert loaded.returncode == 0, loaded.stderr
    assert "[router]" not in loaded.stderr, loaded.stderr
    [with_bridge] = rig.fake.chat_requests()
    assert with_bridge.tools == ["read"]

    removed = rig.router("install", "--uninstall", env=env)
    again = rig.router("install", "--uninstall", env=env)
    rig.fake.log.clear()
    plain = rig.print("hello", bridge=False, env=env)

    assert removed.returncode == 0 and "removed" in removed.stdout, removed.stderr
    assert not target.exists()
    assert again.returncode == 0 and "not installed" in again.stdout
    assert plain.returncode == 0, plain.stderr
    [without_bridge] = rig.fake.chat_requests()
    assert set(without_bridge.tools) >= BUILTIN
