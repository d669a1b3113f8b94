"""The signal kinds the executor computes, one module per kind: `router/runtime/signals/<kind>.py`.

Each module's `compute(executor, request)` returns the outcome (or a coroutine of it); the executor
finds it by the kind's name (router/actions/signal_kinds.py declares the kinds), so a new kind is its
declaration, its request model (router/load/model.py) and its file here. What several kinds share,
the time budget of a request and number parameters, is below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from router.actions.signal_kinds import LOCAL_BUDGET_MS, SIGNAL_KINDS

if TYPE_CHECKING:
    from router.engine.decision import SignalRequest

Compute = Callable[[Any, "SignalRequest"], Any]  # (executor, request) -> outcome or its coroutine
_FOUND: dict[str, ModuleType | None] = {}


def _module(kind: str) -> ModuleType | None:
    if kind not in _FOUND:
        spec = SIGNAL_KINDS.get(kind)
        found = spec is not None and spec.runs != "interpreter"
        _FOUND[kind] = importlib.import_module(f"{__name__}.{kind}") if found else None
    return _FOUND[kind]


def computation(kind: str) -> Compute | None:
    """The `compute` of a kind the executor computes (or asks the bridge for); None for others."""
    module = _module(kind)
    return None if module is None else module.compute


def budget_ms(request: SignalRequest) -> int:
    """The longest computing `request` may take: its file's `budget_ms` if it has one (a probe
    makes one call per model), else its time budget."""
    module = _module(request.kind)
    custom = getattr(module, "budget_ms", None)
    return custom(request) if custom is not None else timeout(request)


def timeout(request: SignalRequest) -> int:
    """The request's time budget: its kind's timeout field when valid, else the kind's default."""
    kind = SIGNAL_KINDS.get(request.kind)
    if kind is None:
        return LOCAL_BUDGET_MS
    given = request.params.get(kind.timeout_field) if kind.timeout_field else None
    return as_int(given, kind.timeout_ms, allow_zero=kind.zero_timeout)


def as_int(value: Any, default: int, *, allow_zero: bool = False) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number > 0 or (allow_zero and number == 0) else default


def which_program(name: str) -> str | None:
    """`shutil.which`, imported on first use (a sidecar's start does without shutil)."""
    import shutil

    return shutil.which(name)
