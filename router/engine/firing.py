"""Firing a rule: its actions rendered and collected, state written, a refusal undone (the
interpreter's `_Run` takes these methods from `Firing`); and what rendering a signal's request and
a failed guard's refusal give."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from router.actions import runner
from router.compile.ir import CompiledAction, CompiledPolicy, CompiledRule, CompiledSignal
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import ExpressionError
from router.engine.decision import Effect, SignalRequest
from router.lang.budget import BudgetExceeded
from router.lang.expr.evaluator import Evaluator
from router.lang.expr.expression import Template
from router.lang.expr.layered import Layered
from router.lang.expr.trees import map_leaves
from router.lang.truth import expression_truthy
from router.trust.capabilities import Confinement, Refused, check_rendered

if TYPE_CHECKING:
    from router.engine.scope import Signals
    from router.engine.trace import Tracer


class Firing:
    """The actions part of one evaluation (`_Run` in router/engine/interpreter.py has the rest)."""

    if TYPE_CHECKING:
        policy: CompiledPolicy
        state: dict[str, Any]
        signals: Signals
        tracer: Tracer | None
        effects: list[Effect]
        shadowed: list[Effect]
        fired: list[str]
        errors: list[Diagnostic]
        _bound: tuple[Layered, Evaluator] | None
        _failure: str | None

        def _evaluator(self, rule: CompiledRule) -> Evaluator: ...

        def _error(self, rule: CompiledRule, message: str, span: Span | None, code: str) -> None: ...

        def _trace(self, kind: str, rule: CompiledRule, message: str, *, depth: int = 0,
                   span: Span | None = None) -> None: ...

    def _fire(self, rule: CompiledRule) -> bool:
        """Render and collect the rule's actions; False when the rule is refused (as if it had
        not matched: none of its effects, and later rules of its group still run)."""
        self.fired.append(rule.id)
        if self.tracer:
            verdict = "fired (shadow: recorded, not applied)" if rule.shadow else "fired"
            self._trace("shadow" if rule.shadow else "fire", rule, f"rule {rule.id}: {verdict}", depth=1)
        evaluator, confinement = self._evaluator(rule), self.policy.confinement
        saved = (len(self.effects), len(self.shadowed), dict(self.state))
        try:
            return self._fire_actions(rule, evaluator, confinement, saved)
        except BudgetExceeded:  # the rule failed as a whole: none of its effects
            self._undo(rule, saved)
            raise

    def _fire_actions(self, rule: CompiledRule, evaluator: Evaluator, confinement: Confinement | None,
                      saved: tuple[int, int, dict[str, Any]]) -> bool:
        for action in rule.actions:
            try:
                params = _render(evaluator, action.params)
            except ExpressionError as exc:
                self._error(rule, f"action '{action.name}' skipped: {exc.message}", action.span, exc.code)
                if action.refuses and not rule.shadow:  # a guard's refusal is never dropped
                    self._undo(rule, saved)
                    self._failure = f"its {action.name} action failed: {exc.message} [{exc.code}]"
                    return False
                continue
            if action.confined and confinement is not None:
                try:
                    check_rendered(action.name, params, action.confined, confinement, resolve=False)
                except Refused as refused:
                    self._refuse(rule, refused, action.span, saved)
                    return False
            effect = Effect(action.name, params, rule.id, rule.shadow, action.confined,
                            confinement if action.confined else None)
            (self.shadowed if rule.shadow else self.effects).append(effect)
            if not rule.shadow and self._apply_state(action, params) and self._bound is not None:
                self._bound[0].forget()
            if self.tracer:
                self._trace("action", rule, f"then {action.name}: {action.describe(params)}",
                            depth=2, span=action.span)
        return True

    def _apply_state(self, action: CompiledAction, params: Any) -> bool:
        """Carry out an action that runs here (`set`, `unset`: its file's handler); whether it did."""
        runs, handler = runner(action.name)
        if runs != "interpreter":
            return False
        handler(self.state, params)
        self.signals.state_changed()
        return True

    def _refuse(self, rule: CompiledRule, refused: Refused, span: Span,
                saved: tuple[int, int, dict[str, Any]]) -> None:
        """Undo what the rule did in this evaluation: none of its effects, none of its state writes."""
        self._undo(rule, saved)
        self.errors.append(Diagnostic(refused.code, f"rule '{rule.id}' refused: {refused.message}", span,
                                      rule_id=rule.id))
        if self.tracer:
            self._trace("error", rule, f"refused [{refused.code}]: {refused.message}", depth=1, span=span)

    def _undo(self, rule: CompiledRule, saved: tuple[int, int, dict[str, Any]]) -> None:
        """None of the rule's effects of this evaluation, none of its state writes."""
        del self.effects[saved[0]:]
        del self.shadowed[saved[1]:]
        if rule.id in self.fired:
            self.fired.remove(rule.id)
        if self.state != saved[2]:
            self.state.clear()
            self.state.update(saved[2])
            self.signals.state_changed()


def _render(evaluator: Evaluator, tree: Any) -> Any:
    return map_leaves(tree, lambda value: evaluator.render(value) if isinstance(value, Template) else value)


def _signal_request(spec: CompiledSignal, evaluator: Evaluator, rule_id: str,
                    confinement: Confinement | None) -> SignalRequest:
    if spec.bindings:
        evaluator = Evaluator(Layered(evaluator.scope, lazy=dict(spec.bindings)))
    params = _render(evaluator, spec.request) or {}
    questions = {}
    for q in spec.questions:
        if q.when is not None and not expression_truthy(evaluator.value(q.when)):
            continue
        questions[q.name] = {"type": q.type, "instructions": q.instructions, "criteria": q.criteria}
    confined = spec.confined if confinement is not None else {}
    return SignalRequest(spec.name, spec.kind, params, questions, rule_id, confined,
                         confinement if confined else None)


def _refusal_params(action: str, reason: str) -> dict[str, Any]:
    """What a refusing action of a guard that failed closed carries: a block its reason, a rewritten
    result the reason in place of the result (withheld), a cancel nothing."""
    if action == "block":
        return {"reason": reason}
    if action == "rewrite_result":
        return {"text": reason, "is_error": True}
    return {}
