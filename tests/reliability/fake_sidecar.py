"""A misbehaving stand-in for `router serve`, started by the bridge through ``ROUTER_SERVE``.

Usage (the bridge appends ``--cwd DIR --agent-dir DIR``)::

    ROUTER_SERVE='["python3", "tests/reliability/fake_sidecar.py", "garbage"]'

Every mode answers ``hello`` like the engine (events ``input``) unless it says otherwise, and
answers an ``input`` event with ``tools: {only: [read]}`` so a test sees when the engine's answers
apply again. The fault is injected only for an ``input`` whose text contains ``FAULT``:

- ``garbage``: prints a line that is not JSON;
- ``huge``: prints ``HUGE_BYTES`` bytes without a newline, then says nothing more;
- ``utf8``: answers ``hello`` with a warning whose UTF-8 bytes are split across two writes in the
  middle of a character (every start, no ``FAULT`` needed);
- ``silent``: never answers anything, ``hello`` included;
- ``limited MIB``: not a fake: runs the real ``python -m router serve`` under an address-space
  limit of MIB mebibytes, so a runaway expression cannot take the machine's memory.

It imports nothing from the project and exits when its stdin closes.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

HUGE_BYTES = 72 * 1024 * 1024  # past the protocol's 64 MiB line limit
UTF8_WARNING = "ünïcödé ✓ 日本語 — split"
READ_ONLY = {"action": "tools", "params": {"only": ["read"]}, "rule": "fake"}


def send(data: bytes) -> None:
    """Write raw bytes to stdout at once."""
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def answer(request_id: Any, result: Any) -> None:
    """One protocol answer line."""
    send(json.dumps({"id": request_id, "result": result}, ensure_ascii=False).encode() + b"\n")


def hello_result(warnings: list[str]) -> dict[str, Any]:
    """What the engine answers to ``hello`` for a policy with ``input`` rules."""
    return {"protocol": 1, "engine": "fake", "events": ["input"], "commands": [], "tools": [],
            "virtual_models": [], "skills": [], "warnings": warnings, "files": [], "trust": None}


def split_send(line: bytes) -> None:
    """Send ``line`` in two writes, cut inside the first multi-byte character."""
    cut = next(i for i, byte in enumerate(line) if byte >= 0x80) + 1
    send(line[:cut])
    time.sleep(0.3)  # the fault itself: the bridge must see two chunks
    send(line[cut:])


def on_hello(mode: str, request_id: Any) -> None:
    if mode == "utf8":
        message = {"id": request_id, "result": hello_result([UTF8_WARNING])}
        split_send(json.dumps(message, ensure_ascii=False).encode() + b"\n")
    else:
        answer(request_id, hello_result([]))


def on_event(mode: str, request_id: Any, params: dict[str, Any]) -> None:
    payload = params.get("payload") or {}
    faulty = params.get("type") == "input" and "FAULT" in str(payload.get("text"))
    if faulty and mode == "garbage":
        send(b"this is not JSON {\n")
    elif faulty and mode == "huge":
        send(b"x" * HUGE_BYTES)
    else:
        answer(request_id, {"actions": [READ_ONLY] if params.get("type") == "input" else [],
                            "fired": [], "warnings": []})


def run_limited(limit_mib: int, serve_args: list[str]) -> None:
    """Exec the real sidecar with RLIMIT_AS set to ``limit_mib``."""
    limit = limit_mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execv(sys.executable, [sys.executable, "-m", "router", "serve", *serve_args])


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "garbage"
    if mode == "limited":
        run_limited(int(argv[1]), argv[2:])
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if mode == "silent" or not isinstance(message, dict):
            continue
        method, request_id = message.get("method"), message.get("id")
        if method == "hello":
            on_hello(mode, request_id)
        elif method == "event":
            on_event(mode, request_id, message.get("params") or {})
        elif method == "shutdown":
            answer(request_id, {})
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
