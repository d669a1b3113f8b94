"""Programs from the operating system that some tests need (Chromium, tmux).

`.ci/run` installs them (docs/development.md says how by hand). A test that needs one and finds it
missing skips with the command that installs it; in CI (`CI` set, as `.ci/run` runs) it fails
instead, so a missing install step can never turn into a quietly shorter run.
"""

from __future__ import annotations

import os
import shutil

import pytest

INSTALL = {
    "chromium": "apt-get install -y chromium (Debian, Ubuntu: chromium-browser), or see docs/development.md",
    "tmux": "apt-get install -y tmux, or see docs/development.md",
}


def in_ci() -> bool:
    """True when the suite runs in CI (`CI` set to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find(*names: str) -> str | None:
    """The first of `names` on PATH."""
    return next((found for name in names if (found := shutil.which(name))), None)


def require(*names: str) -> str:
    """The path of the first of `names` on PATH; else skip (or fail in CI) saying how to install it."""
    found = find(*names)
    if found is not None:
        return found
    message = f"{names[0]} is not installed: {INSTALL.get(names[0], 'install it')}"
    if in_ci():
        pytest.fail(f"{message} (CI must have it: .ci/run installs it)", pytrace=False)
    pytest.skip(message)
