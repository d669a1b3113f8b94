"""The warm sidecar: `router serve --warm SOCKET` keeps the engine's modules loaded between runs.

A sidecar's start is mostly Python's own and the engine's imports (~60 ms of CPU); a `pi -p` in a
loop pays it every run. The warm server pays it once: it listens on a Unix socket in a private
directory, and for each connection of the bridge it forks a sidecar that serves that connection
exactly as `router serve` serves its stdio (router/runtime/server.py), with the environment,
working directory and arguments the bridge sent, so nothing the sidecar decides depends on
which of the two started it.

The first line of a connection is the start request, `{"warm": 1, "argv": [...], "env": {...},
"cwd": "..."}`; the first line back is `{"warm": "ok", "pid": N}` from the forked sidecar, or
`{"warm": "refused", "reason": ...}` from the server (the bridge then spawns `router serve` as
without the warm server). Only processes of the server's own user are served (SO_PEERCRED); the
socket's directory must be the user's own, mode 0700. The server exits when idle for
`ROUTER_WARM_IDLE_S` seconds (default 600), when its socket is removed or replaced, and when one
of its own module files changed (an upgrade: the next bridge starts a fresh one).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from router.runtime import protocol

DEFAULT_IDLE_S = 600.0
MAX_REQUEST_BYTES = 1 << 20  # the start request: argv and the environment
MAX_SOCKET_PATH = 100  # bytes; a Unix socket path is at most 107 on Linux (as router/bridge/warm.mjs)
TICK_S = 1.0  # how often an idle server looks at its socket, its files and its children
REQUEST_TIMEOUT_S = 5.0


def socket_path(command: Sequence[str], env: Mapping[str, str]) -> Path | None:
    """Where the bridge looks for the warm sidecar of `command` (router/bridge/warm.mjs does the
    same), None when there is to be none: ROUTER_WARM=0, not Linux, a command that is not
    `… serve`, or a path too long for a socket."""
    if env.get("ROUTER_WARM") == "0" or not sys.platform.startswith("linux") or "serve" not in command[1:]:
        return None
    runtime = env.get("XDG_RUNTIME_DIR")
    shared = os.path.join(tempfile.gettempdir(), f"pi-policy-router-{os.getuid()}")
    base = env.get("ROUTER_WARM_DIR") or (os.path.join(runtime, "pi-policy-router") if runtime else shared)
    text = json.dumps(list(command), ensure_ascii=False, separators=(",", ":"))
    path = Path(os.path.abspath(base)) / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.sock"
    return path if len(str(path).encode()) <= MAX_SOCKET_PATH else None


def status(command: Sequence[str], env: Mapping[str, str]) -> tuple[bool, str]:
    """(fine, what) of the warm sidecar for `command`, as `router doctor` says it."""
    path = socket_path(command, env)
    if path is None:
        why = "off (ROUTER_WARM=0)" if env.get("ROUTER_WARM") == "0" else \
            "not used for this command or system (Linux, `… serve`)"
        return True, f"{why}: every run starts its sidecar"
    try:
        info = os.lstat(path.parent)
    except OSError:
        return True, f"not running; the next run starts it at {path}"
    if not _is_private(info):
        return False, (f"{path.parent} is not a private directory of yours (mode 0700), so no warm sidecar "
                       "is used: remove it, or set ROUTER_WARM_DIR")
    pid = _holder(Path(f"{path}.lock"))
    if pid is not None and path.exists():
        return True, f"running (pid {pid}) at {path}"
    return True, f"not running; the next run starts it at {path}"


def _holder(lock: Path) -> int | None:
    """The pid a warm server wrote into its lock file, if that process is alive."""
    try:
        text = lock.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return int(text)


def _is_private(info: os.stat_result) -> bool:
    """A directory of this user that nobody else can enter or list (as router/bridge/warm.mjs)."""
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


class WarmError(Exception):
    """The warm server cannot run here (the message says why)."""


def private_directory(directory: Path) -> None:
    """Create `directory` (0700) or insist that it is the user's own and nobody else's."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _is_private(os.lstat(directory)):
        raise WarmError(f"{directory} is not a private directory of this user (mode 0700)")


LAZY_IMPORTS = ("router.load.git_source", "router.load.managed", "router.runtime.otel",
                "tempfile", "subprocess", "shutil")
"""What a sidecar imports only once it runs (its engine, its first hello, a file written whole, a
child process): a spawned sidecar's start stays lean, a fork finds them loaded (tests/runtime/test_warm.py
checks that a session on the default policy imports nothing more)."""


def preload() -> None:
    """Import what each fork would import by itself after it started: 2-4 ms of every warm start."""
    from router.load.paths import packs_dir

    for name in LAZY_IMPORTS:
        importlib.import_module(name)
    packs_dir()  # imports router.packs when the packs are installed as a package


def module_files() -> dict[str, tuple[int, int]]:
    """(mtime, size) of every file of the engine loaded now: a change means an upgrade."""
    found: dict[str, tuple[int, int]] = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if (name == "router" or name.startswith("router.")) and isinstance(path, str):
            with contextlib.suppress(OSError):
                info = os.stat(path)
                found[path] = (info.st_mtime_ns, info.st_size)
    return found


def peer_uid(connection: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux), None when it cannot be told."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    raw = connection.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


def read_request(connection: socket.socket) -> dict[str, Any]:
    """The start request (one JSON line); ValueError when it is not one."""
    connection.settimeout(REQUEST_TIMEOUT_S)
    data = b""
    while b"\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            raise ValueError("the connection closed before its start request")
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            raise ValueError("the start request is too long")
    line, _, rest = data.partition(b"\n")
    if rest:
        raise ValueError("nothing may follow the start request before the sidecar answers")
    request = protocol.decode(line)  # a JSON object of bounded depth, else ValueError
    if request.get("warm") != 1:
        raise ValueError("not a start request")
    argv, env, cwd = request.get("argv"), request.get("env"), request.get("cwd")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise ValueError("argv must be a list of strings")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise ValueError("env must map names to strings")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise ValueError("cwd must be an absolute path")
    return request


class WarmServer:
    """Listens on `path`; forks one sidecar per accepted connection."""

    def __init__(self, path: Path, idle_s: float) -> None:
        self.path = path
        self.idle_s = idle_s
        self.lock_fd = -1
        self.listener: socket.socket | None = None
        self.inode: tuple[int, int] | None = None
        self.files: dict[str, tuple[int, int]] = {}
        self.children: set[int] = set()
        self.last_use = time.monotonic()

    def bind(self) -> bool:
        """Take the socket's lock and listen; False when another server holds it."""
        private_directory(self.path.parent)
        self.lock_fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                               0o600)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.lock_fd)
            return False
        os.ftruncate(self.lock_fd, 0)
        os.write(self.lock_fd, f"{os.getpid()}\n".encode())  # who holds it (`kill $(cat …lock)`)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a socket left by a server that died (we hold the lock)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old)
        listener.listen(16)
        info = os.stat(self.path)
        self.listener, self.inode = listener, (info.st_ino, info.st_dev)
        return True

    def serve(self) -> int:
        """Accept until idle, replaced or upgraded; 0."""
        from router.runtime import lean

        lean.import_server()  # everything a sidecar imports, loaded once, before any fork
        preload()
        lean.settle()
        self.files = module_files()
        assert self.listener is not None
        try:
            while not self.finished():
                readable, _, _ = select.select([self.listener], [], [], TICK_S)
                self.reap()
                if readable:
                    with contextlib.suppress(OSError):
                        connection, _ = self.listener.accept()
                        self.start(connection)
        finally:
            self.close()
        return 0

    def finished(self) -> bool:
        if time.monotonic() - self.last_use > self.idle_s:
            return True
        try:
            info = os.stat(self.path)
        except OSError:
            return True
        return (info.st_ino, info.st_dev) != self.inode

    def start(self, connection: socket.socket) -> None:
        """Fork a sidecar for `connection`, or refuse it with a reason."""
        self.last_use = time.monotonic()
        with connection:
            try:
                if peer_uid(connection) != os.getuid():
                    raise ValueError("this warm sidecar serves only its own user")
                request = read_request(connection)
                if module_files() != self.files:
                    self.idle_s = 0  # upgraded: this server ends, the bridge starts afresh
                    raise ValueError("the engine's files changed since this warm sidecar started")
            except (OSError, ValueError) as exc:
                with contextlib.suppress(OSError):
                    connection.sendall(json.dumps({"warm": "refused", "reason": str(exc)}).encode() + b"\n")
                return
            pid = os.fork()
            if pid == 0:
                self.become_sidecar(connection, request)  # never returns
            self.children.add(pid)

    def become_sidecar(self, connection: socket.socket, request: dict[str, Any]) -> None:
        """In the forked child: the connection as stdio, the bridge's environment, then serve."""
        code = 70
        try:
            if self.listener is not None:
                self.listener.close()
            os.close(self.lock_fd)
            connection.settimeout(None)
            os.dup2(connection.fileno(), 0)
            os.dup2(connection.fileno(), 1)
            connection.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(request["cwd"])
            sys.stdout.buffer.write(json.dumps({"warm": "ok", "pid": os.getpid()}).encode() + b"\n")
            sys.stdout.buffer.flush()
            from router.runtime import server
            code = server.main([*request["argv"], "--forked-from", str(os.getppid())])
        except BaseException as exc:  # nothing may return into the server's loop
            with contextlib.suppress(Exception):
                sys.stderr.write(f"router: the warm sidecar failed: {type(exc).__name__}: {exc}\n")
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            os._exit(code)

    def reap(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == 0:
                    continue
            self.children.discard(pid)

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            with contextlib.suppress(OSError):
                info = os.stat(self.path)
                if (info.st_ino, info.st_dev) == self.inode:
                    os.unlink(self.path)
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


def idle_seconds(env: dict[str, str] | os._Environ[str]) -> float:
    try:
        value = float(env.get("ROUTER_WARM_IDLE_S") or DEFAULT_IDLE_S)
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


def main(path: str) -> int:
    """`router serve --warm PATH`: 0 when it served until idle (or another server has the path)."""
    if getattr(socket, "SO_PEERCRED", None) is None or not hasattr(os, "fork"):
        print("router: a warm sidecar needs Linux (SO_PEERCRED and fork)", file=sys.stderr)
        return 2
    server = WarmServer(Path(path).absolute(), idle_seconds(os.environ))
    try:
        if not server.bind():
            return 0
    except (OSError, WarmError) as exc:
        print(f"router: cannot start the warm sidecar at {path}: {exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _stop)  # a stopped server removes its socket
    try:
        return server.serve()
    except SystemExit:
        return 0


def _stop(_signum: int, _frame: Any) -> None:
    raise SystemExit(0)
