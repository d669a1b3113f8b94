"""`router eval EXPR --event FILE`: one `when` expression (or JMESPath `match`) against an event.

The scope is the interpreter's: the event's fields, `vars` (of the layered policy, when it
compiles), `state` (from --state) and `signals` (expression signals are computed; external
ones are not, as in a dry run). The value is printed as JSON; mistakes are located diagnostics.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

from router.commands.explain import load, load_event, load_state
from router.compile.ir import CompiledPolicy
from router.diagnostics.code_names import SIGNAL_FAILED, UNDEFINED_SIGNAL, UNDEFINED_VAR, UNKNOWN_NAME
from router.diagnostics.diagnostic import Diagnostic, Span, render_text
from router.diagnostics.errors import ExpressionError, RouterError
from router.diagnostics.suggest import did_you_mean
from router.engine.decision import SignalOutcome
from router.engine.interpreter import evaluation_scope
from router.engine.scope import SignalNeeded
from router.lang.expr.evaluator import run_expression
from router.lang.expr.expression import compile_expression
from router.lang.expr.syntax import ExpressionSyntaxError
from router.lang.query.query import compile_query

WHERE = "<expr>"
DRY = "external signal: not computed by eval (router explain --signal supplies values)"


def run(source: str, event_source: str, *, jmespath: bool, state: str | None) -> tuple[int, str]:
    try:
        event = load_event(event_source)
        state_doc = load_state(state)
    except RouterError as exc:
        return 1, render_text(exc.diagnostics)
    policy = _quiet_policy()
    scope = build_scope(event, state_doc, policy)
    try:
        value = evaluate_query(source, scope) if jmespath else evaluate_expression(source, scope)
    except _Failed as failed:
        return 1, render_text([failed.diagnostic])
    return 0, json.dumps(value, indent=2, ensure_ascii=False, default=str)


class _Failed(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        self.diagnostic = diagnostic


def build_scope(event: dict[str, Any], state: dict[str, Any],
                policy: CompiledPolicy | None) -> dict[str, Any]:
    """What `when` and `match` read, as the interpreter builds it."""
    if policy is not None:
        outcomes = {name: SignalOutcome(error=DRY) for name, spec in policy.signals.items() if spec.external}
        return evaluation_scope(policy, event, state=state, outcomes=outcomes)
    return {**event, "vars": {}, "state": state, "signals": {}, "signal_errors": {}}


def evaluate_expression(source: str, scope: dict[str, Any]) -> Any:
    try:
        expression = compile_expression(source)
    except ExpressionSyntaxError as exc:
        raise _Failed(Diagnostic(exc.code, exc.message, Span(WHERE, 1, exc.offset + 1))) from None
    unknown = sorted(expression.names - set(scope))
    if unknown:
        name = unknown[0]
        raise _Failed(Diagnostic(UNKNOWN_NAME, f"unknown name '{name}'",
                                 Span(WHERE, 1, source.find(name) + 1),
                                 help=did_you_mean(name, scope) or f"write '{name}' in quotes for a string"))
    _check_paths(expression.paths, source, scope)
    try:
        return _plain(run_expression(expression, scope))
    except ExpressionError as exc:
        raise _Failed(Diagnostic(exc.code, exc.message, Span(WHERE))) from None
    except SignalNeeded as need:
        raise _Failed(Diagnostic(SIGNAL_FAILED, f"signal '{need.name}': {DRY}", Span(WHERE))) from None


def evaluate_query(source: str, scope: dict[str, Any]) -> Any:
    try:
        query = compile_query(source)
    except ExpressionSyntaxError as exc:
        raise _Failed(Diagnostic(exc.code, exc.message, Span(WHERE, 1, exc.offset + 1))) from None
    _check_paths(query.paths, source, scope)
    try:
        return _plain(query.search(scope))
    except ExpressionError as exc:
        raise _Failed(Diagnostic(exc.code, exc.message, Span(WHERE))) from None
    except SignalNeeded as need:
        raise _Failed(Diagnostic(SIGNAL_FAILED, f"signal '{need.name}': {DRY}", Span(WHERE))) from None


_DEFINED = {"vars": (UNDEFINED_VAR, "undefined var"), "signals": (UNDEFINED_SIGNAL, "undefined signal")}


def _check_paths(paths: tuple[tuple[str, ...], ...], source: str, scope: dict[str, Any]) -> None:
    """A `vars.` or `signals.` key the policy does not define fails, with the closest one (as lint)."""
    for path in paths:
        if len(path) < 2 or path[0] not in _DEFINED:
            continue
        defined: Any = scope.get(path[0])
        names = [str(k) for k in defined] if hasattr(defined, "keys") else []
        if path[1] in names:
            continue
        code, what = _DEFINED[path[0]]
        dotted = f"{path[0]}.{path[1]}"
        listed = ", ".join(sorted(names)) or "none"
        raise _Failed(Diagnostic(code, f"{what} '{dotted}'", Span(WHERE, 1, max(source.find(dotted), 0) + 1),
                                 help=did_you_mean(path[1], names) or f"the policy defines: {listed}"))


def _quiet_policy() -> CompiledPolicy | None:
    """The layered policy for `vars` and `signals`; its notes and errors are not eval's business."""
    with redirect_stderr(io.StringIO()):
        return load([], cwd=Path.cwd()).policy


def _plain(value: Any) -> Any:
    """Mappings (signals) as dicts, tuples as lists, for JSON."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
