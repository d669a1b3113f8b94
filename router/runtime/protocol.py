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
CUT_DEPTH = 64  # nesting kept; deeper values are cut (events are a few levels deep)
MAX_DEPTH = CUT_DEPTH  # the deepest a decoded message can be, besides the cut markers
MAX_STRING = 1_000_000  # characters of one string kept (the text helpers' own limit)
MAX_ITEMS = 100_000  # items of one array or object kept
CUT = "$cut"  # the key of the marker that replaces what was cut

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
    """One message, cut to the limits (see `decode_cut`)."""
    return decode_cut(line)[0]


def decode_cut(line: bytes) -> tuple[dict[str, Any], list[str]]:
    """Parse one line and cut it to the limits; the message and what was cut (empty: nothing).
    ValueError when it is not a JSON object."""
    cuts: list[str] = []
    if line.count(b"[") + line.count(b"{") > CUT_DEPTH and _too_deep(line, CUT_DEPTH):
        line = _cut_deep(line)
        cuts.append(f"nested deeper than {CUT_DEPTH} levels")
    try:
        message = json.loads(line)
    except RecursionError:  # not expected: the nesting was cut above
        raise ValueError(f"a protocol message is nested deeper than {CUT_DEPTH} levels") from None
    if not isinstance(message, dict):
        raise ValueError("a protocol message must be a JSON object")
    _cut_sizes(message, cuts)
    return message, cuts


def request_id_of(line: bytes) -> Any:
    """The id a line that cannot be decoded starts with (`{"id": 7, …`), else None."""
    found = _LEADING_ID.match(line[:512])
    if found is None:
        return None
    try:
        return json.loads(found.group(1))
    except ValueError:
        return None


_LEADING_ID = re.compile(rb'\s*\{\s*"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,200}")\s*[,}]')
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_MARKER = b'{"' + CUT.encode() + b'": "nested deeper than ' + str(CUT_DEPTH).encode() + b' levels"}'


def _too_deep(line: bytes, limit: int) -> bool:
    """Whether brackets outside JSON strings nest deeper than `limit` (before parsing recurses)."""
    depth = 0
    for byte in _STRING.sub(b"", line).translate(None, _NOT_BRACKETS):
        depth += 1 if byte in (0x5B, 0x7B) else -1
        if depth > limit:
            return True
    return False


def _cut_deep(line: bytes) -> bytes:
    """`line` with every array or object that opens deeper than CUT_DEPTH replaced by the marker
    (a value for a value: the text stays JSON if it was). One pass, no recursion."""
    out: list[bytes] = []
    depth, pos, cut_from = 0, 0, -1
    for token in _TOKEN.finditer(line):
        char = line[token.start()]
        if char == 0x22:  # a string: brackets in it do not count
            continue
        if char in (0x5B, 0x7B):
            depth += 1
            if depth == CUT_DEPTH + 1 and cut_from < 0:
                cut_from = token.start()
        else:
            depth -= 1
            if depth == CUT_DEPTH and cut_from >= 0:
                out += [line[pos:cut_from], _MARKER]
                pos, cut_from = token.end(), -1
    out.append(line[pos:])
    return b"".join(out)


def _cut_sizes(message: dict[str, Any], cuts: list[str]) -> None:
    """Cut, in place, strings past MAX_STRING characters and arrays and objects past MAX_ITEMS."""
    stack: list[Any] = [message]
    strings = items = 0
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            if len(value) > MAX_ITEMS:
                extra = len(value) - MAX_ITEMS
                del value[MAX_ITEMS:]
                value.append({CUT: f"{extra} more items"})
                items += 1
            for index, child in enumerate(value):
                if isinstance(child, str) and len(child) > MAX_STRING:
                    value[index] = _cut_text(child)
                    strings += 1
                elif isinstance(child, (list, dict)):
                    stack.append(child)
        elif isinstance(value, dict):
            if len(value) > MAX_ITEMS or any(len(key) > MAX_STRING for key in value):
                kept = list(value.items())
                extra = len(kept) - MAX_ITEMS
                value.clear()
                value.update((_cut_text(k) if len(k) > MAX_STRING else k, v) for k, v in kept[:MAX_ITEMS])
                if extra > 0:
                    value[CUT] = f"{extra} more keys"
                items += 1
            for key, child in value.items():
                if isinstance(child, str) and len(child) > MAX_STRING:
                    value[key] = _cut_text(child)
                    strings += 1
                elif isinstance(child, (list, dict)):
                    stack.append(child)
    if strings:
        cuts.append(f"{strings} string(s) longer than {MAX_STRING:,} characters")
    if items:
        cuts.append(f"{items} array(s) or object(s) of more than {MAX_ITEMS:,} items")


def _cut_text(text: str) -> str:
    return f"{text[:MAX_STRING]}…[{CUT}: {len(text) - MAX_STRING} more characters]"


def result(request_id: Any, value: Any) -> dict[str, Any]:
    return {"id": request_id, "result": value}


def error(request_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "error": {"code": code, "message": message}}
