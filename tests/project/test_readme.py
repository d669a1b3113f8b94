"""The README's two set-up commands: `.ci/run` runs the test command exactly, and both use the lock."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def readme_commands() -> list[str]:
    """The shell commands of the README's "Set up and run" block, comments dropped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set up and run", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "the README's set-up section has no bash block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_has_two_setup_commands_using_the_lock() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert all("-c constraints.txt" in command for command in commands)


def test_ci_runs_the_readme_test_command_exactly() -> None:
    test_command = readme_commands()[1]
    assert test_command.endswith("python3 -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()


def test_ci_builds_a_fresh_virtual_environment() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "mktemp -d" in ci and "-m venv" in ci and "activate" in ci


def test_lock_pins_every_direct_dependency() -> None:
    lock = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    pinned = {line.split("==")[0].lower().replace("_", "-").replace(".", "-")
              for line in lock.splitlines() if "==" in line}
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    names = re.findall(r'"([A-Za-z][A-Za-z0-9_.-]*)\s*[><=;]', pyproject)
    wanted = {n.lower().replace("_", "-").replace(".", "-") for n in names} - {"setuptools", "wheel"}
    assert wanted <= pinned, wanted - pinned


def headline_policy() -> str:
    """The policy at the top of the README: its first YAML block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml[^\n]*\n(.*?)```", text, re.S)
    assert block is not None, "the README has no YAML block"
    return block.group(1)


def test_headline_policy_lints_without_a_warning(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".pi").mkdir(parents=True)
    (project / ".pi" / "router.yaml").write_text(headline_policy(), encoding="utf-8")
    environment = {**os.environ, "HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    done = subprocess.run([sys.executable, "-m", "router", "lint"], cwd=project, env=environment,
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.splitlines()[-1:]) == (0, ["Found 0 errors, 0 warnings."]), \
        done.stdout + done.stderr
    assert "version: 1" in headline_policy() and "rules:" in headline_policy()
