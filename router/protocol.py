"""The JSON-lines protocol between the bridge (in Pi) and `router serve` (docs/protocol.md).

One JSON object per line, UTF-8, split on `\\n` only. Requests go both ways:
`{"id", "method", "params"}`; answers are `{"id", "result"}` or `{"id", "error": {"code",
"message"}}`; notifications have no id. Bridge request ids are integers, engine ones strings.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 * 1024 * 1024

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
    """One protocol line."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str)
    # a lone surrogate (JavaScript strings may hold one) goes out as its JSON escape, \udXXX
    return text.encode("utf-8", "backslashreplace") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line; ValueError when it is not a JSON object."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a protocol message must be a JSON object")
    return message


def result(request_id: Any, value: Any) -> dict[str, Any]:
    return {"id": request_id, "result": value}


def error(request_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "error": {"code": code, "message": message}}
