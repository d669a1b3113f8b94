"""pi-policy-router: ordered YAML rules decide what the Pi coding agent does.

Public API: `load_policy` / `compile_files` (load and compile), `evaluate` (pure interpreter),
`Decision` and `Effect` (its result).
"""

from __future__ import annotations

__version__ = "0.1.0"

from router.compile import compile_files, load_policy
from router.decision import Decision, Effect
from router.interpreter import evaluate

__all__ = ["Decision", "Effect", "__version__", "compile_files", "evaluate", "load_policy"]
