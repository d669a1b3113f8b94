"""`router install` puts the bridge where Pi discovers it; `--uninstall` takes it away."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.e2e import helpers_router
from tests.e2e.helpers_router import BRIDGE, BUILTIN, SERVE_ARGV, RouterRig
from tests.e2e.pi_harness import run_print

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
    assert sorted(snapshot) == sorted([*(p.name for p in BRIDGE.parent.glob("*.mjs")), "package.json",
                                       "router-bridge.json"])
    assert (target / "index.mjs").read_text() == BRIDGE.read_text()
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
    """A cloned repository ships the bridge with a router-bridge.json that names a command that
    leaves a marker. Doctor reports it without running it, and asks Pi for its models with
    --no-approve; and even Pi loading the trusted copy does not run it (the control at the end):
    the bridge never takes a command from a project's files."""
    rig.policy("rules:\n  - {id: m, on: input, do: [{model: fake/fake-cloud}]}\n")
    env = {key: value for key, value in rig.env.items() if key != "ROUTER_SERVE"}
    env["PATH"] = os.pathsep.join([rig.install.path_prefix, "/usr/bin", "/bin"])
    marker = rig.tmp / "marker"
    target = rig.work / ".pi" / "extensions" / "pi-policy-router"
    target.mkdir(parents=True)
    for module in [*BRIDGE.parent.glob("*.mjs"), BRIDGE.parent / "package.json"]:
        (target / module.name).write_text(module.read_text())
    (target / "router-bridge.json").write_text(json.dumps({"command": ["/bin/sh", "-c", f"touch {marker}"]}))
    (rig.agent / "trust.json").write_text(json.dumps({str(rig.work.resolve()): True}))

    doctor = rig.router("doctor", env={**env, "ROUTER_PYTHON": sys.executable}, timeout=120)

    assert not marker.exists(), doctor.stdout
    assert f"names /bin/sh -c touch {marker}; ignored: a project cannot choose the sidecar command " \
        f"(project files are not executed); here {sys.executable} -P -m router serve (from ROUTER_PYTHON)" \
        in doctor.stdout, doctor.stdout
    assert "ok   sidecar: ready in " in doctor.stdout
    assert "ok   model fake/fake-cloud" in doctor.stdout
    # no python3 or router on PATH: the copy's resolution ends at its default, `router`, which fails
    bare = {**env, "PATH": rig.install.path_prefix}
    control = subprocess.run([str(rig.install.bin_dir / "pi"), "--list-models"], cwd=rig.work, env=bare,
                             capture_output=True, text=True, timeout=60, check=False)
    assert control.returncode == 0, control.stderr
    assert not marker.exists()  # the trusted copy ran, and resolved the sidecar instead
    assert "sidecar failed to start (router, from default)" in rig.log(), rig.log()


def second_python(root: Path) -> Path:
    """Another interpreter that has the router: a venv without pip whose site-packages adds this
    one's (so `router` is importable), at a path of its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python3"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "router-tests.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


def test_a_committed_project_install_works_on_another_machine_from_another_python(rig: RouterRig) -> None:
    """`router install --project` by this venv, the project copied elsewhere (a clone on another
    machine), and Pi there finds the sidecar of a second Python: on PATH, then by ROUTER_PYTHON."""
    rig.policy(CUT)
    installed = rig.router("install", "--project")
    assert installed.returncode == 0, installed.stderr
    clone = rig.tmp / "elsewhere" / "clone"
    shutil.copytree(rig.work, clone)
    config = (clone / ".pi" / "extensions" / "pi-policy-router" / "router-bridge.json").read_text()
    for machine_path in (sys.executable, str(rig.work), str(rig.tmp), str(Path.home())):
        assert machine_path not in config, config
    python2 = second_python(rig.tmp / "venv2")
    (rig.agent / "trust.json").write_text(json.dumps({str(clone.resolve()): True}))  # Pi's project trust
    base = {key: value for key, value in rig.env.items() if key != "ROUTER_SERVE"}
    runs = {
        "python3 on PATH": {**base, "PATH": os.pathsep.join([str(python2.parent), rig.install.path_prefix])},
        "ROUTER_PYTHON": {**base, "PATH": rig.install.path_prefix, "ROUTER_PYTHON": str(python2)},
    }
    for via, env in runs.items():
        rig.fake.log.clear()
        done = run_print(["--no-session", "hello"], cwd=clone, env=env, install=rig.install)
        doctor = subprocess.run([str(python2), "-m", "router", "doctor"], cwd=clone, env=env,
                                capture_output=True, text=True, timeout=120, check=False)

        assert done.returncode == 0, done.stderr
        assert "[router]" not in done.stderr, done.stderr
        [request] = rig.fake.chat_requests()
        assert request.tools == ["read"], via  # the policy applied: the second Python's sidecar ran
        assert f"sidecar from: {python2} -P -m router serve (from {via})" in doctor.stdout, doctor.stdout
        assert "ok   sidecar: ready in " in doctor.stdout, doctor.stdout
