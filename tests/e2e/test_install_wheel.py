"""Installed like a tool: the wheel holds the engine, the packs and the bridge, no test dependencies.

The README's first section: build or download the wheel, install it (pipx, `uv tool install`, or
pip into a venv of its own), `router install`, then plain `pi`. This test does that from a copy of
the shipped sources: builds the wheel, installs it into a fresh venv without extras (its
dependencies come from the machine's pip configuration, pinned by constraints.txt), runs that
venv's `router install` into an isolated agent dir and a real `pi -p` against the fake provider.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.e2e.fake_provider import FakeProvider
from tests.e2e.helpers_router import write_policy
from tests.e2e.pi_harness import PiInstall, make_agent_dir, pi_env, run_print

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = ["pyproject.toml", "README.md", "router", "rules"]  # what the wheel is built from
TEST_ONLY = {"pytest", "pytest-xdist", "hypothesis", "ruff", "mypy", "opentelemetry-sdk"}
INSTALL_TIMEOUT_S = 600  # a hang, not a measure: pip resolving from the machine's index or cache


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a build or install step; its output goes into the assertion message."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False,
                          **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done  # type: ignore[no-any-return]


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the shipped sources (the build never writes into the checkout)."""
    source = tmp / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules")
    for name in SHIPPED:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=ignore)
        else:
            shutil.copy2(origin, source / name)
    out = tmp / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)])
    [wheel] = out.glob("pi_policy_router-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A new venv with the wheel installed, no extras; its `bin` directory.

    The venv is made without pip (ensurepip installing pip into it was a third of the test), and
    this interpreter's pip installs into it (`--python`): the wheel's own metadata still says what
    is installed beside it, resolved afresh from the machine's pip configuration. `--no-compile`:
    the tool compiles what it imports when it runs, not every module of its dependencies.
    """
    venv = tmp / "tool"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
         "--no-compile", "-c", str(ROOT / "constraints.txt"), str(wheel)])
    return venv / "bin"


# The names of the distributions installed in the venv whose python runs it, normalized (PEP 503).
LIST_DISTRIBUTIONS = """
import importlib.metadata, json, re
names = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower() for d in importlib.metadata.distributions()}
print(json.dumps(sorted(names)))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once for this module."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def unconditional_requirements(wheel: Path) -> set[str]:
    """The normalized names the wheel's METADATA requires without an extra."""
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [line for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    return {re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[(]", line.split(":", 1)[1].strip())[0]).lower()
            for line in requires if "extra ==" not in line}


def test_the_wheel_holds_the_bridge_and_the_packs_and_no_test_dependency(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    bridge = {p.name for p in (ROOT / "router" / "bridge").glob("*.mjs")}
    packs = {p.name for p in (ROOT / "rules").glob("*.yaml")}
    assert {f"router/bridge/{n}" for n in bridge} | {"router/bridge/package.json"} <= names
    assert {f"router/packs/{n}" for n in packs} <= names
    assert not any(n.startswith(("tests/", "bench/", "examples/")) for n in names)
    unconditional = unconditional_requirements(wheel)
    assert unconditional and not unconditional & TEST_ONLY, unconditional


def test_router_install_from_the_wheel_then_plain_pi_routes(tmp_path: Path, wheel: Path,
                                                           fake_provider: FakeProvider,
                                                           pi_install: PiInstall) -> None:
    tool_bin = fresh_venv(tmp_path, wheel)
    listed = run([str(tool_bin / "python"), "-I", "-c", LIST_DISTRIBUTIONS]).stdout
    installed = set(json.loads(listed))
    assert "pi-policy-router" in installed and not installed & TEST_ONLY, sorted(installed)
    assert unconditional_requirements(wheel) <= installed, sorted(installed)  # what the metadata declares

    agent = make_agent_dir(tmp_path, fake_provider, settings={"retry": {"enabled": False}})
    write_policy(agent / "router.yaml", """
        rules:
          - {id: to-cloud, on: input, do: [{model: fake/fake-cloud}]}
    """)
    work = tmp_path / "work"
    work.mkdir()
    # only the tool's bin and Node on PATH: nothing of this checkout's venv is reachable
    env = pi_env(agent, pi_install, extra={"PATH": os.pathsep.join([str(tool_bin), pi_install.path_prefix,
                                                                    "/usr/bin", "/bin"])})
    install = subprocess.run([str(tool_bin / "router"), "install"], cwd=work, env=env, capture_output=True,
                             text=True, timeout=120, check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    target = agent / "extensions" / "pi-policy-router"
    command = json.loads((target / "router-bridge.json").read_text())["command"]
    assert Path(command[0]).parent == tool_bin, command  # the sidecar is the tool venv's

    done = run_print(["--no-session", "hello"], cwd=work, env=env, install=pi_install, timeout=120)

    assert done.returncode == 0, done.stderr
    assert "[router]" not in done.stderr, done.stderr
    assert [request.model for request in fake_provider.chat_requests()] == ["fake-cloud"]
