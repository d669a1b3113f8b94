"""The sidecar's stdio connection: JSON lines both ways (docs/protocol.md).

Lines are cut by `LineSplitter` (an over-long line is dropped, its length reported); each message
is dispatched to the engine as a task of the sidecar's loop (router/runtime/loop.py), and the
engine's own requests to the bridge (`classify`, `complete`, `ask`) wait for their answers here.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from router.lang.jsonout import dumps
from router.runtime import loop, protocol


class Handler(Protocol):
    """What the connection asks of the engine (router/runtime/server.py's `Engine`)."""

    def hello(self, params: dict[str, Any], request_id: Any = None) -> Awaitable[dict[str, Any]]: ...
    def event(self, request_id: Any, params: dict[str, Any],
              received: float | None = None) -> Awaitable[dict[str, Any]]: ...
    def log(self, text: str) -> None: ...
    def after_answer(self) -> None: ...
    def shutdown(self) -> dict[str, Any]: ...


class Connection:
    """The stdio JSON-lines connection: dispatches bridge requests, awaits engine requests.

    Requests in flight are keyed by their id's JSON text, so any JSON value can be an id (it is
    echoed back as it came). Nothing a line holds stops the loop: a line that is not a message
    gets an error answer with id null and a line in the router log.
    """

    def __init__(self, writer: Any, engine: Callable[[Connection], Handler] | None = None) -> None:
        self.writer = writer
        self.pending: dict[str, Any] = {}  # futures of the running loop (router.runtime.loop)
        self.ids = itertools.count(1)
        self.tasks: set[Any] = set()
        self.running: dict[str, Any] = {}
        self.closing = threading.Event()
        self.engine: Handler | None = engine(self) if engine is not None else None

    def send(self, message: dict[str, Any]) -> None:
        if self.closing.is_set() and "id" not in message:
            return
        try:
            line = protocol.encode(message)
        except Exception as exc:  # not expected (encode cleans every value); never a dead sidecar
            self.log(f"cannot encode a message: {type(exc).__name__}: {exc}")
            if "id" not in message:
                return
            line = protocol.encode(protocol.error(message["id"], "internal", "the answer could not be "
                                                  f"encoded: {type(exc).__name__}"))
        try:
            self.writer.write(line)
            self.writer.flush()
        except (BrokenPipeError, ValueError, OSError):  # the bridge is gone: stop quietly
            self.closing.set()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    def log(self, text: str) -> None:
        if self.engine is not None:
            self.engine.log(text)

    def refuse(self, reason: str, line: bytes, request_id: Any = None) -> None:
        """Answer a line that is no message: an error to the id it starts with (null when it has
        none), and a line in the log."""
        self.log(f"protocol error: {reason}: {line[:200]!r}")
        self.send(protocol.error(request_id, "protocol", reason))

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        request_id = f"s{next(self.ids)}"
        future = loop.create_future()
        self.pending[request_id] = future
        self.send({"id": request_id, "method": method, "params": params})
        try:
            return await loop.wait_for(future, timeout)
        except TimeoutError:
            return {"error": f"no answer from Pi within {timeout:.1f}s"}
        finally:
            self.pending.pop(request_id, None)

    def dispatch(self, message: dict[str, Any], received: float | None = None) -> None:
        """Run the message's request as a task (`received`: when its line was read, perf_counter)."""
        method = message.get("method")
        if method == protocol.CANCEL:  # an aborted run: stop its request's work
            params = message.get("params")
            task = self.running.get(id_key(params.get("id"))) if isinstance(params, dict) else None
            if task is not None:
                task.cancel()
            return
        if method is None:
            self._answered(message)
            return
        request_id = message.get("id")
        key = id_key(request_id) if "id" in message else None
        if key is not None and key in self.running:
            self.send(protocol.error(request_id, "protocol", "a request with this id is still running"))
            return
        task = loop.spawn(self._answer(message, received))
        self.tasks.add(task)
        if key is not None:
            self.running[key] = task

        def finished(done: Any) -> None:
            self.tasks.discard(done)
            if key is not None and self.running.get(key) is done:
                del self.running[key]

        task.add_done_callback(finished)

    def _answered(self, message: dict[str, Any]) -> None:
        """An answer to one of the engine's requests (ids it made are strings)."""
        request_id = message.get("id")
        future = self.pending.get(request_id) if isinstance(request_id, str) else None
        if future is None or future.done():
            return
        error = message.get("error")
        future.set_result({"error": error.get("message") if isinstance(error, dict) else error}
                          if error else message.get("result"))

    async def _answer(self, message: dict[str, Any], received: float | None = None) -> None:
        has_id, request_id, method = "id" in message, message.get("id"), message.get("method")
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        assert self.engine is not None
        try:
            if method == protocol.HELLO:
                value: Any = await self.engine.hello(params, request_id)
            elif method == protocol.EVENT:
                value = await self.engine.event(request_id, params, received)
            elif method == protocol.SHUTDOWN:
                value = self.engine.shutdown()
                self.closing.set()
            else:
                raise ValueError(f"unknown method {str(method)[:100]!r}")
        except Exception as exc:
            self.log(f"internal error on {str(method)[:100]}: {type(exc).__name__}: {exc}")
            if has_id:
                self.send(protocol.error(request_id, "internal", f"{type(exc).__name__}: {exc}"))
            return
        if has_id:
            self.send(protocol.result(request_id, value))
        self.engine.after_answer()


def id_key(request_id: Any) -> str:
    """A hashable key for any JSON value used as a request id."""
    return dumps(request_id, compact=True)


class Dropped(int):
    """The length of an over-long line that was dropped, with its first bytes (`head`)."""

    head: bytes = b""


class LineSplitter:
    """Lines of at most `limit` bytes from chunks; a longer line is skipped up to its newline (its
    length comes instead of it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.scanned = 0  # bytes of the buffer known to hold no newline
        self.skipping = 0  # bytes of an over-long line dropped so far
        self.head = b""  # the start of the over-long line being dropped (it may name its id)

    def feed(self, chunk: bytes) -> list[bytes | int]:
        """The lines `chunk` completes (the length of each over-long one)."""
        self.buffer += chunk
        found: list[bytes | int] = []
        while True:
            newline = self.buffer.find(b"\n", self.scanned)
            if newline < 0:
                break
            line = bytes(self.buffer[:newline])
            del self.buffer[: newline + 1]
            self.scanned = 0
            found.append(self._checked(line))
        self.scanned = len(self.buffer)
        if len(self.buffer) > self.limit:  # keep no more than the limit in memory
            if not self.skipping:
                self.head = bytes(self.buffer[:512])
            self.skipping += len(self.buffer)
            self.buffer.clear()
            self.scanned = 0
        return found

    def end(self) -> list[bytes | int]:
        """The last line at the end of input (without a newline), if any."""
        rest, self.buffer, self.scanned = bytes(self.buffer), bytearray(), 0
        return [self._checked(rest)] if rest or self.skipping else []

    def _checked(self, line: bytes) -> bytes | int:
        if self.skipping or len(line) > self.limit:
            dropped, self.skipping = Dropped(self.skipping + len(line)), 0
            dropped.head, self.head = (self.head or line[:512]), b""
            return dropped
        return line


class Lines:
    """The lines of a stream with an async `read(n)` (an asyncio StreamReader), cut by LineSplitter."""

    def __init__(self, reader: Any, limit: int) -> None:
        self.reader = reader
        self.splitter = LineSplitter(limit)
        self.queue: list[bytes | int] = []
        self.ended = False

    async def next(self) -> bytes | int | None:
        """The next line; the length of an over-long one (dropped); None at the end of input."""
        while not self.queue:
            if self.ended:
                return None
            chunk = await self.reader.read(1 << 16)
            if not chunk:
                self.ended = True
                self.queue += self.splitter.end()
            else:
                self.queue += self.splitter.feed(chunk)
        return self.queue.pop(0)


def handle_line(connection: Connection, line: bytes | int, received: float | None = None) -> None:
    """Decode one input line and dispatch it; anything else is refused with an error answer.
    `received`: when the line was read (perf_counter), the start of its event's deadline."""
    if isinstance(line, int):
        connection.refuse(f"line of {line} bytes is longer than the limit of {protocol.MAX_LINE_BYTES}",
                          b"", protocol.request_id_of(getattr(line, "head", b"")))
        return
    if not line.strip():
        return
    try:
        message, cuts = protocol.decode_cut(line)
    except ValueError as exc:
        connection.refuse(str(exc), line, protocol.request_id_of(line))
        return
    params = message.get("params")
    if cuts and isinstance(params, dict):
        params["cut"] = cuts  # the event's `payload_cut`
    try:
        connection.dispatch(message, received)
    except Exception as exc:  # not expected: a message that breaks dispatch is refused, not fatal
        connection.refuse(f"{type(exc).__name__}: {exc}", line)
