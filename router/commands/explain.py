"""`router explain`: a dry run of one event through the layered policy, with the full trace."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from router.commands import policy_note
from router.compile.compiler import LoadedPolicy, compile_layers, complete, load_layered
from router.compile.ir import CompiledPolicy, CompiledRule
from router.diagnostics.code_names import INVALID_VALUE, SIGNAL_FAILED
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import EventError, SourceError
from router.engine.decision import Decision, SignalOutcome
from router.engine.interpreter import evaluate
from router.engine.scope import show_value
from router.engine.trace import BufferTracer, TraceEvent, filter_events, render_trace
from router.load.event_documents import complete_event
from router.load.loader import PolicyFile
from router.load.source import SourceDoc, parse_source, read_source

DRY_RUN = "not computed in a dry run (give --signal {name}=VALUE to supply one)"
MAX_PENDING = 16


@dataclass
class Explanation:
    event: dict[str, Any]
    decision: Decision
    trace: list[TraceEvent]
    dry_signals: list[str]
    files: tuple[PolicyFile, ...] = ()
    policy: CompiledPolicy | None = None


def load(paths: list[Path], *, cwd: Path) -> LoadedPolicy:
    """The given policy files (with what they `use:`), else the layered policy of `cwd`; from a
    subdirectory of a project, warn on stderr that Pi started here would not load its file."""
    if paths:
        return complete(compile_layers([("file", p) for p in paths]))
    policy_note.emit(policy_note.warning_lines(policy_note.not_loaded(cwd)))
    return complete(load_layered(cwd))


def read_document(source: str) -> SourceDoc:
    """Read an event or state document (JSON or YAML) from a path or `-` (stdin)."""
    if source == "-":
        return parse_source(sys.stdin.read(), "<stdin>")
    return read_source(Path(source))


def explain_event(policy: CompiledPolicy, event: dict[str, Any], *, state: dict[str, Any],
                  values: dict[str, Any], errors: dict[str, str]) -> Explanation:
    """Evaluate with tracing; external signals without a value fail as 'not computed'."""
    outcomes = {name: SignalOutcome(error=text) for name, text in errors.items()}
    dry: list[str] = []
    for _ in range(MAX_PENDING):
        tracer = BufferTracer()
        decision = evaluate(policy, event, state=state, outcomes=outcomes, signal_values=values,
                            tracer=tracer)
        if decision.pending is None:
            break
        dry.append(decision.pending.name)
        outcomes[decision.pending.name] = SignalOutcome(error=DRY_RUN.format(name=decision.pending.name))
    return Explanation(event, decision, tracer.events, dry, policy.files, policy)


def load_event(source: str) -> dict[str, Any]:
    doc = read_document(source)
    return complete_event(doc.data, doc=doc, where=doc.path)


def load_state(source: str | None) -> dict[str, Any]:
    if source is None:
        return {}
    data = read_document(source).data
    if not isinstance(data, dict):
        raise SourceError([Diagnostic(INVALID_VALUE, "a state document must be a mapping", Span(source))])
    return data


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """`name=value` pairs; values are JSON when they parse as JSON, else strings."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise EventError([Diagnostic(INVALID_VALUE, f"expected NAME=VALUE, got {item!r}", None)])
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            out[name] = raw
    return out


def render_text(explanation: Explanation, policy: CompiledPolicy, *, mode: str, color: bool) -> str:
    event, decision = explanation.event, explanation.decision
    failure = policy_note.failure_line(policy.failure, str(event["type"]))
    lines = [f"event: {event['type']}{_event_summary(event)}",
             policy_note.policy_line(policy.files), *([failure] if failure else []), ""]
    events = [with_layer(e, policy) for e in filter_events(explanation.trace, mode)]
    lines += render_trace(events, color=color) or ["(no rule listens to this event type)"]
    lines.append("")
    for name, value in decision.signals.items():
        error = decision.signal_errors.get(name)
        lines.append(f"signal {name} = {show_value(value)}" + (
            f"  (failed: {error}; fallback used){_code_tag(explanation, name)}" if error else ""))
    for name, error in decision.signal_errors.items():
        if name not in decision.signals:
            lines.append(f"signal {name} failed: {error}{_code_tag(explanation, name)}")
    lines.append(_decision_line(decision, policy))
    for index, effect in enumerate(decision.effects, start=1):
        rule = policy.rule(effect.rule_id)
        where = f"{rule.file}:{rule.span.line}" if rule else ""
        describe = _describe(effect.action, effect.params)
        lines.append(f"  {index}. {describe}  <- rule {effect.rule_id} ({where})")
    for effect in decision.shadowed:
        lines.append(f"  shadow (not applied): {_describe(effect.action, effect.params)}  "
                     f"<- rule {effect.rule_id}")
    if decision.state_changed:
        lines.append("state after: " + show_value(decision.state, 200))
    for problem in decision.errors:
        lines.append(f"error: {problem.message} [{problem.code}]")
    return "\n".join(lines)


def with_layer(event: TraceEvent, policy: CompiledPolicy) -> TraceEvent:
    """A rule's entry line led by its layer: `[user] rule x: enter`, `[managed, locked] rule y: enter`."""
    rule = policy.rule(event.rule_id) if event.kind == "rule" and event.rule_id else None
    if rule is None:
        return event
    return replace(event, message=f"[{layer_label(rule)}] {event.message}")


def layer_label(rule: CompiledRule) -> str:
    return f"{rule.layer}, locked" if rule.locked else rule.layer


def render_json(explanation: Explanation) -> str:
    decision = explanation.decision
    body = {
        "event": explanation.event,
        "fired": list(decision.fired),
        "effects": [{"action": e.action, "params": e.params, "rule": e.rule_id,
                     "executor": _describe(e.action, e.params)} for e in decision.effects],
        "shadowed": [{"action": e.action, "params": e.params, "rule": e.rule_id} for e in decision.shadowed],
        "state": decision.state,
        "state_changed": decision.state_changed,
        "signals": decision.signals,
        "signal_errors": decision.signal_errors,
        "signal_codes": {name: _signal_code(decision, name) for name in decision.signal_errors},
        "dry_run_signals": explanation.dry_signals,
        "files": policy_note.files_json(explanation.files),
        "rules": rule_records(explanation.policy),
        "failure": (explanation.policy.failure if explanation.policy else {}).get(
            str(explanation.event["type"]), "open"),
        "errors": [e.to_dict() for e in decision.errors],
        "trace": [{"kind": t.kind, "rule": t.rule_id, "message": t.message,
                   "path": t.span.path if t.span else None, "line": t.span.line if t.span else None,
                   "depth": t.depth} for t in explanation.trace],
    }
    return json.dumps(body, indent=2, ensure_ascii=False, default=str)


def rule_records(policy: CompiledPolicy | None) -> list[dict[str, Any]]:
    """Every rule in force with its layer, where it is defined and whether it is locked."""
    rules = policy.rules if policy is not None else ()
    return [{"id": r.id, "layer": r.layer, "origin": r.origin, "locked": r.locked} for r in rules]


def _signal_code(decision: Decision, name: str) -> str:
    """The catalogued code of a signal's failure (RT502 for an external signal)."""
    return decision.signal_codes.get(name, SIGNAL_FAILED)


def _code_tag(explanation: Explanation, name: str) -> str:
    """` [CODE]` after a signal's failure; nothing for a signal a dry run did not compute."""
    if name in explanation.dry_signals:
        return ""
    return f" [{_signal_code(explanation.decision, name)}]"


def _describe(action: str, params: Any) -> str:
    from router.actions import ACTIONS

    return ACTIONS[action].describe(params)


def _decision_line(decision: Decision, policy: CompiledPolicy) -> str:
    if not decision.fired:
        return "decision: no rule fired; Pi keeps its native behaviour"
    rules = ", ".join(decision.fired)
    count = len(decision.effects)
    plural = "s" if count != 1 else ""
    return f"decision: {count} action{plural} from rule{'s' if len(decision.fired) > 1 else ''} {rules}"


def _event_summary(event: dict[str, Any]) -> str:
    keys = [k for k in ("text", "source", "reason", "name", "args", "kind", "title") if event.get(k)]
    tool = event.get("tool")
    parts = [f"{k}={show_value(event[k], 60)}" for k in keys]
    if isinstance(tool, dict):
        parts.append(f"tool={tool.get('name')}")
    model = event.get("model")
    if isinstance(model, dict) and model.get("ref"):
        parts.append(f"model={model['ref']}")
    return f" ({', '.join(parts)})" if parts else ""
