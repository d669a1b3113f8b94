"""Shared helpers for the router's end-to-end tests (real Pi 1.6.0 + bridge + ``router serve``).

The ``rig`` fixture bundles one fake provider, one isolated agent dir (retry off) for the user
policy, a work dir and an environment whose ``ROUTER_SERVE`` starts this interpreter's sidecar.
A test module picks it up with ``rig = helpers_router.rig`` (conftest.py is not ours)::

    rig = helpers_router.rig

    def test_x(rig: RouterRig) -> None:
        rig.policy('''
            rules:
              - {id: cut, on: input, do: [{tools: {only: [read]}}]}
        ''')
        done = rig.print("hello")             # pi -p -e <bridge> --no-session hello
        rpc = rig.rpc()                         # pi --mode rpc -e <bridge> --no-session
        assert rig.fake.chat_requests()[0].tools == ["read"]

Process helpers find the sidecar (a descendant of Pi running ``-m router serve``) through /proc.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import router
from tests.e2e.fake_provider import FakeProvider, Reply
from tests.e2e.pi_harness import PiInstall, make_agent_dir, pi_env, run_print
from tests.e2e.pi_rpc import RpcPi

JsonDict = dict[str, Any]
BRIDGE = Path(router.__file__).resolve().parent / "bridge" / "index.mjs"  # what `router install` copies
SERVE_ARGV = [sys.executable, "-P", "-m", "router", "serve"]
STATUS_KEY = "pi-policy-router"
STATE_ENTRY = "pi-policy-router.state"
BUILTIN = frozenset({"read", "bash", "edit", "write"})  # the tools Pi 1.6 activates by default


def dedent(text: str) -> str:
    """Dedented text without the leading newline."""
    return textwrap.dedent(text).lstrip("\n")


def write_policy(path: Path, text: str) -> Path:
    """Write dedented policy YAML to ``path`` (parents created); ``version: 1`` is added."""
    body = dedent(text)
    if not body.startswith("version:"):
        body = "version: 1\n" + body
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def write_extension(directory: Path, name: str, source: str) -> Path:
    """Write a throwaway Pi extension ``<directory>/<name>.ts`` and return its path."""
    path = directory / f"{name}.ts"
    path.write_text(dedent(source), encoding="utf-8")
    return path


def router_env(agent: Path, install: PiInstall, **extra: str) -> dict[str, str]:
    """``pi_env`` plus ``ROUTER_SERVE`` (this interpreter's sidecar) and ``extra``."""
    return pi_env(agent, install, extra={"ROUTER_SERVE": json.dumps(SERVE_ARGV), **extra})


def update_settings(agent: Path, **values: Any) -> None:
    """Merge top-level keys into ``<agent>/settings.json``."""
    path = agent / "settings.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(values)
    path.write_text(json.dumps(data, indent=2) + "\n")


# -- RPC records ------------------------------------------------------------------------------


def ui_requests(rpc: RpcPi, method: str | None = None, since: int = 0) -> list[JsonDict]:
    """``extension_ui_request`` records (from index ``since`` of all records), of one method."""
    return [
        r
        for r in rpc.events(since, "extension_ui_request")
        if method is None or r.get("method") == method
    ]


def notices(rpc: RpcPi, since: int = 0) -> list[str]:
    """The messages of ``notify`` UI requests."""
    return [str(r.get("message")) for r in ui_requests(rpc, "notify", since)]


def is_notify(fragment: str) -> Callable[[JsonDict], bool]:
    """A record predicate: a notify whose message contains ``fragment``."""

    def match(record: JsonDict) -> bool:
        return (
            record.get("type") == "extension_ui_request"
            and record.get("method") == "notify"
            and fragment in str(record.get("message"))
        )

    return match


def is_status(text_fragment: str | None, key: str = STATUS_KEY) -> Callable[[JsonDict], bool]:
    """A predicate: setStatus for ``key``, setting text with the fragment (None: clearing it)."""

    def match(record: JsonDict) -> bool:
        if record.get("type") != "extension_ui_request" or record.get("method") != "setStatus":
            return False
        if record.get("statusKey") != key:
            return False
        text = record.get("statusText")
        return text is None if text_fragment is None else text is not None and text_fragment in str(text)

    return match


def statuses(rpc: RpcPi, key: str = STATUS_KEY, since: int = 0) -> list[str | None]:
    """The texts of the setStatus requests for ``key`` (None: cleared), in order."""
    return [r.get("statusText") for r in ui_requests(rpc, "setStatus", since) if r.get("statusKey") == key]


def command(rpc: RpcPi, text: str, timeout: float | None = None) -> list[str]:
    """Run a slash command over RPC (handled, no agent run); return the notifications it produced.

    Pi awaits the command's handler before it answers, so every notify is in by then.
    """
    since = rpc.mark()
    assert rpc.command("prompt", timeout, message=text)["disposition"] == "handled"
    return notices(rpc, since)


ONLY_READ = """
rules:
  - id: rule-a
    on: input
    do:
      - tools: {only: [read]}
"""
"""A user policy whose one rule cuts the tools to `read`: visible in the first request."""


# -- scripted replies -------------------------------------------------------------------------


def tool_call(name: str, arguments: Any, **reply: Any) -> Reply:
    """An assistant reply that calls one tool (``reply``: other Reply fields)."""
    return Reply(text="", tool_calls=[{"name": name, "arguments": arguments}], **reply)


def read_call(rig: RouterRig, content: str = "NOTES\n", **reply: Any) -> Reply:
    """Write ``content`` to ``<work>/notes.txt``; a reply that calls ``read`` on it."""
    notes = rig.work / "notes.txt"
    notes.write_text(content)
    return tool_call("read", {"path": str(notes)}, **reply)


# -- sessions ---------------------------------------------------------------------------------


def session_files(session_dir: Path) -> list[Path]:
    """Every session JSONL file under ``session_dir``."""
    return sorted(session_dir.rglob("*.jsonl"))


def session_entries(session_dir: Path) -> list[JsonDict]:
    """All entries of all session files under ``session_dir``."""
    entries: list[JsonDict] = []
    for path in session_files(session_dir):
        entries.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return entries


# -- processes --------------------------------------------------------------------------------


def _parent_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid``."""
    parents = _parent_map()
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


def cmdline(pid: int) -> list[str]:
    """The argv of ``pid`` (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (``T`` stopped, ``Z`` zombie), None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2]


def sidecar_pids(root_pid: int) -> list[int]:
    """Live (non-zombie) descendants of ``root_pid`` running ``-m router serve``."""
    found = []
    for pid in descendants(root_pid):
        argv = cmdline(pid)
        is_serve = any(
            argv[i : i + 3] == ["-m", "router", "serve"] for i in range(len(argv))
        )
        if is_serve and process_state(pid) not in (None, "Z"):
            found.append(pid)
    return found


def wait_until(
    condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.02
) -> Any:
    """Poll ``condition`` until it returns a truthy value; AssertionError after ``timeout``.

    For state outside any event stream (the process table); everything else waits on events.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def rpc_pid(rpc: RpcPi) -> int:
    """The pid of the Pi process behind ``rpc``."""
    proc = rpc._proc  # the harness keeps the Popen private; the pid is needed for /proc
    assert proc is not None, "RpcPi is not started"
    return proc.pid


# -- the rig ----------------------------------------------------------------------------------


@dataclass
class RouterRig:
    """One isolated Pi setup with the bridge: fake provider, agent dir, work dir, env."""

    tmp: Path
    fake: FakeProvider
    install: PiInstall
    agent: Path
    work: Path
    env: dict[str, str]
    rpc_factory: Callable[..., RpcPi]
    session_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        self.session_dir = self.tmp / "sessions"

    @property
    def policy_path(self) -> Path:
        """The user policy file ``<agent>/router.yaml``."""
        return self.agent / "router.yaml"

    def policy(self, text: str) -> Path:
        """Write the user policy."""
        return write_policy(self.policy_path, text)

    def settings(self, **values: Any) -> None:
        """Merge keys into the agent's settings.json."""
        update_settings(self.agent, **values)

    def args(self, args: Sequence[str], *, bridge: bool, session: bool) -> list[str]:
        """Pi arguments: ``-e <bridge>`` and the session flags first."""
        head = ["-e", str(BRIDGE)] if bridge else []
        head += ["--session-dir", str(self.session_dir)] if session else ["--no-session"]
        return [*head, *args]

    def print(
        self,
        *args: str,
        bridge: bool = True,
        session: bool = False,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """``pi -p`` with the bridge (unless ``bridge=False``)."""
        return run_print(
            self.args(args, bridge=bridge, session=session),
            cwd=self.work,
            env=env or self.env,
            timeout=timeout,
            install=self.install,
        )

    def rpc(
        self,
        *args: str,
        bridge: bool = True,
        session: bool = False,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> RpcPi:
        """A started ``pi --mode rpc`` with the bridge; closed by the fixture."""
        return self.rpc_factory(
            self.args(args, bridge=bridge, session=session), env=env or self.env, **kwargs
        )

    def router(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """``python -m router <args>`` in the work dir with the rig's environment (or ``env``)."""
        return subprocess.run(
            [sys.executable, "-m", "router", *args],
            cwd=self.work,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def log(self, name: str = "bridge.log") -> str:
        """``<agent>/router/<name>`` (bridge.log or router.log), empty when absent."""
        path = self.agent / "router" / name
        return path.read_text() if path.is_file() else ""


@pytest.fixture
def rig(
    tmp_path: Path,
    fake_provider: FakeProvider,
    pi_install: PiInstall,
    workdir: Path,
    rpc_pi: Callable[..., RpcPi],
) -> Iterator[RouterRig]:
    """A RouterRig with retry off (scripted failures must not be retried)."""
    yield make_rig(tmp_path, fake_provider, pi_install, workdir, rpc_pi)


def make_rig(tmp_path: Path, fake: FakeProvider, install: PiInstall, workdir: Path,
             rpc_factory: Callable[..., RpcPi]) -> RouterRig:
    """A RouterRig over a fresh agent dir with retry off, starting RPC Pis with `rpc_factory`."""
    agent = make_agent_dir(tmp_path, fake, settings={"retry": {"enabled": False}})
    return RouterRig(tmp_path, fake, install, agent, workdir, router_env(agent, install), rpc_factory)


def kill_descendant(root_pid: int, pid: int) -> None:
    """SIGCONT then SIGKILL ``pid`` while it is still a descendant of ``root_pid``.

    Once its parent has reaped it, the pid may belong to an unrelated process: that is left alone.
    The pidfd pins the process checked, so the signals cannot reach a successor of the pid.
    """
    import signal

    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if pid not in descendants(root_pid):
            return
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                signal.pidfd_send_signal(handle, sig)
            except ProcessLookupError:
                return
    finally:
        os.close(handle)
