"""The signal kinds: one entry per kind of external (or computed) signal a policy may declare.

An entry says where the kind is computed (`interpreter`: an expression over the event;
`executor`: local files, processes and slots; `bridge`: asked of Pi, such as a classifier call),
how long it may take by default and which request field overrides that, and the capability each
request field needs (docs/security.md). The request's fields are the pydantic model of the same
name in router/load/model.py (`ClassifySignal` for `classify`, …); a test checks the two agree.
This module imports nothing heavy: the executor reads it on the sidecar's start path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from router.trust.capabilities import FS_READ, FS_WRITE, PROCESS_SPAWN

Computed = Literal["interpreter", "executor", "bridge"]


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


LOCAL_BUDGET_MS = 5000  # the kinds that read local files

SIGNAL_KINDS: dict[str, SignalKind] = {kind.name: kind for kind in (
    SignalKind("expr", "interpreter", "an expression over the event", 0),
    SignalKind("classify", "bridge", "questions answered by a classifier model, through Pi", 4000,
               "timeout_ms"),
    SignalKind("complete", "bridge", "a completion from a model, through Pi", 45000, "timeout_ms"),
    SignalKind("child", "executor", "a child `pi --print` run", 45000, "timeout_ms",
               {"pi_bin": PROCESS_SPAWN, "system_prompt": FS_READ}),  # Pi reads a prompt that names a file
    SignalKind("load", "executor", "a JSON or YAML file", LOCAL_BUDGET_MS, None, {"file": FS_READ}),
    SignalKind("read", "executor", "a text file", LOCAL_BUDGET_MS, None, {"file": FS_READ}),
    SignalKind("records", "executor", "the last records of a JSON-lines file", LOCAL_BUDGET_MS, None,
               {"file": FS_READ}),
    SignalKind("slot", "executor", "one of N machine-wide slots", 30000, "wait_ms", {"dir": FS_WRITE},
               zero_timeout=True),
    SignalKind("probe", "bridge", "whether models answer, through Pi", 10000, "timeout_ms"),
    SignalKind("ask", "bridge", "a question to the user, through Pi's dialogs", 300000, "timeout_ms"),
    # where a program is on your PATH: not a project policy's business
    SignalKind("which", "executor", "the path of a program", LOCAL_BUDGET_MS, None, {"name": PROCESS_SPAWN}),
)}


def kind_names() -> tuple[str, ...]:
    """Every kind, `expr` first, in the order the language reference lists them."""
    return tuple(SIGNAL_KINDS)
