"""The warm sidecar (router/runtime/warm.py) as a real `router serve --warm` process: each connection
gets a forked sidecar with the environment it sent; refusals, idling out, a second server, a
foreign directory, an upgrade."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import router
from router.runtime import warm
from tests.bridge_node import TESTS_DIR, node_install, node_json
from tests.e2e.pi_harness import PiInstall

__all__ = ["node_install"]

POLICY = """version: 1
env: [WARM_WORD]
rules:
  - {id: say, on: input, do: [{notify: "word {env.WARM_WORD}"}]}
"""


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A private directory with a short path (a socket path is at most 107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="tw-"))
    try:
        yield directory
    finally:
        for path in sorted(directory.rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() else path.rmdir()
        directory.rmdir()


def start_server(socket_path: Path, idle: str = "30", **extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ROUTER_WARM_IDLE_S": idle, **extra}
    proc = subprocess.Popen([sys.executable, "-P", "-m", "router", "serve", "--warm", str(socket_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    return proc


class Client:
    """One connection to the warm server: lines out, decoded lines in; closing ends the sidecar."""

    def __init__(self, socket_path: Path) -> None:
        self.socket = socket.socket(socket.AF_UNIX)
        self.socket.connect(str(socket_path))
        self.reader = self.socket.makefile("rb")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.reader.close()
        self.socket.close()

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def answer(self) -> dict[str, Any]:
        line = self.reader.readline()
        assert line, "the connection closed"
        decoded: dict[str, Any] = json.loads(line)
        return decoded

    def request(self, message: dict[str, Any]) -> Any:
        self.send(json.dumps(message).encode() + b"\n")
        while True:
            answer = self.answer()
            if answer.get("id") == message["id"]:
                return answer.get("result")


def connect(socket_path: Path, proc: subprocess.Popen[bytes]) -> Client:
    """A connection once the server listens (its lock file names it only after it bound)."""
    lock = Path(f"{socket_path}.lock")
    for _ in range(2400):  # a bound against a hang (2 minutes), not a deadline: it ends as it listens
        if lock.exists() and lock.read_text().strip() == str(proc.pid) and socket_path.exists():
            return Client(socket_path)
        if proc.poll() is not None:
            raise AssertionError(f"the warm server ended: {proc.communicate()}")
        select_wait(0.05)
    raise AssertionError("the warm server did not listen")


def select_wait(seconds: float) -> None:
    import select
    select.select([], [], [], seconds)


def start_request(agent: Path, cwd: Path, **env: str) -> bytes:
    request = {"warm": 1, "argv": ["--cwd", str(cwd), "--agent-dir", str(agent)],
               "env": {"PATH": os.environ.get("PATH", "/usr/bin"), **env}, "cwd": str(agent)}
    return json.dumps(request).encode() + b"\n"


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)


def sidecar_world(root: Path) -> tuple[Path, Path]:
    agent, cwd = root / "agent", root / "proj"
    agent.mkdir()
    cwd.mkdir()
    (agent / "router.yaml").write_text(POLICY)
    return agent, cwd


def test_each_connection_is_served_by_a_fork_with_its_own_environment(short_dir: Path,
                                                                     tmp_path: Path) -> None:
    socket_path = short_dir / "w" / "s.sock"
    agent, cwd = sidecar_world(tmp_path)
    proc = start_server(socket_path)
    try:
        for word in ("alpha", "beta"):
            with connect(socket_path, proc) as client:
                client.send(start_request(agent, cwd, WARM_WORD=word))
                ok = client.answer()
                assert ok["warm"] == "ok" and ok["pid"] != proc.pid
                hello = client.request({"id": 1, "method": "hello", "params": {"protocol": 1}})
                assert hello["protocol"] == 1 and "input" in hello["events"]
                event = client.request({"id": 2, "method": "event", "params": {
                    "type": "input", "payload": {"text": "hi", "source": "rpc"}, "ctx": {}}})
                assert event["actions"][0]["params"]["text"] == f"word {word}"
        assert (agent / "router" / "router.log").read_text().count("forked by the warm sidecar") == 2
        assert oct((short_dir / "w").stat().st_mode & 0o777) == "0o700"
        assert oct(socket_path.stat().st_mode & 0o777) == "0o700"
    finally:
        stop(proc)
    assert proc.returncode == 0 and not socket_path.exists()  # SIGTERM: the socket goes with it


def test_a_bad_start_request_is_refused_and_the_server_goes_on(short_dir: Path, tmp_path: Path) -> None:
    socket_path = short_dir / "s.sock"
    agent, cwd = sidecar_world(tmp_path)
    proc = start_server(socket_path)
    try:
        for bad in (b'{"warm": 2}\n', b"not json\n", b'{"warm": 1, "argv": "x", "env": {}, "cwd": "/"}\n',
                    b"[" * 100_000 + b"\n", b"\xff\xfe\n",
                    start_request(agent, cwd).rstrip(b"\n") + b'\n{"id": 1}\n'):
            with connect(socket_path, proc) as client:
                client.send(bad)
                answer = client.answer()
                assert answer["warm"] == "refused" and answer["reason"]
        with connect(socket_path, proc) as client:
            client.send(start_request(agent, cwd))
            assert client.answer()["warm"] == "ok"
    finally:
        stop(proc)


def test_a_second_server_on_the_same_socket_leaves_at_once(short_dir: Path) -> None:
    socket_path = short_dir / "s.sock"
    first = start_server(socket_path)
    try:
        connect(socket_path, first).close()
        second = start_server(socket_path)
        assert second.wait(timeout=30) == 0
        assert Path(f"{socket_path}.lock").read_text().strip() == str(first.pid)
    finally:
        stop(first)


def test_an_idle_server_ends_and_removes_its_socket(short_dir: Path) -> None:
    socket_path = short_dir / "s.sock"
    proc = start_server(socket_path, idle="0.5")
    connect(socket_path, proc).close()  # refused (no request): it counts as a use
    assert proc.wait(timeout=30) == 0
    assert not socket_path.exists()


def test_a_directory_others_can_enter_is_refused(short_dir: Path) -> None:
    short_dir.chmod(0o755)
    proc = start_server(short_dir / "s.sock")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and b"not a private directory of this user" in err
    assert not (short_dir / "s.sock").exists()


def test_an_upgraded_engine_is_refused_and_the_server_ends(short_dir: Path, tmp_path: Path) -> None:
    # the server runs a private copy of the package, and the "upgrade" touches only that copy: the
    # installed files stay as they are for every other process of the suite (a warm server of the
    # other worker would otherwise see an upgrade too, and this one a stamp another test changed)
    package = tmp_path / "pkg"
    shutil.copytree(Path(router.__file__).parent, package / "router",
                    ignore=shutil.ignore_patterns("__pycache__"))
    socket_path = short_dir / "s.sock"
    agent, cwd = sidecar_world(tmp_path)
    proc = start_server(socket_path, PYTHONPATH=str(package))
    module = package / "router" / "runtime" / "warm.py"
    before = module.stat()
    try:
        with connect(socket_path, proc) as client:  # an answer: the server took its files' stamps
            client.send(b"not json\n")
            assert client.answer()["warm"] == "refused"
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        with connect(socket_path, proc) as client:
            client.send(start_request(agent, cwd))
            answer = client.answer()
        assert answer == {"warm": "refused",
                          "reason": "the engine's files changed since this warm sidecar started"}
        code = proc.wait(timeout=30)
        assert code == 0, proc.communicate()
    finally:
        stop(proc)


def test_idle_seconds_reads_the_environment() -> None:
    assert warm.idle_seconds({"ROUTER_WARM_IDLE_S": "12"}) == 12.0
    for bad in ("", "x", "-1", "0"):
        assert warm.idle_seconds({"ROUTER_WARM_IDLE_S": bad}) == warm.DEFAULT_IDLE_S


def test_the_bridge_and_doctor_name_the_same_socket(node_install: PiInstall, tmp_path: Path) -> None:
    python = [sys.executable, "-P", "-m", "router", "serve"]
    cases = [
        {"command": python, "env": {"ROUTER_WARM_DIR": str(tmp_path)}},
        {"command": ["/opt/é/router", "serve", "--policy", "x y"], "env": {"XDG_RUNTIME_DIR": "/run/u"}},
        {"command": ["router", "serve"], "env": {}},  # the process's temporary directory, in both
        {"command": ["router", "serve"], "env": {"ROUTER_WARM": "0"}},
        {"command": ["python3", "fake.py"], "env": {}},
        {"command": ["router", "serve"], "env": {"ROUTER_WARM_DIR": "/" + "x" * 120}},
    ]
    printed = node_json(node_install, TESTS_DIR / "print_warm.ts", json.dumps(cases))
    for case, from_bridge in zip(cases, printed, strict=True):
        ours = warm.socket_path(case["command"], case["env"])
        assert (str(ours) if ours else None) == from_bridge, case


def test_status_says_whether_a_warm_sidecar_runs(short_dir: Path) -> None:
    command = [sys.executable, "-P", "-m", "router", "serve"]
    env = {"ROUTER_WARM_DIR": str(short_dir / "w")}
    path = warm.socket_path(command, env)
    assert path is not None
    assert warm.status(command, env) == (True, f"not running; the next run starts it at {path}")
    assert warm.status(command, {**env, "ROUTER_WARM": "0"}) == (
        True, "off (ROUTER_WARM=0): every run starts its sidecar")
    proc = subprocess.Popen([*command, "--warm", str(path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        connect(path, proc).close()
        assert warm.status(command, env) == (True, f"running (pid {proc.pid}) at {path}")
    finally:
        stop(proc)
    (short_dir / "w").chmod(0o755)
    fine, text = warm.status(command, env)
    assert not fine and "is not a private directory of yours" in text


FORKED_RUN = """
import json, sys
from router.runtime import lean, server, warm
lean.import_server()
warm.preload()
before = set(sys.modules)
code = server.main(sys.argv[1:])
after = sorted(set(sys.modules) - before)
print(json.dumps(after), file=sys.stderr)
sys.exit(code)
"""


def test_a_fork_imports_nothing_of_the_engine_the_server_did_not(tmp_path: Path) -> None:
    """What the warm server loads before it forks (lean.import_server, warm.preload) covers what a
    sidecar imports while it runs a session on the default policy, compiled before (the second
    run): a module missing from warm.LAZY_IMPORTS would be imported again by every fork (the
    engine's or the standard library's)."""
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    agent.mkdir()
    cwd.mkdir()
    hello = {"protocol": 1, "cwd": str(cwd)}
    event = {"type": "turn_end", "payload": {"turnIndex": 0}, "ctx": {"sessionId": "s1", "cwd": str(cwd)}}
    lines = [{"id": 1, "method": "hello", "params": {**hello, "preload": True}},
             {"id": 2, "method": "hello", "params": {**hello, "mode": "print", "models": []}},
             {"id": 3, "method": "event", "params": event}, {"id": 4, "method": "shutdown", "params": {}}]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ROUTER_", "PI_", "OTEL_"))}
    argv = [sys.executable, "-P", "-c", FORKED_RUN, "--cwd", str(cwd), "--agent-dir", str(agent)]
    imported = []
    for _ in range(2):
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              env={**env, "HOME": str(tmp_path)}, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        assert [a["id"] for a in answers if "id" in a] == [1, 2, 3, 4], done.stdout
        imported.append(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "router.compile.compiler" in imported[0]  # the first run compiled: the check sees imports
    assert imported[1] == []
