"""The sidecar's stdin: lines read as they come and handed to the connection one per loop turn
(each request's first step runs before the next line is taken), until stdin ends or `shutdown`
was answered; the requests still running then get two seconds to finish."""

from __future__ import annotations

import sys
import threading
import time

from router.runtime import loop, protocol
from router.runtime.connection import Connection, LineSplitter, handle_line


def read_lines(connection: Connection, events: loop.Loop) -> None:
    """Serve `connection` from stdin on `events` until the input ends or the connection closes."""
    splitter = LineSplitter(protocol.MAX_LINE_BYTES)
    ended = threading.Event()
    waiting: list[tuple[bytes | int, float]] = []  # each line with when it was read
    at_end = [False]

    def take(chunk: bytes) -> None:
        idle = not waiting
        now = time.perf_counter()
        waiting.extend((line, now) for line in (splitter.feed(chunk) if chunk else splitter.end()))
        at_end[0] = at_end[0] or not chunk
        if idle:
            next_line()

    def next_line() -> None:  # one line per turn: its request's first step runs before the next line
        if connection.closing.is_set():  # `shutdown` answered: the rest is not read
            return
        if waiting:
            handle_line(connection, *waiting.pop(0))
        if waiting:
            events.call_soon(next_line)
        elif at_end[0]:
            ended.set()

    events.read_from(sys.stdin.fileno(), take)
    events.run_until(lambda: ended.is_set() or connection.closing.is_set())
    if connection.tasks:
        events.run_until(lambda: not connection.tasks, timeout=2)
