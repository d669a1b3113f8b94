"""`/cuttle config` in Pi's TUI, in a real terminal (tmux): the searchable settings panel.

The user types the command, searches, edits a number (a wrong one is refused in the panel),
toggles a bool and closes the panel with Esc; every change is in pi-cuttle.json at once, while
the panel is still open. The text view of the other modes is in test_pack_cuttle_ops.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import helpers_router
from tests.e2e.helpers_cuttle import SMALL, base_config, setup_cuttle
from tests.e2e.helpers_router import BRIDGE, RouterRig, wait_until
from tests.e2e.tmux_pi import TmuxPi
from tests.programs import require

pytestmark = pytest.mark.e2e
rig = helpers_router.rig


@pytest.fixture(autouse=True)
def _tmux() -> None:
    """A real terminal: tmux (skips without it, saying how to install it; fails in CI)."""
    require("tmux")

POLICY = """\
use: [cuttle]
vars:
  cuttle: {maxConcurrent: 2}
"""


@pytest.fixture
def tui(rig: RouterRig, tmp_path: Path) -> Iterator[TmuxPi]:
    """Pi's TUI with the bridge, in a 120x40 tmux session; the session is always killed."""
    pi = TmuxPi(rig.install, ["-e", str(BRIDGE), "--no-session", "--offline", "--model", SMALL],
                env=rig.env, cwd=rig.work, socket=tmp_path / "tmux.sock")
    try:
        yield pi.start()
    finally:
        pi.close()


def settings(rig: RouterRig) -> dict[str, Any]:
    return dict(json.loads((rig.agent / "pi-cuttle.json").read_text()))


def rows(screen: str) -> dict[str, str]:
    """The rows the panel's list shows: key → value (the lines after the search line)."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(">"))
    found = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        key, _, value = line.lstrip("→ ").partition("  ")
        if not key.startswith("("):  # the scroll position, (1/25)
            found[key] = value.strip()
    return found


def row(screen: str, key: str) -> str:
    """The panel's row of `key`: label and value."""
    return f"{key} {rows(screen)[key]}"


def open_panel(pi: TmuxPi) -> str:
    """Type /cuttle config as a user does, then Enter: the panel's screen.

    The command exists once the bridge has loaded the policy: until the command menu lists it,
    the typed text is erased and typed again (bounded). Enter first takes the completion shown
    for `config`, the second Enter runs the command.
    """

    def command_listed() -> bool:
        pi.keys("C-u")
        pi.type("/cuttle")
        try:
            pi.wait_text("pi-cuttle routing", timeout=2)
        except AssertionError:
            return False
        return True

    wait_until(command_listed, 30, "the command menu to list /cuttle")
    pi.type(" config")
    pi.wait_text("Show the configuration")
    pi.keys("Enter")
    pi.wait_for(lambda s: "Show the configuration" not in s, "the completion to close")
    pi.keys("Enter")
    return pi.wait_text("Type to search")


def search(pi: TmuxPi, text: str, erase: str = "") -> str:
    """Erase the last search, type a new one; the screen once the list shows its result."""
    for _ in erase:
        pi.keys("BSpace")
    pi.type(text)
    shown = re.compile(rf"^> {re.escape(text)}\n\n?→ ", re.M)  # the query, then the list's selected row
    return pi.wait_for(lambda s: shown.search(s) is not None, f"the search {text!r} to filter the list")


def test_config_panel_searches_edits_and_writes_at_once(rig: RouterRig, tui: TmuxPi) -> None:
    setup_cuttle(rig, base_config(), policy=POLICY)
    path = rig.agent / "pi-cuttle.json"

    screen = open_panel(tui)
    assert " cuttle config" in screen.splitlines()
    words = " ".join(screen.split())
    assert f"Changes are written to {path}" in words
    assert "router.yaml vars.cuttle sets maxConcurrent: its values win over the file." in words
    assert row(screen, "autoSelect") == "autoSelect false"
    assert row(screen, "classifier.model") == "classifier.model llama.cpp/chat-small"
    assert row(screen, "catalog.local") == "catalog.local fake/local-small, fake/local-big"
    assert row(screen, "policy.threshold") == "policy.threshold 0.5"

    # typing filters the list
    screen = search(tui, "thresh")
    assert list(rows(screen)) == ["policy.threshold"]
    assert row(screen, "policy.threshold") == "policy.threshold 0.5"
    assert "p(complex) at or above it goes to the cloud" in screen

    # Enter opens the input with the value; a number out of range is refused, nothing is written
    tui.keys("Enter")
    tui.wait_text("Enter to save")
    tui.keys("C-u")
    tui.type("1.5")
    tui.keys("Enter")
    tui.wait_text("policy.threshold: at most 1")
    assert settings(rig)["policy"]["threshold"] == 0.5
    tui.keys("C-u")
    tui.type("0.7")
    tui.keys("Enter")
    wait_until(lambda: settings(rig)["policy"]["threshold"] == 0.7, 15, "policy.threshold 0.7 in the file")
    screen = tui.wait_text("policy.threshold = 0.7")
    assert row(screen, "policy.threshold") == "policy.threshold 0.7"
    assert settings(rig)["policy"] == {"mode": "complexity", "threshold": 0.7, "reclassify": "session"}

    # a new search; Enter toggles a bool
    assert list(rows(search(tui, "autosel", erase="thresh"))) == ["autoSelect"]
    tui.keys("Enter")
    wait_until(lambda: settings(rig).get("autoSelect") is True, 15, "autoSelect true in the file")
    screen = tui.wait_text("autoSelect = true")
    assert row(screen, "autoSelect") == "autoSelect true"

    # the panel shows the values in force: router.yaml's maxConcurrent wins over the file's
    assert list(rows(search(tui, "maxcon", erase="autosel"))) == ["maxConcurrent"]
    tui.keys("Enter")
    tui.wait_text("Enter to save")
    tui.keys("C-u")
    tui.type("5")
    tui.keys("Enter")
    # a key router.yaml's vars.cuttle sets is not written: the panel says where to change it
    screen = tui.wait_text("nothing changed: maxConcurrent comes from vars.cuttle")
    assert row(screen, "maxConcurrent") == "maxConcurrent 2"
    assert "maxConcurrent" not in settings(rig)

    # Esc closes the panel; the editor is back and takes a command again
    tui.keys("Escape")
    tui.wait_for(lambda s: "Type to search" not in s, "the panel to close")
    assert settings(rig) == {**base_config(), "policy": {**base_config()["policy"], "threshold": 0.7},
                             "autoSelect": True}
    assert (rig.agent / "pi-cuttle.json.bak").is_file()
