"""A small client for ``pi --mode rpc`` (the RPC mode Pi's own documentation describes).

Records are split on ``\\n`` only (never on U+2028/2029, which are legal inside JSON strings).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tests.e2e.pi_harness import PiInstall, kill_process_group

JsonDict = dict[str, Any]
UiHandler = Callable[[JsonDict], "JsonDict | None"]
DIALOG_METHODS = frozenset({"select", "confirm", "input", "editor"})


class RpcError(RuntimeError):
    """A command failed, timed out, or Pi exited."""


def cancel_dialogs(request: JsonDict) -> JsonDict | None:
    """Default UI handler: cancel every dialog; fire-and-forget requests get no reply."""
    return {"cancelled": True} if request.get("method") in DIALOG_METHODS else None


def split_records(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Split complete LF-terminated records off ``buffer``; return them and the remainder."""
    *lines, rest = buffer.split(b"\n")
    return [line.removesuffix(b"\r") for line in lines if line.strip()], rest


def _temp_file(suffix: str) -> Path:
    fd, name = tempfile.mkstemp(prefix="pi-rpc-", suffix=suffix)
    os.close(fd)
    return Path(name)


class RpcPi:
    """Runs ``pi --mode rpc <args>`` and talks JSON lines to it.

    ``ui_handler`` gets each ``extension_ui_request`` (all are also kept in ``ui_requests``)
    and returns the response fields (``{"value": ...}``, ``{"confirmed": True}``,
    ``{"cancelled": True}``) or None to send nothing (answer later with ``answer_ui``).
    """

    def __init__(
        self,
        install: PiInstall,
        args: Sequence[str] = (),
        *,
        cwd: Path,
        env: Mapping[str, str],
        stderr_path: Path | None = None,
        ui_handler: UiHandler = cancel_dialogs,
        timeout: float = 30.0,
    ) -> None:
        self.argv = install.command("--mode", "rpc", *args)
        self.cwd = cwd
        self.env = dict(env)
        self.stderr_path = stderr_path or _temp_file(".stderr")
        self.ui_handler = ui_handler
        self.timeout = timeout
        self.records: list[JsonDict] = []
        self.ui_requests: list[JsonDict] = []
        self.handler_errors: list[BaseException] = []
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._eof = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._reader: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> RpcPi:
        """Spawn Pi and the stdout reader thread."""
        self._stderr = self.stderr_path.open("wb")
        self._proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read_loop, name="pi-rpc-reader", daemon=True)
        self._reader.start()
        return self

    def close(self, timeout: float = 15.0) -> int:
        """Close stdin (orderly shutdown), wait, kill on timeout; return the exit code."""
        proc = self._proc
        if proc is None:
            return 0
        with self._write_lock:
            if proc.stdin and not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_process_group(proc)
            code = proc.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self._stderr is not None:
            self._stderr.close()
        return code

    def __enter__(self) -> RpcPi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def returncode(self) -> int | None:
        """Pi's exit code, None while it runs."""
        return None if self._proc is None else self._proc.poll()

    def stderr_tail(self, limit: int = 3000) -> str:
        """The end of Pi's stderr, for diagnostics."""
        try:
            return self.stderr_path.read_bytes()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    # -- reading ---------------------------------------------------------------------------

    def _read_loop(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        buffer = b""
        while chunk := os.read(fd, 65536):
            lines, buffer = split_records(buffer + chunk)
            for line in lines:
                self._on_line(line)
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _on_line(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            record = {"type": "unparsed", "raw": line.decode("utf-8", "replace")}
        self._received(record)
        if record.get("type") == "extension_ui_request":
            self._on_ui_request(record)
        with self._cond:
            self.records.append(record)
            self._cond.notify_all()

    def _received(self, record: JsonDict) -> None:
        """Hook for subclasses: sees each record before it is stored and waiters are woken."""

    def _on_ui_request(self, request: JsonDict) -> None:
        with self._cond:
            self.ui_requests.append(request)
        try:
            fields = self.ui_handler(request)
        except Exception as exc:  # keep reading; a stuck dialog would hang Pi
            self.handler_errors.append(exc)
            fields = cancel_dialogs(request)
        if fields is not None:
            self.answer_ui(request["id"], **fields)

    def mark(self) -> int:
        """A cursor: records after this point are 'new'."""
        with self._cond:
            return len(self.records)

    def wait_record(
        self, predicate: Callable[[JsonDict], bool], timeout: float | None = None, since: int = 0
    ) -> JsonDict:
        """The first record from index ``since`` on that matches; RpcError on timeout or exit."""
        found: list[JsonDict] = []

        def ready() -> bool:
            found.extend(r for r in self.records[since:] if predicate(r))
            return bool(found) or self._eof

        with self._cond:
            self._cond.wait_for(ready, timeout if timeout is not None else self.timeout)
        if found:
            return found[0]
        reason = "Pi exited" if self._eof else f"timed out after {timeout or self.timeout}s"
        raise RpcError(f"{reason} waiting for a record; stderr tail:\n{self.stderr_tail()}")

    def wait_event(
        self,
        predicate: Callable[[JsonDict], bool] | str,
        timeout: float | None = None,
        since: int = 0,
    ) -> JsonDict:
        """Like ``wait_record``; a string predicate matches the record ``type``."""
        if isinstance(predicate, str):
            wanted = predicate
            return self.wait_record(lambda r: r.get("type") == wanted, timeout, since)
        return self.wait_record(predicate, timeout, since)

    def events(self, since: int = 0, type_: str | None = None) -> list[JsonDict]:
        """Records from ``since`` on, optionally of one ``type``."""
        with self._cond:
            return [r for r in self.records[since:] if type_ is None or r.get("type") == type_]

    # -- writing ---------------------------------------------------------------------------

    def _write(self, record: JsonDict) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise RpcError("Pi is not running")
        data = json.dumps(record).encode() + b"\n"
        with self._write_lock:
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise RpcError(
                    f"cannot write to Pi: {exc}; stderr tail:\n{self.stderr_tail()}"
                ) from exc

    def answer_ui(self, request_id: str, **fields: Any) -> None:
        """Send an ``extension_ui_response`` for a dialog."""
        self._write({"type": "extension_ui_response", "id": request_id, **fields})

    def send(self, command: JsonDict, timeout: float | None = None) -> JsonDict:
        """Send a command and return its ``response`` record (matched by id)."""
        command_id = str(command.get("id") or f"req-{next(self._ids)}")
        since = self.mark()
        self._write({**command, "id": command_id})
        return self.wait_record(
            lambda r: r.get("type") == "response" and r.get("id") == command_id, timeout, since
        )

    def command(self, type_: str, timeout: float | None = None, **fields: Any) -> Any:
        """Send ``{type, **fields}``; return ``data``, raising RpcError when it failed."""
        response = self.send({"type": type_, **fields}, timeout)
        if not response.get("success"):
            raise RpcError(f"{type_} failed: {response.get('error')}")
        return response.get("data")

    def prompt_and_wait(
        self, message: str, timeout: float | None = None, **fields: Any
    ) -> list[JsonDict]:
        """Send a prompt and wait for ``agent_settled`` (unless it was ``handled``).

        Returns the records seen from the prompt on, the response included.
        """
        since = self.mark()
        response = self.send({"type": "prompt", "message": message, **fields}, timeout)
        if not response.get("success"):
            raise RpcError(f"prompt failed: {response.get('error')}")
        if (response.get("data") or {}).get("disposition") != "handled":
            self.wait_event("agent_settled", timeout, since)
        return self.events(since)


class TimedRpc(RpcPi):
    """RpcPi that stamps each record with its arrival time (perf_counter, seconds) as ``_t``.

    The stamp is on the record before it is stored, so a waiter never sees a record without it.
    """

    _arrival = 0.0

    def _on_line(self, line: bytes) -> None:
        self._arrival = time.perf_counter()  # before parsing: the reader thread is the only caller
        super()._on_line(line)

    def _received(self, record: JsonDict) -> None:
        record["_t"] = self._arrival
