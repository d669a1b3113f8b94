"""`/policy why`: the session's last decision, and why each rule of its event type fired or not.

The sidecar keeps the last evaluated event with its state and signal outcomes; this module
evaluates it again with a tracer (the interpreter is pure, so the verdicts are the ones the live
decision had) and renders the trace one rule at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from router.engine.interpreter import evaluate
from router.engine.trace import BufferTracer, TraceEvent

if TYPE_CHECKING:
    from router.engine.decision import Decision
    from router.runtime.observer import LastDecision

VERDICTS = {"fire": "fired", "shadow": "would fire (shadow: not applied)", "skip": "skipped",
            "error": "error", "pending": "waiting for a signal"}


def why_text(last: LastDecision | None, event_type: str | None = None) -> str:
    """The text `/policy why [EVENT]` shows."""
    if last is None:
        what = f"no {event_type} event" if event_type else "no event"
        return f"no decision yet in this session: the router has evaluated {what} of it"
    tracer = BufferTracer()
    decision = evaluate(last.policy, last.event, state=last.state, outcomes=last.outcomes, tracer=tracer)
    record = last.record
    lines = [_headline(record)]
    by_rule: dict[str, list[TraceEvent]] = {}
    for event in tracer.events:
        if event.rule_id is not None:
            by_rule.setdefault(event.rule_id, []).append(event)
    for rule in last.policy.by_event.get(str(last.event.get("type")), ()):
        events = by_rule.get(rule.id, [])
        where = f"{rule.span.path}:{rule.span.line}" if rule.span.path else rule.file
        lines.append(f"  {rule.id}{' (shadow)' if rule.shadow else ''}: {_verdict(events)}  [{where}]")
        lines += [f"      {e.message}" for e in events if e.kind not in ("rule", "fire", "shadow", "skip")]
    if decision.effects:
        lines.append("actions: " + "; ".join(f"{e.action} <- {e.rule_id}" for e in decision.effects))
    else:
        lines.append("actions: none")
    lines += _signal_lines(record, decision)
    return "\n".join(lines)


def _headline(record: dict[str, Any]) -> str:
    model = f", model {record['model']}" if record.get("model") else ""
    return (f"last decision: {record.get('event')} #{record.get('seq')} at {record.get('time')} "
            f"({record.get('latency_ms')} ms{model})")


def _verdict(events: list[TraceEvent]) -> str:
    """One word or phrase for a rule's outcome, from its trace events."""
    kinds = [e.kind for e in events]
    if not events:
        return "not evaluated (an earlier rule ran out of time, or a signal was pending)"
    if "skip" in kinds:
        return events[kinds.index("skip")].message.split(": ", 1)[-1]
    refused = [e for e in events if e.kind == "error" and e.message.startswith("refused")]
    if refused:
        return "refused (matched, but not allowed)"
    for kind in ("shadow", "fire"):
        if kind in kinds:
            return VERDICTS[kind]
    if "error" in kinds:
        return "error (treated as not matched)"
    conditions = [e for e in events if e.kind == "cond"]
    if conditions and conditions[-1].message.split(": ", 1)[-1].startswith("false"):
        kind = conditions[-1].message.split(" ", 1)[0]
        return f"not matched ({kind} was false)"
    return "not matched"


def _signal_lines(record: dict[str, Any], decision: Decision) -> list[str]:
    """The record's signals with the values and errors of the decision evaluated again (the record
    keeps only stubs of their text; this is shown in Pi, never written)."""
    signals = record.get("signals") or {}
    if not signals:
        return []
    parts = []
    for name, entry in sorted(signals.items()):
        model_text = entry.get("redacted") and entry.get("value") is None  # a complete or child answer
        value = "(text, not shown)" if model_text else _short(decision.signals.get(name, entry.get("value")))
        error_text = decision.signal_errors.get(name) or entry.get("error")
        error = f": {error_text}" if error_text else ""
        parts.append(f"  {name} = {value} ({entry.get('source')}{error})")
    return ["signals:", *parts]


def _short(value: Any, limit: int = 80) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
