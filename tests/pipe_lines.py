"""Lines from a child process's pipe, with a deadline per line instead of a blocking read (the
tests wait on output, never on sleeps)."""

from __future__ import annotations

import os
import selectors
import time
from typing import Any


class PipeLines:
    """Whole lines of `stream` (a pipe), each within its deadline; `who` names the child in failures."""

    def __init__(self, stream: Any, who: str) -> None:
        self.fd, self.buffer, self.who = stream.fileno(), b"", who
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)

    def line(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and self.selector.select(remaining), f"no line from {self.who} in time"
            chunk = os.read(self.fd, 65536)
            assert chunk, f"{self.who} closed its output"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line
