"""Whether the loads of this command may fetch git sources: on for the command line, off (the
default) for the sidecar. Its own small module so that a command that loads no policy
(`router version`, `--help`) sets it without importing the git machinery (git_source.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_FETCHING: ContextVar[bool] = ContextVar("router_git_fetching", default=False)


@contextlib.contextmanager
def fetching(enabled: bool = True) -> Iterator[None]:
    """Let the loads inside fetch what the cache lacks (the command line; never the sidecar)."""
    token = _FETCHING.set(enabled)
    try:
        yield
    finally:
        _FETCHING.reset(token)


def may_fetch() -> bool:
    """Whether the current command allows fetching (see `fetching`)."""
    return _FETCHING.get()
