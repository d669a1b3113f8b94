"""The JSON-lines protocol between the bridge (in Pi) and `router serve` (docs/protocol.md).

One JSON object per line, UTF-8, split on `\\n` only. Requests go both ways:
`{"id", "method", "params"}`; answers are `{"id", "result"}` or `{"id", "error": {"code",
"message"}}`; notifications have no id. Bridge request ids are integers, engine ones strings; the
engine answers any JSON value as an id with that value. A line that cannot be a message (not
JSON, not an object, longer than MAX_LINE_BYTES, nested deeper than MAX_DEPTH) is answered with
an error whose id is null. Every line written is strict JSON (`router.lang.jsonout`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from router.lang.jsonout import dumps

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 100  # nesting of one message: events are a few levels deep

# bridge -> engine
HELLO = "hello"
EVENT = "event"
SHUTDOWN = "shutdown"
CANCEL = "cancel"
# engine -> bridge
CLASSIFY = "classify"
COMPLETE = "complete"
ASK = "ask"
PROGRESS = "progress"
LOG = "log"


def encode(message: dict[str, Any]) -> bytes:
    """One protocol line (strict JSON: a non-finite number goes out as null)."""
    text = dumps(message, compact=True)
    # a lone surrogate (JavaScript strings may hold one) goes out as its JSON escape, \udXXX
    return text.encode("utf-8", "backslashreplace") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line; ValueError when it is not a JSON object of at most MAX_DEPTH levels."""
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _too_deep(line):
        raise ValueError(f"a protocol message is nested deeper than {MAX_DEPTH} levels")
    try:
        message = json.loads(line)
    except RecursionError:
        raise ValueError(f"a protocol message is nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(message, dict):
        raise ValueError("a protocol message must be a JSON object")
    return message


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _too_deep(line: bytes) -> bool:
    """Whether brackets outside JSON strings nest deeper than MAX_DEPTH (before parsing recurses)."""
    depth = 0
    for byte in _STRING.sub(b"", line).translate(None, _NOT_BRACKETS):
        depth += 1 if byte in (0x5B, 0x7B) else -1
        if depth > MAX_DEPTH:
            return True
    return False


def result(request_id: Any, value: Any) -> dict[str, Any]:
    return {"id": request_id, "result": value}


def error(request_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "error": {"code": code, "message": message}}
