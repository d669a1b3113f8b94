"""Trace events emitted by the interpreter, tracers that collect them, and the explain renderer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from router.diagnostics.diagnostic import Span


@dataclass(frozen=True)
class TraceEvent:
    """One step of an evaluation.

    kinds: `rule` (entered), `skip` (group already decided), `cond` (match/when value), `miss`
    (the first false part of a condition), `signal`, `fire`, `shadow`, `action`, `error`,
    `pending`.
    """

    kind: str
    rule_id: str | None = None
    span: Span | None = None
    message: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    depth: int = 0


class Tracer(Protocol):
    def emit(self, event: TraceEvent) -> None: ...


class BufferTracer:
    """Keeps every trace event in memory."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, event: TraceEvent) -> None:
        self.events.append(event)




def filter_events(events: list[TraceEvent], mode: str) -> list[TraceEvent]:
    """Keep all events (`full`), the rules that fired (`matched`) or the ones that did not
    (`fails`), each with its rule line kept as the ancestor of what it shows."""
    if mode == "full":
        return events
    by_rule: dict[str | None, list[TraceEvent]] = {}
    for event in events:
        by_rule.setdefault(event.rule_id, []).append(event)
    fired = {e.rule_id for e in events if e.kind in ("fire", "shadow")}
    keep = []
    for event in events:
        kept_rule = (event.rule_id in fired) == (mode == "matched")
        if event.rule_id is None or event.kind == "pending" or kept_rule:
            keep.append(event)
    return keep


def render_trace(events: list[TraceEvent], *, color: bool = False) -> list[str]:
    """One line per event: a `file:line` column, then `| ` per nesting level and the message."""
    lines = []
    width = max((len(_where(e.span)) for e in events), default=0)
    for event in events:
        text = ("| " * event.depth) + event.message
        lines.append(f"{_where(event.span).ljust(width)}  {_paint(text, event.kind, color)}")
    return lines


def _where(span: Span | None) -> str:
    return f"{span.path}:{span.line}" if span else ""


_COLORS = {"fire": "32", "shadow": "36", "miss": "33", "error": "31", "skip": "2", "pending": "35"}


def _paint(text: str, kind: str, color: bool) -> str:
    code = _COLORS.get(kind)
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text
