"""The sidecar's lean start: what `router serve` does so that it is ready soon after its spawn.

- The garbage collector stays off while the engine's modules load and the first policy compiles
  (a start allocates many objects that all live on; collecting them finds nothing), and the
  objects alive after the first `hello` are frozen (`gc.freeze()`): later collections skip them.
- `asyncio` is imported without `ssl` (it takes TLS support only when `ssl` imports): the sidecar
  speaks JSON lines over a pipe and never opens a TLS connection. `ssl` imports normally later.

Nothing here changes what the engine decides; `settle` is a no-op unless `import_server` ran.
"""

from __future__ import annotations

import gc
import sys
from types import ModuleType

_state = {"lean": False, "settled": False}


def import_server() -> ModuleType:
    """`router.runtime.server`, imported with the collector off and without `ssl`."""
    _state["lean"] = True
    gc.disable()
    blocked = "ssl" not in sys.modules
    if blocked:
        sys.modules["ssl"] = None  # type: ignore[assignment]  # `import ssl` raises ImportError
    try:
        import asyncio  # noqa: F401  # first, while ssl is blocked

        from router.runtime import server
    finally:
        if blocked and sys.modules.get("ssl", 0) is None:
            del sys.modules["ssl"]
    return server


def settle() -> None:
    """After the first policy load of a lean start: freeze what lives on, collect as usual again."""
    if not _state["lean"] or _state["settled"]:
        return
    _state["settled"] = True
    gc.freeze()
    gc.enable()
