"""`router install` puts the bridge where Pi discovers it; `--uninstall` takes it away."""

from __future__ import annotations

import json
import os
import subprocess

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


def test_project_install_then_uninstall_leaves_no_trace(rig: RouterRig) -> None:
    """`router install --project --uninstall` takes away what the install made: an empty
    .pi/extensions/ would still make Pi ask about trust."""
    before = sorted(rig.work.rglob("*"))
    installed = rig.router("install", "--project")
    removed = rig.router("install", "--project", "--uninstall")

    assert installed.returncode == 0, installed.stderr
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines()[-1] == f"removed {rig.work / '.pi'}"
    assert sorted(rig.work.rglob("*")) == before


def test_doctor_never_runs_the_sidecar_command_a_project_names(rig: RouterRig) -> None:
    """A cloned repository ships a bridge copy whose router-bridge.json names a command that leaves
    a marker. Doctor reports it without running it, and asks Pi for its models with --no-approve so
    that Pi does not load the copy either (the control at the end shows Pi would run it)."""
    rig.policy("rules:\n  - {id: m, on: input, do: [{model: fake/fake-cloud}]}\n")
    env = {key: value for key, value in rig.env.items() if key != "ROUTER_SERVE"}
    env["PATH"] = os.pathsep.join([rig.install.path_prefix, "/usr/bin", "/bin"])
    marker = rig.tmp / "marker"
    target = rig.work / ".pi" / "extensions" / "pi-policy-router"
    target.mkdir(parents=True)
    (target / "index.ts").write_text(BRIDGE.read_text())
    (target / "package.json").write_text((BRIDGE.parent / "package.json").read_text())
    (target / "router-bridge.json").write_text(json.dumps({"command": ["/bin/sh", "-c", f"touch {marker}"]}))
    (rig.agent / "trust.json").write_text(json.dumps({str(rig.work.resolve()): True}))

    doctor = rig.router("doctor", env=env, timeout=120)

    assert not marker.exists(), doctor.stdout
    assert f"names /bin/sh -c touch {marker}; not run (project files are not executed); this " \
        "interpreter's sidecar was checked instead" in doctor.stdout, doctor.stdout
    assert "ok   sidecar: ready in " in doctor.stdout
    assert "ok   model fake/fake-cloud" in doctor.stdout
    control = subprocess.run([str(rig.install.bin_dir / "pi"), "--list-models"], cwd=rig.work, env=env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert control.returncode == 0, control.stderr
    assert marker.exists()  # a trusted project's bridge copy runs its command when Pi loads it
