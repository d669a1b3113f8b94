"""Node 22 and TypeScript from the e2e harness's cache, for the bridge's type check and unit tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import router
from tests.e2e.pi_harness import PiInstall, PiInstallError, ensure_pi

BRIDGE_DIR = Path(router.__file__).resolve().parent / "bridge"
TESTS_DIR = Path(__file__).resolve().parent / "bridge"
TIMEOUT_S = 300


@pytest.fixture(scope="session")
def node_install() -> PiInstall:
    """The harness's install (Node 22, Pi's types, the pinned TypeScript); a failure fails the test."""
    try:
        return ensure_pi()
    except PiInstallError as exc:
        pytest.fail(f"could not install Node 22, Pi and TypeScript: {exc}", pytrace=False)


def run_node(install: PiInstall, *args: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`node <args>` with Node 22 (TypeScript files run with Node's type stripping)."""
    return subprocess.run([str(install.node), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)


def node_json(install: PiInstall, script: Path, *args: str) -> Any:
    """The JSON a script prints."""
    done = run_node(install, str(script), *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
