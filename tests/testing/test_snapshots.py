"""Snapshots of `router explain` and `router test`: text and JSON, through the installed script.

Each case runs `.venv/bin/router` (the console script next to this Python) in a subprocess, in a
fresh copy of tests/snapshots/cli/ with an empty home, and compares the transcript (the command,
its exit status, standard output and standard error) with `tests/snapshots/cli/<case>.out`. Any
change of wording, layout or diagnostic code shows as a diff of a committed file in review.

`ROUTER_UPDATE_SNAPSHOTS=1 python -m pytest tests/testing/test_snapshots.py` rewrites the snapshots
instead of failing; review the diff before committing it.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent.parent / "snapshots" / "cli"
UPDATE = os.environ.get("ROUTER_UPDATE_SNAPSHOTS", "") not in ("", "0")
SCRIPT = Path(sys.executable).parent / "router"
TIMEOUT_S = 120

EXPLAIN_ERRORS = ["explain", "-p", "errors.yaml", "-e", "input.yaml", "--state", "state.yaml"]
EXPLAIN_GUARD = ["explain", "-p", "guard.yaml", "-e", "tool_call.yaml"]
CASES: dict[str, list[str]] = {
    "explain_errors": EXPLAIN_ERRORS,
    "explain_errors_json": [*EXPLAIN_ERRORS, "--format", "json"],
    "explain_guard": EXPLAIN_GUARD,
    "explain_guard_json": [*EXPLAIN_GUARD, "--format", "json"],
    "explain_guard_with_signal": [*EXPLAIN_GUARD, "--signal", "opinion=safe", "--mode", "matched"],
    "test_errors": ["test", "errors.test.yaml"],
    "test_errors_json": ["test", "errors.test.yaml", "--format", "json"],
    "test_guard": ["test", "guard.test.yaml"],
    "test_guard_json": ["test", "guard.test.yaml", "--format", "json"],
}


def transcript(args: list[str], project: Path, home: Path) -> str:
    """Run `router ARGS` in `project`; the command, exit status, stdout and stderr, with the
    temporary directories shown as <project> and <home>."""
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / ".pi" / "agent"),
           "NO_COLOR": "1", "COLUMNS": "100"}
    done = subprocess.run([str(SCRIPT), *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    text = (f"$ router {' '.join(args)}\nexit: {done.returncode}\n--- stdout\n{done.stdout.rstrip()}\n"
            f"--- stderr\n{done.stderr.rstrip()}\n")
    return text.replace(str(project), "<project>").replace(str(home), "<home>")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the fixtures (never the snapshots themselves) and an empty home."""
    root = tmp_path_factory.mktemp("snapshots").resolve()
    project, home = root / "project", root / "home"
    shutil.copytree(FIXTURES, project, ignore=shutil.ignore_patterns("*.out"))
    home.mkdir()
    return project, home


def test_the_console_script_is_installed() -> None:
    assert SCRIPT.exists(), f"no `router` console script next to {sys.executable}: pip install -e ."


def test_every_snapshot_file_has_a_case() -> None:
    assert {p.stem for p in FIXTURES.glob("*.out")} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_matches_the_snapshot(name: str, workspace: tuple[Path, Path]) -> None:
    actual = transcript(CASES[name], *workspace)
    snapshot = FIXTURES / f"{name}.out"
    if UPDATE:
        snapshot.write_text(actual, encoding="utf-8")
        return
    assert snapshot.exists(), f"no snapshot {snapshot.name}: ROUTER_UPDATE_SNAPSHOTS=1 creates it"
    expected = snapshot.read_text(encoding="utf-8")
    diff = "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                          f"{snapshot.name} (committed)", "actual", lineterm=""))
    assert actual == expected, (f"{diff}\n\nafter a deliberate change: "
                                "ROUTER_UPDATE_SNAPSHOTS=1 python -m pytest tests/testing/test_snapshots.py")
