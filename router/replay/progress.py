"""A small progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30
INTERVAL_S = 0.1


class Progress:
    """`Progress(total, label)`; `advance()` per item, `close()` at the end (clears the line)."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, force: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.total, self.label, self.done = max(total, 1), label, 0
        self.enabled = force or _is_terminal(self.stream)
        self.drawn_at = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.enabled and (time.monotonic() - self.drawn_at >= INTERVAL_S or self.done >= self.total):
            self.draw()

    def draw(self) -> None:
        filled = int(WIDTH * min(self.done, self.total) / self.total)
        bar = "#" * filled + "-" * (WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
        self.stream.flush()
        self.drawn_at = time.monotonic()

    def close(self) -> None:
        if self.enabled and self.drawn_at:
            self.stream.write("\r" + " " * (len(self.label) + WIDTH + 30) + "\r")
            self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
