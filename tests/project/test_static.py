"""The package passes ruff and mypy --strict, the way CI installs it (with the jmespath stubs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)


def test_ruff_clean() -> None:
    result = run("ruff", "check", "router", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_clean(tmp_path: Path) -> None:
    result = run("mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
