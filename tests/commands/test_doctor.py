"""router.commands.doctor: Pi, Node, the bridge, the policy, a real sidecar and the policy's model refs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from router.commands import doctor
from router.commands.install import install
from router.compile.compiler import load_policy

FAKE_PI = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
case "$1" in
  --version) echo "{version}" ;;
  --list-models)
    echo "provider  model       context  max-out  thinking  images"
    echo "fake      fake-cloud  200K     16.4K    yes       yes"
    echo "fake      fake-local  32K      4.1K     no        no" ;;
  *) exit 2 ;;
esac
"""
POLICY = """\
version: 1
vars:
  cloud: fake/fake-cloud
virtual_models:
  - {provider: router, id: auto}
rules:
  - id: cloud
    on: input
    match: "text == 'a'"
    do: [{model: "{vars.cloud}"}]
  - id: virtual
    on: input
    match: "text == 'b'"
    do: [{model: router/auto}]
  - id: local
    on: input
    match: "text == 'c'"
    do: [{model: llama.cpp/kev}]
  - id: route
    on: route
    do: [{route: fake/fake-local}]
"""


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A fake `pi` first on PATH, an installed bridge and a policy; returns (cwd, agent dir)."""
    bin_dir, agent, cwd = tmp_path / "bin", tmp_path / "agent", tmp_path / "proj"
    for directory in (bin_dir, agent, cwd):
        directory.mkdir()
    fake_pi(bin_dir, "1.6.0")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    for name in ("ROUTER_SERVE", "ROUTER_PYTHON"):  # the resolution's first steps: the user's shell
        monkeypatch.delenv(name, raising=False)
    install(agent=agent, cwd=cwd, project=False)
    (agent / "router.yaml").write_text(POLICY)
    return cwd, agent


def fake_pi(bin_dir: Path, version: str) -> Path:
    path = bin_dir / "pi"
    path.write_text(FAKE_PI.replace("{version}", version))
    path.chmod(0o755)
    return path


def lines_of(output: str) -> dict[str, str]:
    """`ok   label: detail` lines keyed by label, the value being the whole line."""
    return {line[5:].split(":")[0]: line for line in output.splitlines()}


def test_run_all_good_exit_0_with_a_real_sidecar(rig: tuple[Path, Path]) -> None:
    cwd, agent = rig
    code, output = doctor.run(cwd, agent)
    checks = lines_of(output)
    assert code == 0, output
    assert checks["pi"] == f"ok   pi: {shutil.which('pi')} 1.6.0"
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = (int(part) for part in node.strip().lstrip("v").split(".")[:2])
    status = "ok  " if (major, minor) >= doctor.MIN_NODE else "warn"  # an old Node beside a working pi
    assert checks["node"].startswith(f"{status} node: {node.strip()}")
    assert checks["bridge (user)"] == f"ok   bridge (user): {agent / 'extensions' / 'pi-policy-router'}"
    assert checks["sidecar command (user)"] == (
        f"ok   sidecar command (user): {sys.executable} -P -m router serve")
    policy, _ = load_policy(cwd, agent=agent)
    assert policy is not None and checks["policy"].startswith(f"ok   policy: {len(policy.rules)} rules from ")
    assert checks["policy"].endswith("agent/router.yaml")
    assert checks["sidecar from"] == (
        f"ok   sidecar from: {sys.executable} -P -m router serve (from user install)")
    assert checks["sidecar"].startswith("ok   sidecar: ready in ")
    assert checks["sidecar"].endswith(f" ms, forwards {len({*policy.event_types, 'command'})} event types")
    assert checks["warm sidecar"].startswith("ok   warm sidecar: ")
    assert {"input", "route"} <= set(policy.event_types)
    assert checks["model fake/fake-cloud"] == "ok   model fake/fake-cloud"
    assert checks["model fake/fake-local"] == "ok   model fake/fake-local"
    assert checks["model router/auto"] == "ok   model router/auto"
    assert checks["model llama.cpp/kev"].startswith("warn model llama.cpp/kev: `pi --list-models` lists no ")
    assert "pi version" not in checks


def test_check_models_known_unknown_and_unlisted(tmp_path: Path) -> None:
    pi = str(fake_pi(tmp_path, "1.6.0"))
    refs = {"fake/nope", "llama.cpp/kev", "fake/fake-local", "router/auto", "router/other"}
    assert doctor.check_models(pi, refs, {"router/auto"}) == [
        doctor.Check(True, "model fake/fake-local"),
        doctor.Check(False, "model fake/nope", "fake has no such model in `pi --list-models`"),
        doctor.Check(True, "model llama.cpp/kev", "`pi --list-models` lists no llama.cpp models: a provider "
                     "without credentials or a local server that is not running; until Pi lists it, a rule "
                     "that picks it leaves the model unchanged (a classifier on it fails)", warn=True),
        doctor.Check(True, "model router/auto"),
        doctor.Check(False, "model router/other", "router has no such model in `pi --list-models`")]


def test_run_something_failing_exits_1(rig: tuple[Path, Path]) -> None:
    cwd, agent = rig
    (agent / "router.yaml").write_text(POLICY.replace("fake/fake-local", "fake/nope"))
    (agent / "extensions" / "pi-policy-router" / "index.mjs").write_text("// old\n")
    code, output = doctor.run(cwd, agent)
    checks = lines_of(output)
    assert code == 1
    assert checks["model fake/nope"] == "FAIL model fake/nope: fake has no such model in `pi --list-models`"
    assert checks["bridge (user)"].startswith("FAIL bridge (user): ")
    assert checks["bridge (user)"].endswith(" is outdated: run `router install`")


def test_run_runs_the_installed_sidecar_command_and_reports_a_gone_python(rig: tuple[Path, Path]) -> None:
    cwd, agent = rig
    config = agent / "extensions" / "pi-policy-router" / "router-bridge.json"
    config.write_text(json.dumps({"command": [str(cwd / "gone" / "python3"), "-m", "router", "serve"]}))
    code, output = doctor.run(cwd, agent)
    checks = lines_of(output)
    assert code == 1
    assert checks["sidecar command (user)"] == (
        f"FAIL sidecar command (user): {cwd / 'gone' / 'python3'} does not exist (a moved or deleted "
        "environment?): run `router install` with the Python that has the router")
    assert checks["sidecar"].startswith("FAIL sidecar: ") and "gone/python3" in checks["sidecar"]
    assert checks["bridge (user)"].startswith("ok   bridge (user)")


def test_run_unreadable_bridge_config(rig: tuple[Path, Path]) -> None:
    """Without a readable user config the bridge goes on to `router` on PATH: doctor checks that one."""
    cwd, agent = rig
    config = agent / "extensions" / "pi-policy-router" / "router-bridge.json"
    config.write_text("{not json")
    router = Path(shutil.which("pi") or "").parent / "router"
    router.symlink_to(Path(sys.executable).parent / "router")  # this venv's console script
    code, output = doctor.run(cwd, agent)
    assert code == 1
    assert lines_of(output)["sidecar command (user)"] == (
        f"FAIL sidecar command (user): {config} is missing or unreadable: run `router install`")
    assert lines_of(output)["sidecar from"] == f"ok   sidecar from: {router} serve (from router on PATH)"
    assert lines_of(output)["sidecar"].startswith("ok   sidecar: ready in ")


def plant_project_bridge(cwd: Path, marker: Path) -> list[Path]:
    """A repository's own bridge copies whose sidecar command would create `marker` if run."""
    command = ["/bin/sh", "-c", f"touch {marker}", "sh"]
    planted = []
    for name in ("pi-policy-router", "router-bridge"):
        target = cwd / ".pi" / "extensions" / name
        target.mkdir(parents=True)
        (target / "index.ts").write_text("// planted\n")
        (target / "router-bridge.json").write_text(json.dumps({"command": command}))
        planted.append(target)
    return planted


@pytest.mark.parametrize("user_install", [True, False], ids=["with-user-bridge", "project-only"])
def test_run_never_executes_a_project_bridge_command(rig: tuple[Path, Path], user_install: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cwd, agent = rig
    if not user_install:
        shutil.rmtree(agent / "extensions")
        # the project's bridge resolves the sidecar: here ROUTER_PYTHON says this Python
        monkeypatch.setenv("ROUTER_PYTHON", sys.executable)
    marker = cwd.parent / "marker"
    [target, _] = plant_project_bridge(cwd, marker)
    code, output = doctor.run(cwd, agent)
    checks = lines_of(output)
    assert not marker.exists()
    via = "user install" if user_install else "ROUTER_PYTHON"
    resolved = f"{sys.executable} -P -m router serve (from {via})"
    assert checks["sidecar command (project)"] == (
        f"warn sidecar command (project): names /bin/sh -c touch {marker} sh; ignored: a project cannot "
        f"choose the sidecar command (project files are not executed); here {resolved}")
    assert checks["sidecar from"] == f"ok   sidecar from: {resolved}"
    assert checks["sidecar"].startswith("ok   sidecar: ready in ")  # this Python's router serve ran
    assert checks["bridge (project)"].startswith(f"FAIL bridge (project): {target} is outdated")
    assert ("bridge copies" in checks) is user_install
    assert code == 1  # the planted copy is not the router's bridge
    calls = (Path(shutil.which("pi") or "").parent / "calls").read_text().splitlines()
    assert calls == ["--version", "--list-models --no-approve"]  # Pi may not load the project's files


def test_run_both_installs_said_once(rig: tuple[Path, Path]) -> None:
    cwd, agent = rig
    install(agent=agent, cwd=cwd, project=True)
    code, output = doctor.run(cwd, agent)
    copies = [line for line in output.splitlines() if "installed for the user and for this project" in line]
    assert code == 0, output
    assert copies == ["ok   bridge copies: installed for the user and for this project; Pi runs only the "
                      "first copy it loads (the user's; the project's under --approve) and the other does "
                      "nothing: keep one (`router install --project --uninstall`)"]
    assert lines_of(output)["sidecar command (project)"] == (
        f"ok   sidecar command (project): resolved on each machine; here {sys.executable} -P -m router "
        "serve (from user install)")


def test_check_pi_other_version_noted(tmp_path: Path) -> None:
    pi = fake_pi(tmp_path, "1.7.2")
    checks = doctor.check_pi(str(pi))
    assert checks[0] == doctor.Check(True, "pi", f"{pi} 1.7.2")
    assert checks[1] == doctor.Check(True, "pi version", "1.7.2 (the router is tested with 1.6.0)")


def test_check_pi_missing_or_broken(tmp_path: Path) -> None:
    [missing] = doctor.check_pi(None)
    assert (missing.ok, missing.label) == (False, "pi") and "not found on PATH" in missing.detail
    broken = tmp_path / "pi"
    broken.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    broken.chmod(0o755)
    assert doctor.check_pi(str(broken))[0] == doctor.Check(False, "pi", f"{broken} boom")
    assert doctor.check_models(None, {"fake/x"}, set()) == [
        doctor.Check(False, "models", "cannot list Pi's models without pi")]
    assert doctor.check_models(None, set(), set()) == []


def test_run_without_bridge_and_broken_policy(rig: tuple[Path, Path]) -> None:
    cwd, agent = rig
    shutil.rmtree(agent / "extensions")
    (agent / "router.yaml").write_text("rules:\n  - {id: a, on: inptu, do: [{notify: x}]}\n")
    code, output = doctor.run(cwd, agent)
    checks = lines_of(output)
    assert code == 1
    assert checks["bridge"] == "FAIL bridge: not installed (run `router install`)"
    assert checks["policy"] == (f"FAIL policy: 0 rules from default pack, {agent / 'router.yaml'}; "
                                "1 errors (run `router lint`)")
    # layers fail apart: the sidecar starts with the built-in pack's events (and `command`)
    from tests.runtime.test_server import events

    assert checks["sidecar"].startswith("ok   sidecar: ")
    assert f"forwards {len(events())} event types" in checks["sidecar"]


def test_policy_models_literal_refs_of_model_route_and_vars(tmp_path: Path) -> None:
    from tests.helpers import compile_ok

    policy = compile_ok(tmp_path, POLICY)
    assert doctor.policy_models(policy) == {"fake/fake-cloud", "fake/fake-local", "router/auto",
                                            "llama.cpp/kev"}


def test_check_render() -> None:
    assert doctor.Check(True, "pi", "x").render() == "ok   pi: x"
    assert doctor.Check(False, "node").render() == "FAIL node"


def test_check_trust_names_the_state_and_the_command(tmp_path: Path) -> None:
    from router.commands.doctor import check_trust
    from router.runtime.project_content import read_project_content
    from router.trust.store import TrustStore

    cwd, agent = tmp_path / "proj", tmp_path / "agent"
    assert check_trust(cwd, agent) == []
    (cwd / ".pi").mkdir(parents=True)
    (cwd / ".pi" / "router.yaml").write_text("rules: []\n")
    [untrusted] = check_trust(cwd, agent)
    assert untrusted.warn and f"router trust {cwd.resolve()}" in untrusted.detail
    content, _ = read_project_content(cwd)
    assert content is not None
    TrustStore(agent).trust(content)
    [trusted] = check_trust(cwd, agent)
    assert trusted.ok and not trusted.warn and "is trusted" in trusted.detail
