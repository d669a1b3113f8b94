"""The signal kinds, one file per kind: `router/actions/signals/<kind>.py`.

A kind's file holds everything about it: its declaration `KIND` (`kind(...)`: where it is computed,
its one-line summary, its default time budget and the request field that sets it, the capability
of each request field that reaches files or programs), its request fields (the `Params` class
named `<Kind>Signal`, whose docstring is its documentation: docs/reference/signals.md is generated
from the files) and, when the executor computes it or asks the bridge for it, `compute(local,
request)`. `local` is what the executor offers a computation (`SignalLocal`: bridge calls, files,
child processes, slots), so the file stays in this stage. Nothing else lists a kind: the registry
finds the files by name. Importing a file imports no pydantic (the sidecar's start path does);
the policy model builds the request models from the `Params` classes (router/load/model.py).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol

Computed = Literal["interpreter", "executor", "bridge"]
LOCAL_BUDGET_MS = 5000  # the kinds that read local files
FIRST = "expr"  # listed first; the other kinds follow by name


@dataclass(frozen=True)
class SignalKind:
    """One kind of signal: where it is computed, its time budget, what its fields may touch."""

    name: str
    runs: Computed
    summary: str
    timeout_ms: int  # the default budget of one computation
    timeout_field: str | None = None  # the request field that sets it, if any
    capabilities: Mapping[str, str] = field(default_factory=dict)  # request field -> capability
    zero_timeout: bool = False  # whether 0 is a meaningful budget (do not wait at all)
    module: str = ""  # the kind's file (set by the registry)

    @property
    def params(self) -> type[Any] | None:
        """The file's `<Kind>Signal` class of request fields (None for `expr`, a bare expression)."""
        return getattr(importlib.import_module(self.module), params_name(self.name), None)


def kind(name: str, runs: Computed, summary: str, timeout_ms: int = LOCAL_BUDGET_MS, *,
         timeout_field: str | None = None, capabilities: Mapping[str, str] | None = None,
         zero_timeout: bool = False) -> SignalKind:
    """A kind's declaration, the `KIND` of its file."""
    return SignalKind(name, runs, summary, timeout_ms, timeout_field, dict(capabilities or {}),
                      zero_timeout, f"{__name__}.{name}")


def params_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Signal"


@dataclass(frozen=True)
class SignalOutcome:
    """What the executor got for a signal: a raw result, or the error text of its failure."""

    result: Any = None
    error: str | None = None
    elapsed_ms: float | None = None


class Request(Protocol):
    """A signal request as a computation reads it (router/engine/decision.py's `SignalRequest`)."""

    @property
    def kind(self) -> str: ...

    @property
    def params(self) -> dict[str, Any]: ...

    @property
    def questions(self) -> dict[str, Any]: ...

    @property
    def confinement(self) -> object | None: ...


class SignalLocal(Protocol):
    """What the executor offers a kind's `compute` (router/runtime/signal_local.py)."""

    @property
    def cwd(self) -> str: ...

    @property
    def slots(self) -> dict[str, tuple[int, int]]:
        """The slots this session holds: name -> (number, lock file descriptor)."""
        ...

    async def bridge(self, method: str, params: dict[str, Any], timeout_s: float) -> Any:
        """Ask the bridge (Pi) and wait at most `timeout_s` seconds for its answer."""

    def read_text(self, path: Path, *, nofollow: bool) -> str:
        """A regular file's text (`nofollow`: never through a final link); FileNotFoundError if missing."""
        ...

    def load_json(self, path: Path, *, nofollow: bool) -> Any:
        """A file's JSON (None when missing); ValueError, located, when it is not JSON."""

    async def run_process(self, argv: list[str], stdin: bytes, *, cwd: str | None,
                          timeout: float) -> tuple[int, bytes, bytes] | None:
        """(code, stdout, stderr) of `argv` run with `stdin`; None past `timeout` seconds."""

    async def sleep(self, seconds: float) -> None: ...

    def which(self, name: str) -> str | None:
        """The path of program `name` on PATH, if any."""
        ...


Compute = Callable[[SignalLocal, Request], Any]  # (local, request) -> outcome or its coroutine
_KINDS: dict[str, SignalKind] = {}
_FOUND: dict[str, ModuleType | None] = {}


def kind_files() -> list[str]:
    """The kinds' files in this folder, `expr` first, then by name."""
    names = sorted(entry[:-3] for entry in os.listdir(os.path.dirname(__file__))
                   if entry.endswith(".py") and not entry.startswith("_"))
    return sorted(names, key=lambda name: (name != FIRST, name))


def registry() -> dict[str, SignalKind]:
    """Every kind by name, in the reference's order (each file imported on the first call)."""
    if not _KINDS:
        for name in kind_files():
            declared: SignalKind = importlib.import_module(f"{__name__}.{name}").KIND
            if declared.name != name:
                raise ValueError(f"{__name__}.{name} declares the kind {declared.name!r}")
            _KINDS[name] = declared
    return _KINDS


def kind_names() -> tuple[str, ...]:
    """Every kind, `expr` first, in the order the language reference lists them."""
    return tuple(registry())


def _module(name: str) -> ModuleType | None:
    if name not in _FOUND:
        spec = registry().get(name)
        _FOUND[name] = importlib.import_module(spec.module) if spec and spec.runs != "interpreter" else None
    return _FOUND[name]


def computation(name: str) -> Compute | None:
    """The `compute` of a kind the executor computes (or asks the bridge for); None for others."""
    module = _module(name)
    return None if module is None else getattr(module, "compute", None)


def budget_ms(request: Request) -> int:
    """The longest computing `request` may take: its file's `budget_ms` if it has one (a probe
    makes one call per model), else its time budget."""
    custom = getattr(_module(request.kind), "budget_ms", None)
    return custom(request) if custom is not None else timeout(request)


def timeout(request: Request) -> int:
    """The request's time budget: its kind's timeout field when valid, else the kind's default."""
    spec = registry().get(request.kind)
    if spec is None:
        return LOCAL_BUDGET_MS
    given = request.params.get(spec.timeout_field) if spec.timeout_field else None
    return as_int(given, spec.timeout_ms, allow_zero=spec.zero_timeout)


def as_int(value: Any, default: int, *, allow_zero: bool = False) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number > 0 or (allow_zero and number == 0) else default
