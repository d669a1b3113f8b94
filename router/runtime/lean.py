"""The sidecar's lean start: what `router serve` does so that it is ready soon after its spawn.

The sidecar imports no asyncio (router/runtime/loop.py is its loop), no ssl, and none of the
command line's libraries (pydantic, ruamel, typer: a cached policy loads without them). On top:
the garbage collector stays off while the engine's modules load and the first policy compiles (a
start allocates many objects that all live on; collecting them finds nothing), and the objects
alive after the first `hello` are frozen (`gc.freeze()`): later collections skip them.

Nothing here changes what the engine decides; `settle` is a no-op unless `import_server` ran.
"""

from __future__ import annotations

import gc
from types import ModuleType

SERVE_OPTIONS = ("--cwd", "--agent-dir", "--policy", "--warm", "--forked-from")
"""`router serve`'s options, each with a value: what the console script hands to the sidecar without
typer (router/commands/entry.py) and what the sidecar reads without argparse
(router/runtime/serve_args.py)."""

_state = {"lean": False, "settled": False}


def import_server() -> ModuleType:
    """`router.runtime.server`, imported with the collector off."""
    _state["lean"] = True
    gc.disable()
    from router.runtime import server
    return server


def settle() -> None:
    """After the first policy load of a lean start: freeze what lives on, collect as usual again."""
    if not _state["lean"] or _state["settled"]:
        return
    _state["settled"] = True
    gc.freeze()
    gc.enable()
