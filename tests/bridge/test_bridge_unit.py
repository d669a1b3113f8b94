"""The bridge's unit tests (tests/bridge/*.test.ts): the transport over a fake sidecar process, the
apply table, the hooks, the dialogs and the lifecycle with a fake `pi`, run by Node 22's test runner
with its type stripping (no real Pi)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.bridge_node import TESTS_DIR, node_install, run_node
from tests.e2e.pi_harness import PiInstall

__all__ = ["node_install"]

TEST_FILES = sorted(TESTS_DIR.glob("*.test.ts"))


def test_there_are_unit_tests() -> None:
    assert {path.name for path in TEST_FILES} >= {"transport.test.ts", "apply.test.ts", "hooks.test.ts",
                                                   "dialogs.test.ts", "lifecycle.test.ts"}


@pytest.mark.parametrize("path", TEST_FILES, ids=[path.name for path in TEST_FILES])
def test_bridge_unit_tests_pass(path: Path, tmp_path: Path, node_install: PiInstall) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ROUTER_", "PI_"))}
    env.update({"PI_CODING_AGENT_DIR": str(tmp_path / "agent"),  # bridge.log goes here
                "ROUTER_BRIDGE_TIMEOUT_MS": "1000", "ROUTER_BRIDGE_HELLO_TIMEOUT_MS": "3000",
                "ROUTER_WARM": "0"})  # warm.test.ts turns it on for itself, in a directory of its own
    done = run_node(node_install, "--test", "--test-reporter=spec", str(path), env=env, cwd=tmp_path)
    assert done.returncode == 0, f"{path.name} failed:\n{done.stdout[-8000:]}\n{done.stderr[-3000:]}"
    assert "ℹ fail 0" in done.stdout and "ℹ pass 0" not in done.stdout, done.stdout
