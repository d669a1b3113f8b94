"""pi-policy-router: ordered YAML rules decide what the Pi coding agent does.

Public API: `load_policy` / `compile_files` (load and compile), `evaluate` (pure interpreter),
`Decision` and `Effect` (its result). Imported lazily, so `router serve` starts light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Decision", "Effect", "__version__", "compile_files", "evaluate", "load_policy"]


def __getattr__(name: str) -> Any:
    if name in ("compile_files", "load_policy"):
        from router.compile import compiler as compile
        return getattr(compile, name)
    if name in ("Decision", "Effect"):
        from router.engine import decision
        return getattr(decision, name)
    if name == "evaluate":
        from router.engine.interpreter import evaluate

        return evaluate
    raise AttributeError(name)
