"""A git source that cannot be read fails the dry runs (explain, test, replay) with RT125, instead
of answering for a policy without it (one Pi would never run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.compile.compiler import complete, load_layered

ROUTER = Path(sys.executable).parent / "router"


@pytest.fixture
def offline(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A user policy whose git source is nowhere (no repository, nothing in the cache)."""
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    agent.mkdir()
    cwd.mkdir()
    missing = f"git+file://{tmp_path / 'gone.git'}@v1#team.yaml"
    (agent / "router.yaml").write_text(f'version: 1\nuse: ["{missing}"]\n')
    (cwd / "e.json").write_text(json.dumps({"type": "input", "text": "hi"}))
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path), "NO_COLOR": "1"}
    return cwd, env


def test_a_layered_policy_without_its_git_source_is_not_complete(offline: tuple[Path, dict[str, str]],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cwd, env = offline
    monkeypatch.setenv("PI_CODING_AGENT_DIR", env["PI_CODING_AGENT_DIR"])
    loaded = load_layered(cwd)
    assert loaded.policy is not None and [r.code for r in loaded.policy.refused] == ["RT125"]
    checked = complete(loaded)
    assert checked.policy is None and [d.code for d in checked.diagnostics] == ["RT125"]


@pytest.mark.parametrize("argv", [["explain", "-e", "e.json"], ["test"]])
def test_dry_runs_exit_1_naming_the_missing_source(offline: tuple[Path, dict[str, str]],
                                                   argv: list[str]) -> None:
    cwd, env = offline
    done = subprocess.run([str(ROUTER), *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "[RT125]" in output and "gone.git@v1" in output
    assert "no rule listens" not in output and "no test cases" not in output
