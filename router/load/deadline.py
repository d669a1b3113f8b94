"""A time limit for parsing, as a context: `with time_limit(3): parse_source(...)` (no heavy imports:
the sidecar sets it before it knows whether anything will be parsed)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("router_parse_deadline", default=None)


class TooSlow(Exception):
    """The parse ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Parses inside stop with RT103 once `seconds` have passed (router/load/source.py checks while
    the events are read and the values built; the composer in between runs only when the events
    took at most a fifth of the limit). Inside another limit, the earlier deadline holds."""
    outer = _DEADLINE.get()
    deadline = time.monotonic() + seconds
    limit = outer if outer is not None and outer[0] <= deadline else (deadline, seconds)
    token = _DEADLINE.set(limit)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check(part: float = 1.0) -> None:
    """TooSlow when the deadline passed (or, with `part` < 1, when more than that part of the
    limit is used: the next step would need the rest several times over)."""
    limit = _DEADLINE.get()
    if limit is None:
        return
    deadline, seconds = limit
    if time.monotonic() > deadline - seconds * (1.0 - part):
        raise TooSlow


def limit_seconds() -> float:
    """The time limit in force, in seconds (0 without one)."""
    limit = _DEADLINE.get()
    return limit[1] if limit is not None else 0.0
