"""Pi's interactive TUI in a real terminal: a tmux session on a private socket, driven by keys.

``TmuxPi`` starts the pinned Pi in a detached tmux session of a fixed size (its own server, socket
under the test's tmp dir, no user tmux config), types with ``send-keys`` and reads the screen with
``capture-pane``. Waiting is polling the screen for a condition, bounded by a timeout. ``close``
kills the tmux server and every process it started (Pi and its sidecar).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.e2e.helpers_router import descendants, process_state, wait_until
from tests.e2e.pi_harness import PiInstall

TMUX = shutil.which("tmux")
WIDTH, HEIGHT = 120, 40


class TmuxPi:
    """One Pi TUI in a detached tmux session (``WIDTH`` x ``HEIGHT``)."""

    def __init__(self, install: PiInstall, args: Sequence[str], *, env: Mapping[str, str], cwd: Path,
                 socket: Path) -> None:
        if TMUX is None:
            raise RuntimeError("tmux is not installed")
        self.install, self.args, self.env, self.cwd, self.socket = install, list(args), dict(env), cwd, socket
        self.pids: list[int] = []

    def tmux(self, *args: str) -> str:
        """Run a tmux command against this session's private server; its stdout."""
        assert TMUX is not None
        done = subprocess.run([TMUX, "-S", str(self.socket), "-f", os.devnull, *args],
                              capture_output=True, text=True, timeout=30, check=True)
        return done.stdout

    def start(self) -> TmuxPi:
        """Start Pi in a new session; its environment is exactly ``env`` (plus TERM)."""
        env = {**self.env, "TERM": "xterm-256color"}
        assignments = [f"{key}={value}" for key, value in sorted(env.items())]
        command = ["env", "-i", *assignments, *self.install.command(*self.args)]
        self.tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(self.cwd), "-s", "pi",
                  shlex.join(command))
        self.pids = [int(self.tmux("display-message", "-p", "-t", "pi", "#{pane_pid}").strip())]
        return self

    def screen(self) -> str:
        """The visible screen as text (no colours), trailing blanks dropped."""
        return "\n".join(line.rstrip() for line in self.tmux("capture-pane", "-p", "-t", "pi").splitlines())

    def keys(self, *keys: str) -> None:
        """Press tmux key names (``Enter``, ``Escape``, ``C-u``, ``BSpace``)."""
        self.tmux("send-keys", "-t", "pi", *keys)

    def type(self, text: str) -> None:
        """Type text literally."""
        self.tmux("send-keys", "-t", "pi", "-l", text)

    def wait_for(self, condition: Callable[[str], bool], what: str, timeout: float = 30.0) -> str:
        """Poll the screen until ``condition(screen)`` holds; the screen. The last screen on failure."""
        last = [""]

        def check() -> str | None:
            last[0] = self.screen()
            return last[0] if condition(last[0]) else None

        try:
            return str(wait_until(check, timeout, what, interval=0.05))
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the screen:\n{last[0]}") from None

    def wait_text(self, text: str, timeout: float = 30.0) -> str:
        """Poll until ``text`` is on the screen."""
        return self.wait_for(lambda screen: text in screen, repr(text), timeout)

    def close(self) -> None:
        """Kill the tmux server, then (after 10 s) any process of the session that outlived it.

        The processes are pinned by pidfds taken before, so no signal can reach a successor.
        """
        pinned = _pidfds([pid for root in self.pids for pid in (root, *descendants(root))])
        handles = [handle for handle, _ in pinned]
        try:
            if self.socket.exists():
                with contextlib.suppress(subprocess.CalledProcessError):  # the server is gone
                    self.tmux("kill-server")
            try:
                wait_until(lambda: not any(_alive(*p) for p in pinned), 10, "the session's processes to exit")
            except AssertionError:
                for handle in handles:
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(handle, signal.SIGKILL)
        finally:
            for handle in handles:
                os.close(handle)


def _pidfds(pids: list[int]) -> list[tuple[int, int]]:
    pinned = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            pinned.append((os.pidfd_open(pid), pid))
    return pinned


def _alive(handle: int, pid: int) -> bool:
    """Running (a zombie has exited; while the pidfd pins it, its pid names no other process)."""
    try:
        signal.pidfd_send_signal(handle, 0)
    except ProcessLookupError:
        return False
    return process_state(pid) not in (None, "Z")
