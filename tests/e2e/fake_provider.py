"""One loopback HTTP server that plays an OpenAI-compatible chat provider and a llama.cpp
router-mode server, and logs every request.

Usage::

    with FakeProvider() as fake:
        fake.script.push(Reply(text="HI"))
        ...  # point Pi at fake.base_url + "/v1"
        assert fake.chat_requests()[0].model == "fake-local"
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.e2e.fake_chat import (
    ChatSummary,
    Reply,
    Script,
    completion_json,
    stream_chunks,
    summarize_chat,
)
from tests.e2e.fake_llama import Fault, LlamaBackend, LlamaModel, LlamaScript

__all__ = [
    "ChatSummary",
    "FakeProvider",
    "Fault",
    "LlamaModel",
    "LlamaScript",
    "LoggedRequest",
    "Reply",
    "Script",
]

JsonDict = dict[str, Any]
CHAT_PATH = "/v1/chat/completions"


@dataclass
class LoggedRequest:
    """One request as the fake received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    time: float
    chat: ChatSummary | None = field(default=None, repr=False)

    def to_json(self) -> JsonDict:
        """A JSON-serialisable view (chat summary without the raw body)."""
        data = {k: v for k, v in asdict(self).items() if k != "chat"}
        if self.chat is not None:
            data["chat"] = {k: v for k, v in asdict(self.chat).items() if k != "body"}
        return data


class RequestLog:
    """Thread-safe request list with a condition for waiting."""

    def __init__(self, jsonl_path: Path | None = None) -> None:
        self._cond = threading.Condition()
        self._items: list[LoggedRequest] = []
        self._jsonl_path = jsonl_path

    def add(self, entry: LoggedRequest) -> None:
        """Record ``entry`` and wake waiters."""
        with self._cond:
            self._items.append(entry)
            if self._jsonl_path is not None:
                with self._jsonl_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry.to_json()) + "\n")
            self._cond.notify_all()

    def matching(self, path_prefix: str = "") -> list[LoggedRequest]:
        """Requests whose path starts with ``path_prefix``, in arrival order."""
        with self._cond:
            return [r for r in self._items if r.path.startswith(path_prefix)]

    def wait_for(self, n: int, timeout: float, path_prefix: str = "") -> list[LoggedRequest]:
        """Block until at least ``n`` matching requests arrived; TimeoutError otherwise."""

        def enough() -> bool:
            return sum(r.path.startswith(path_prefix) for r in self._items) >= n

        with self._cond:
            if not self._cond.wait_for(enough, timeout):
                got = sum(r.path.startswith(path_prefix) for r in self._items)
                raise TimeoutError(
                    f"expected {n} requests to {path_prefix or '/'}*, got {got} in {timeout}s"
                )
            return [r for r in self._items if r.path.startswith(path_prefix)]

    def clear(self) -> None:
        """Forget all requests."""
        with self._cond:
            self._items.clear()


POLL_S = 0.02
"""How often the serving thread looks for stop() (its latency)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: FakeProvider) -> None:
        self.owner = owner
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        with self.sockets_lock:
            self.open_sockets.add(conn)
        return conn, addr

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Close kept-alive client connections so handler threads end."""
        with self.sockets_lock:
            for conn in list(self.open_sockets):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        self.server.owner.dispatch(self, "GET")

    def do_POST(self) -> None:
        self.server.owner.dispatch(self, "POST")

    def read_body(self) -> Any:
        """The JSON request body (raw text when it is not JSON, None when empty)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def send_bytes(
        self, status: int, payload: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        """Send a complete response with a Content-Length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        """Send ``payload`` as JSON."""
        self.send_bytes(status, json.dumps(payload).encode(), "application/json", headers or {})


class FakeProvider:
    """The fake server. ``script`` drives chat replies, ``llama`` the llama.cpp side."""

    def __init__(
        self,
        script: Script | None = None,
        llama: LlamaScript | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.script = script or Script()
        self.llama_backend = LlamaBackend(llama)
        self.log = RequestLog(log_path)
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def llama(self) -> LlamaScript:
        """The llama.cpp script (models, probabilities, faults)."""
        return self.llama_backend.script

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeProvider:
        """Bind an ephemeral port on 127.0.0.1 and serve in a thread."""
        if self._server is not None:
            return self
        self._stop.clear()
        self._server = _Server(self)
        # serve_forever checks for shutdown() between polls: at its default 0.5 s poll, stop()
        # waited half a second in every e2e test's teardown; 20 ms polls cost nothing measurable
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_S}, name="fake-provider",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; delayed replies are cut short."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stop.set()
        server.shutdown()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("FakeProvider is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    # -- log helpers -----------------------------------------------------------------------

    def requests(self, path_prefix: str = "") -> list[LoggedRequest]:
        """Logged requests whose path starts with ``path_prefix``."""
        return self.log.matching(path_prefix)

    def chat_requests(self) -> list[ChatSummary]:
        """Summaries of every chat-completions request, in order."""
        return [r.chat for r in self.log.matching(CHAT_PATH) if r.chat is not None]

    def wait_for_requests(
        self, n: int, timeout: float = 10.0, path_prefix: str = ""
    ) -> list[LoggedRequest]:
        """Wait until ``n`` requests (matching ``path_prefix``) have arrived."""
        return self.log.wait_for(n, timeout, path_prefix)

    # -- request handling ------------------------------------------------------------------

    def dispatch(self, handler: _Handler, method: str) -> None:
        """Log one request and answer it."""
        url = urlsplit(handler.path)
        path = url.path.rstrip("/") or "/"
        query = dict(parse_qsl(url.query))
        body = handler.read_body() if method == "POST" else None
        chat = summarize_chat(body) if path == CHAT_PATH and isinstance(body, dict) else None
        self.log.add(
            LoggedRequest(
                method, path, query, dict(handler.headers.items()), body, time.time(), chat
            )
        )
        try:
            if chat is not None:
                self._answer_chat(handler, chat)
            elif self.llama_backend.owns(method, path):
                self._answer_llama(handler, method, path, query, body)
            else:
                handler.send_json(404, {"error": {"message": f"no route for {method} {path}"}})
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True

    def _wait(self, delay_s: float) -> bool:
        """Wait ``delay_s``; False when the server is stopping."""
        return not (delay_s > 0 and self._stop.wait(delay_s))

    def _answer_llama(
        self, handler: _Handler, method: str, path: str, query: dict[str, str], body: Any
    ) -> None:
        fault = self.llama_backend.fault(path) or Fault()
        if not self._wait(fault.delay_s):
            handler.close_connection = True
            return
        if fault.status is not None:
            handler.send_bytes(fault.status, fault.body.encode(), "text/plain", fault.headers)
            return
        handler.send_json(200, self.llama_backend.handle(method, path, query, body or {}))

    def _answer_chat(self, handler: _Handler, chat: ChatSummary) -> None:
        reply = self.script.next_reply(chat.body)
        if not self._wait(reply.delay_s):
            handler.close_connection = True
            return
        if reply.status is not None:
            handler.send_bytes(
                reply.status, reply.error_payload(), "application/json", reply.headers
            )
        elif chat.stream:
            self._stream(handler, reply, chat.model)
        else:
            handler.send_json(200, completion_json(reply, chat.model), reply.headers)

    def _stream(self, handler: _Handler, reply: Reply, model: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.close_connection = True
        for chunk in stream_chunks(reply, model):
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if reply.chunk_delay_s:
                handler.wfile.flush()
                if not self._wait(reply.chunk_delay_s):
                    return
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
