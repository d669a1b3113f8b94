"""Scripted replies and wire formats for the fake OpenAI-compatible chat endpoint.

What Pi sends and expects is that of Pi's OpenAI-compatible provider (Pi 1.6.0).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]

_ids = itertools.count(1)


@dataclass
class Reply:
    """One scripted assistant reply (or failure) for a chat request."""

    text: str = "ok"
    tool_calls: list[JsonDict] = field(default_factory=list)
    """Each entry is ``{"name": str, "arguments": dict, "id"?: str}``."""
    reasoning: str = ""
    """Streamed as ``reasoning_content`` deltas before the text when non-empty."""
    prompt_tokens: int = 10
    completion_tokens: int = 2
    delay_s: float = 0.0
    """Wait before answering; cut short when the server stops."""
    chunk_delay_s: float = 0.0
    """Wait after each streamed chunk (to abort or steer mid-stream)."""
    status: int | None = None
    """HTTP error status to return instead of a completion."""
    error_body: str | JsonDict | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (for example ``x-should-retry: false``)."""

    @property
    def finish_reason(self) -> str:
        """``tool_calls`` when the reply calls tools, else ``stop``."""
        return "tool_calls" if self.tool_calls else "stop"

    def usage(self) -> JsonDict:
        """The OpenAI ``usage`` object for this reply."""
        total = self.prompt_tokens + self.completion_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": total,
        }

    def error_payload(self) -> bytes:
        """The body sent with ``status``."""
        body = self.error_body
        if body is None:
            body = {
                "error": {"message": f"fake provider error {self.status}", "type": "server_error"}
            }
        return body.encode() if isinstance(body, str) else json.dumps(body).encode()


ReplyFn = Callable[[JsonDict], "Reply | None"]


class Script:
    """Chooses the reply for each chat request.

    Order: the queue for the request's ``model``, then the shared queue, then ``fn``
    (which may return None), then ``default``.
    """

    def __init__(
        self,
        replies: list[Reply] | None = None,
        fn: ReplyFn | None = None,
        default: Reply | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._shared: deque[Reply] = deque(replies or [])
        self._by_model: dict[str, deque[Reply]] = {}
        self.fn = fn
        self.default = default or Reply()

    def push(self, *replies: Reply, model: str | None = None) -> Script:
        """Queue replies, for one model only when ``model`` is given."""
        with self._lock:
            queue = self._shared if model is None else self._by_model.setdefault(model, deque())
            queue.extend(replies)
        return self

    def pending(self) -> int:
        """How many queued replies are left (all queues)."""
        with self._lock:
            return len(self._shared) + sum(len(q) for q in self._by_model.values())

    def next_reply(self, body: JsonDict) -> Reply:
        """Pop or compute the reply for one request body."""
        with self._lock:
            queue = self._by_model.get(str(body.get("model")))
            if queue:
                return queue.popleft()
            if self._shared:
                return self._shared.popleft()
        if self.fn is not None:
            reply = self.fn(body)
            if reply is not None:
                return reply
        return self.default


@dataclass
class ChatSummary:
    """The parts of a chat request that tests assert on."""

    model: str
    tools: list[str]
    system: str
    messages: list[JsonDict]
    """``[{"role", "text"}]`` in wire order, system messages included; assistant
    entries also carry ``tool_calls`` (names) and tool entries ``tool_call_id``."""
    reasoning_effort: str | None
    stream: bool
    body: JsonDict

    def texts(self, role: str) -> list[str]:
        """Texts of all messages with ``role``."""
        return [m["text"] for m in self.messages if m["role"] == role]


def content_text(content: Any) -> str:
    """Flatten an OpenAI message ``content`` (string or parts) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "\n".join(parts)
    return ""


def _summarize_message(message: JsonDict) -> JsonDict:
    entry: JsonDict = {
        "role": message.get("role", ""),
        "text": content_text(message.get("content")),
    }
    if message.get("tool_calls"):
        entry["tool_calls"] = [c.get("function", {}).get("name") for c in message["tool_calls"]]
    if "tool_call_id" in message:
        entry["tool_call_id"] = message["tool_call_id"]
    return entry


def summarize_chat(body: JsonDict) -> ChatSummary:
    """Parse a ``/v1/chat/completions`` request body."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    system = "\n".join(
        content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    )
    tools = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
    return ChatSummary(
        model=str(body.get("model", "")),
        tools=tools,
        system=system,
        messages=[_summarize_message(m) for m in messages],
        reasoning_effort=body.get("reasoning_effort"),
        stream=bool(body.get("stream")),
        body=body,
    )


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _tool_call_id(call: JsonDict) -> str:
    return str(call.get("id") or f"call_{next(_ids)}")


def _tool_deltas(reply: Reply) -> Iterator[JsonDict]:
    for index, call in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": _tool_call_id(call),
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        yield {"tool_calls": [head]}
        for fragment in _pieces(json.dumps(call.get("arguments", {})), size=12):
            yield {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}


def _deltas(reply: Reply) -> Iterator[JsonDict]:
    yield {"role": "assistant", "content": ""}
    if reply.reasoning:
        for piece in _pieces(reply.reasoning):
            yield {"reasoning_content": piece}
    if reply.text:
        for piece in _pieces(reply.text):
            yield {"content": piece}
    yield from _tool_deltas(reply)


def stream_chunks(reply: Reply, model: str) -> Iterator[JsonDict]:
    """The ``chat.completion.chunk`` objects of one streamed reply, usage chunk last."""
    base = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    for delta in _deltas(reply):
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]}
    yield {**base, "choices": [], "usage": reply.usage()}


def completion_json(reply: Reply, model: str) -> JsonDict:
    """A non-streaming ``chat.completion`` object."""
    message: JsonDict = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _tool_call_id(c),
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
            }
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": reply.usage(),
    }
