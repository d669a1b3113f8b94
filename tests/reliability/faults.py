"""Helpers for the fault-injection suite: outcome records, log integrity checks, fault tools.

Every case records one line into the results file (``$ROUTER_RELIABILITY_RESULTS``, else
``<pytest base temp>/reliability.jsonl``); ``tests/reliability/report.py`` turns them into
``docs/reliability.md``. Recovery times are measured (the fault's moment to the next answer of the
engine), never asserted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.helpers_router import RouterRig, dedent, descendants, is_notify, is_status
from tests.e2e.pi_rpc import RpcPi, TimedRpc

JsonDict = dict[str, Any]
RESULTS_ENV = "ROUTER_RELIABILITY_RESULTS"
FAKE_SIDECAR = Path(__file__).resolve().parent / "fake_sidecar.py"
ROBUSTNESS = ""  # the robustness work has landed: no case waits for it
OUTCOMES = ("held", "lost-nothing", "recovered")


# -- outcome records -------------------------------------------------------------------------------


@dataclass
class Case:
    """The outcome of one fault case, written to the results file when the test ends.

    ``outcome``: ``held`` (the engine kept answering, no outage), ``lost-nothing`` (something
    failed, nothing already written was lost or broken), ``recovered`` (an outage, then the engine
    answered again; ``recovery_ms`` holds one measurement per try).
    """

    case: str = ""
    group: str = ""
    tries: int = 0
    outcome: str = ""
    recovery_ms: list[float] = field(default_factory=list)
    notes: str = ""
    test: str = ""
    status: str = ""
    xfail: str = ""

    def describe(self, case: str, group: str) -> None:
        """Name the case (one row of the report) and its group (a section: report.GROUPS)."""
        self.case, self.group = case, group

    def measured(self, started: float, ended: float) -> float:
        """Record one recovery time (perf_counter seconds in, milliseconds kept) and return it."""
        value = round((ended - started) * 1000, 1)
        self.recovery_ms.append(value)
        return value

    def note(self, text: str) -> None:
        """Append a sentence to the notes."""
        self.notes = f"{self.notes} {text}".strip()

    def record(self) -> JsonDict:
        """The JSON line for the results file."""
        return asdict(self)


def results_path(default_dir: Path) -> Path:
    """Where the results go: ``$ROUTER_RELIABILITY_RESULTS``, else ``default_dir/reliability.jsonl``."""
    configured = os.environ.get(RESULTS_ENV)
    return Path(configured) if configured else default_dir / "reliability.jsonl"


def append_result(path: Path, record: JsonDict) -> None:
    """Append one result line. Under pytest-xdist every worker appends to the same file (the report's
    ``--run``), so the line goes in one ``write`` of an ``O_APPEND`` descriptor under an exclusive
    lock: lines of two workers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


# -- logs ------------------------------------------------------------------------------------------


def router_dir(rig: RouterRig) -> Path:
    """``<agent>/router``: bridge.log, router.log and the suite's audit.jsonl."""
    return rig.agent / "router"


def audit_file(rig: RouterRig) -> Path:
    """The audit log the suite's policies write."""
    return router_dir(rig) / "audit.jsonl"


def standard_policy(rig: RouterRig, extra_rules: str = "", *, signals: str = "") -> str:
    """Tools cut to ``read`` on every input, one audit record and one router.log line per input.

    ``extra_rules`` (a YAML list of rules) come first; ``signals`` is the body of a ``signals:``
    section. Both are dedented and indented here.
    """
    head = f"signals:\n{textwrap.indent(dedent(signals), '  ')}" if signals else ""
    rules = textwrap.indent(dedent(extra_rules), "  ")
    return head + f"""rules:
{rules}  - id: read-only
    on: input
    do:
      - tools: {{only: [read]}}
      - audit: {{file: "{audit_file(rig)}", record: {{text: "{{text}}"}}}}
      - log: "input {{text}}"
"""


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``; empty when it is missing or not a regular file."""
    try:
        return path.read_bytes() if path.is_file() else b""
    except OSError:
        return b""


@dataclass
class LogGuard:
    """Snapshots of log files, to prove that later content only extends them, in whole lines."""

    paths: list[Path]

    @classmethod
    def of(cls, rig: RouterRig, *more: Path) -> LogGuard:
        """bridge.log, router.log and the audit log of ``rig`` (plus ``more``)."""
        base = router_dir(rig)
        return cls([base / "bridge.log", base / "router.log", audit_file(rig), *more])

    def snapshot(self) -> dict[Path, bytes]:
        """The current content of every guarded file."""
        return {path: read_bytes(path) for path in self.paths}

    def problems(self, before: dict[Path, bytes]) -> list[str]:
        """What went wrong since ``before``: lost or changed content, partial or broken lines."""
        found: list[str] = []
        for path in self.paths:
            now = read_bytes(path)
            if not now.startswith(before.get(path, b"")):
                found.append(f"{path.name}: earlier content was lost or changed")
            found.extend(f"{path.name}: {problem}" for problem in line_problems(path, now))
        return found

    def check(self, before: dict[Path, bytes]) -> None:
        """Assert that nothing was lost or broken since ``before``."""
        problems = self.problems(before)
        assert not problems, problems


def line_problems(path: Path, data: bytes) -> list[str]:
    """A partial last line; for ``.jsonl`` files, lines that are not JSON objects."""
    found = []
    if data and not data.endswith(b"\n"):
        tail = data.rsplit(b"\n", 1)[-1]
        found.append(f"partial last line {tail[:80]!r}")
    if path.suffix == ".jsonl":
        for number, line in enumerate(data.splitlines(), 1):
            try:
                ok = isinstance(json.loads(line), dict)
            except ValueError:
                ok = False
            if not ok:
                found.append(f"line {number} is not a JSON object: {line[:80]!r}")
    return found


def audit_texts(rig: RouterRig) -> list[str]:
    """The ``text`` of every complete audit record."""
    texts = []
    for line in read_bytes(audit_file(rig)).splitlines():
        with contextlib.suppress(ValueError):
            texts.append(str(json.loads(line).get("text")))
    return texts


# -- RPC ------------------------------------------------------------------------------------------


def timed(rpc: RpcPi) -> TimedRpc:
    """The rig's RPC Pi, which the suite always starts as a TimedRpc."""
    assert isinstance(rpc, TimedRpc), type(rpc)
    return rpc


def is_warning(record: JsonDict) -> bool:
    """A warning notification (how the bridge tells the user about a failure)."""
    return (record.get("type") == "extension_ui_request" and record.get("method") == "notify"
            and record.get("notifyType") in ("warning", "error"))


def warnings_since(rpc: RpcPi, since: int) -> list[str]:
    """The messages of warning notifications from record ``since`` on."""
    return [str(r.get("message")) for r in rpc.events(since) if is_warning(r)]


is_back = is_notify("policy engine is back")
is_offline = is_status("offline")


def went_offline(rpc: RpcPi, since: int) -> JsonDict | None:
    """The bridge's outage status (``router: offline (restarting)``) from record ``since`` on."""
    return next((r for r in rpc.events(since) if is_offline(r)), None)


def prompted_tools(rig: RouterRig) -> list[list[str]]:
    """The tools of each chat request the fake provider received."""
    return [list(chat.tools) for chat in rig.fake.chat_requests()]


# -- processes and signals --------------------------------------------------------------------------


def signal_descendant(root_pid: int, pid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to ``pid`` only while it is a descendant of ``root_pid`` (pinned by a pidfd)."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if pid not in descendants(root_pid):
            return False
        signal.pidfd_send_signal(handle, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(handle)


def kill_if_ours(pid: int, marker: str) -> None:
    """SIGKILL ``pid`` when its command line still contains ``marker`` (a process this test started)."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
        if marker in argv:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
    except (OSError, ProcessLookupError):
        pass
    finally:
        os.close(handle)


def processes_naming(fragment: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``fragment``, this one excluded."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if fragment in argv and stat[stat.rfind(")") + 2] != "Z":
            found.append(int(entry.name))
    return found


def kill_processes_naming(fragment: str) -> list[int]:
    """SIGKILL every process whose command line contains ``fragment``; return their pids."""
    killed = processes_naming(fragment)
    for pid in killed:
        kill_if_ours(pid, fragment)
    return killed


def peak_rss_kib(pid: int) -> int | None:
    """The peak resident size (VmHWM) of ``pid`` in KiB, None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def fake_sidecar_env(rig: RouterRig, *args: str) -> dict[str, str]:
    """The rig's environment with ``ROUTER_SERVE`` pointing at the fake sidecar in a mode."""
    return {**rig.env, "ROUTER_SERVE": json.dumps([sys.executable, str(FAKE_SIDECAR), *args])}


# -- file systems ------------------------------------------------------------------------------------


class MountRefused(RuntimeError):
    """``mount`` is not permitted here (not root, or no mount namespace rights)."""


@contextlib.contextmanager
def tmpfs(directory: Path, size: str = "64k", *, read_only: bool = False) -> Iterator[Path]:
    """Mount a small tmpfs on ``directory`` for the block; always unmounted after.

    Raises MountRefused when the mount is not permitted.
    """
    directory.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0700" + (",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise MountRefused(f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}")
    try:
        yield directory
    finally:
        unmount(directory)


def remount(directory: Path, options: str, timeout: float = 10.0) -> None:
    """``mount -o remount,OPTIONS`` (e.g. ``ro``). A file open for writing makes a remount read-only
    fail as busy (the sidecar holds its decision log open for 0.25 s after a record): tried again
    until it goes through or ``timeout`` passes, as an administrator would."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(["mount", "-o", f"remount,{options}", str(directory)],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        if "busy" not in done.stderr or time.monotonic() > deadline:
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
        time.sleep(0.02)  # polling the kernel: no event says when the file is closed


def unmount(directory: Path) -> None:
    """Unmount ``directory``; lazily when a process still holds a file there."""
    done = subprocess.run(["umount", str(directory)], capture_output=True, check=False)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last byte; return the filler file."""
    filler = directory / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return filler


# -- timing --------------------------------------------------------------------------------------------


def elapsed_ms(action: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``action``; return its value and how long it took in milliseconds (measured only)."""
    started = time.perf_counter()
    value = action()
    return value, round((time.perf_counter() - started) * 1000, 1)
