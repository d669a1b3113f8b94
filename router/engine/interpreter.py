"""The interpreter: pure evaluation of ordered rules against one normalized event.

(policy, event, state, signal outcomes) -> Decision (+ trace). Rules are taken in order from the
event-type index. Within a group the first rule that matches decides, unless it says
`continue: true`; groups are independent. A `shadow` rule is evaluated and recorded but never
applied and never stops its group. State writes (`set`/`unset`) are visible to later rules of the
same event. When a rule needs an external signal that has no outcome yet, the decision comes back
`pending` with the request to compute; evaluating again with the outcome finishes it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from jmespath.exceptions import JMESPathError

from router.compile.ir import CompiledPolicy, CompiledRule
from router.diagnostics.code_names import BUDGET_EXCEEDED
from router.diagnostics.diagnostic import Diagnostic, Severity, Span
from router.diagnostics.errors import ExpressionError
from router.engine import rule_index
from router.engine.decision import Decision, Effect, SignalOutcome
from router.engine.firing import Firing, _refusal_params, _signal_request
from router.engine.scope import SignalErrors, SignalNeeded, Signals, lookup, show_value
from router.engine.signal_memo import SignalMemo
from router.engine.trace import TraceEvent, Tracer
from router.engine.vars_memo import VarsMemo
from router.lang.budget import DRY_RUN_BUDGET, Budget, BudgetExceeded
from router.lang.expr.evaluator import EVALUATION_FAILURES, Evaluator, expression_error, python_error
from router.lang.expr.expression import Expression
from router.lang.expr.layered import Layered
from router.lang.query.query import Query
from router.lang.truth import expression_truthy, match_truthy


def evaluate(
    policy: CompiledPolicy,
    event: Mapping[str, Any],
    *,
    state: Mapping[str, Any] | None = None,
    outcomes: Mapping[str, SignalOutcome] | None = None,
    signal_values: Mapping[str, Any] | None = None,
    tracer: Tracer | None = None,
    budget: Budget | None = None,
    vars_memo: VarsMemo | None = None,
    signal_memo: SignalMemo | None = None,
) -> Decision:
    """Evaluate `event` against the policy's rules for its type.

    `budget` bounds the time and size of the evaluation (a dry run's when not given; the server
    passes one budget, from its event deadline, to every evaluation of the same event). When it
    runs out, the rules that fired keep their effects, guards fail closed, the rest are skipped and
    the decision carries an RT404 warning.
    `vars_memo` remembers resolved vars across evaluations (the sidecar keeps one per policy);
    `signal_memo` expression signals, by what each reads (the replay runner keeps one per policy).
    `outcomes` is read only through `get`, and only when a rule reads the signal: a mapping that makes
    an outcome on demand (the replay's) answers each signal where the evaluation needs it.
    """
    run = _Run(policy, event, state or {}, {} if outcomes is None else outcomes, signal_values or {}, tracer,
               vars_memo or policy, signal_memo)
    with (budget or Budget(DRY_RUN_BUDGET)).running() as active:
        return run.decide(active)


def evaluation_scope(policy: CompiledPolicy, event: Mapping[str, Any], *,
                     state: Mapping[str, Any] | None = None,
                     outcomes: Mapping[str, SignalOutcome] | None = None) -> dict[str, Any]:
    """The scope a rule's `when` reads for `event`: event fields, vars, state, signals (`router eval`)."""
    return _Run(policy, event, state or {}, outcomes or {}, {}, None, policy).scope


class _Run(Firing):
    """The working data of one evaluation (never shared between evaluations)."""

    def __init__(self, policy: CompiledPolicy, event: Mapping[str, Any], state: Mapping[str, Any],
                 outcomes: Mapping[str, SignalOutcome], values: Mapping[str, Any],
                 tracer: Tracer | None, resolver: VarsMemo | CompiledPolicy,
                 memo: SignalMemo | None = None) -> None:
        self.policy = policy
        self.resolver = resolver
        self.event, self.values = event, values
        self.event_type = str(event.get("type", ""))
        self.initial_state = state
        self.state: dict[str, Any] = dict(state)
        self.memo = memo
        self.signals = Signals(policy, outcomes, values, self, memo)
        self.scope: dict[str, Any] = dict(event)
        self.scope["vars"] = resolver.vars_for(event.get("env") or {})
        self.scope["state"] = self.state
        self.scope["signals"] = self.signals
        self.scope["signal_errors"] = SignalErrors(self.signals)
        self.tracer = tracer
        self.effects: list[Effect] = []
        self.shadowed: list[Effect] = []
        self.fired: list[str] = []
        self.errors: list[Diagnostic] = []

    @functools.cached_property
    def evaluator(self) -> Evaluator:
        """The simpleeval-based evaluator, made only when templates or fallbacks need it."""
        return Evaluator(self.scope)

    @functools.cached_property
    def sandbox(self) -> dict[str, Any]:
        """The scope of a project layer's rules and signals: only the environment variables the
        user grants (`project_env`), and vars resolved from those alone."""
        confinement = self.policy.confinement
        granted = confinement.env if confinement is not None else frozenset()
        env = self.event.get("env") or {}
        allowed = {k: v for k, v in env.items() if k in granted} if isinstance(env, Mapping) else {}
        scope = dict(self.scope)  # state and signals are shared
        scope["env"] = allowed
        scope["vars"] = self.resolver.vars_for(allowed)
        return scope

    @functools.cached_property
    def sandbox_evaluator(self) -> Evaluator:
        return Evaluator(self.sandbox)

    def _scope(self, rule: CompiledRule) -> dict[str, Any]:
        return self.sandbox if rule.sandboxed else self.scope

    def _evaluator(self, rule: CompiledRule) -> Evaluator:
        if rule.bindings and self._bound is not None:
            return self._bound[1]
        return self.sandbox_evaluator if rule.sandboxed else self.evaluator

    _bound: tuple[Layered, Evaluator] | None = None  # the `let:` scope of the rule being evaluated

    def _bind(self, rule: CompiledRule) -> Mapping[str, Any]:
        """The scope of `when` and templates: the rule's scope with its `let:` bindings on top."""
        base = self._scope(rule)
        if not rule.bindings:
            self._bound = None
            return base
        layered = Layered(base, lazy=rule.lazy)
        self._bound = (layered, Evaluator(layered))
        return layered

    def decide(self, budget: Budget) -> Decision:
        """Each rule in order, with its own allowance of the budget (Budget.begin_rule). A rule
        that fails (an error, its allowance used up) fails alone, visibly; a guard (a rule that
        can refuse: `block`, `cancel`) that fails is treated as matched and refuses (fails
        closed). Once the event's budget is used up, the remaining guards refuse without being
        evaluated and the other rules are skipped (fail open), with one warning."""
        self.budget = budget
        decided: dict[str, str] = {}
        tracer = self.tracer
        spent: str | None = None  # why the event's budget is used up, once it is
        skipped: list[CompiledRule] = []
        for rule in self._rules():
            if rule.group in decided:
                if tracer:
                    self._trace("skip", rule, f"rule {rule.id}: skipped, group '{rule.group}' "
                                f"decided by rule {decided[rule.group]}")
                continue
            if spent is None and budget.exhausted():
                spent = budget.event_message()
            if spent is not None:
                if rule.guard and not rule.shadow:
                    matched = self._fail_closed(rule, f"the event's evaluation budget ran out ({spent}) "
                                                "before it was evaluated", evaluated=False)
                else:
                    skipped.append(rule)
                    if tracer:
                        self._trace("skip", rule, f"rule {rule.id}: skipped, the event's evaluation "
                                    "budget ran out (it cannot block)")
                    continue
            else:
                outcome = self._evaluate_rule(rule, budget)
                if outcome is None:  # a signal is needed: the decision is pending
                    return self._pending_decision
                matched = outcome
                if self._failure is not None and budget.exhausted():
                    spent = budget.event_message()
            if matched and not rule.shadow and not rule.continue_:
                decided[rule.group] = rule.id
        if skipped:
            self._skipped(skipped, spent or "")
        return self._decision()

    _failure: str | None = None  # why the rule being evaluated failed (an error, its budget)
    _pending_decision: Decision

    def _evaluate_rule(self, rule: CompiledRule, budget: Budget) -> bool | None:
        """Whether the rule matched and fired (a failed guard: it refused); None when a signal
        must be computed first (`_pending_decision` holds the decision)."""
        self._failure = None
        run: Any = None
        budget.begin_rule()
        try:
            if self.tracer is None and not rule.bindings:  # the hot path: no tracing, conditions inline
                matched = True
                scope = self.sandbox if rule.sandboxed else self.scope
                try:
                    for run, python_truth in rule.runs:
                        value = run(scope)
                        if value is True:
                            continue
                        # lang/truth.py's two rules, inlined on the hot path
                        if value is None or value is False or (not value if python_truth else (
                                value == "" or value == [] or value == {})):
                            matched = False
                            break
                except _EVAL_ERRORS:  # evaluate again, slowly, to record the error
                    matched = self._matches(rule)
            else:
                matched = self._matches(rule)
            if matched:
                matched = self._fire(rule)
        except SignalNeeded as need:
            try:
                self._pending_decision = self._pending(need.name, rule)
                return None
            except BudgetExceeded as exc:  # rendering the signal's request ran out
                self._exhausted(rule, exc, None)
                matched = False
        except BudgetExceeded as exc:
            self._exhausted(rule, exc, run)
            matched = False
        finally:
            budget.end_rule()
        if self._failure is not None and rule.guard and not rule.shadow:
            return self._fail_closed(rule, self._failure)
        return matched

    def _fail_closed(self, rule: CompiledRule, cause: str, *, evaluated: bool = True) -> bool:
        """A guard that could not be checked refuses: each of its refusing actions, with a reason
        that names the rule, the cause and the way out; its other actions are not carried out."""
        where = f"{rule.file}:{rule.span.line}"
        reason = (f"Blocked by policy: rule '{rule.id}' ({where}) could not be checked ({_short(cause)}), "
                  "so it blocks. Fix the rule (`router explain` shows why), or give it `shadow: true` "
                  "to try it without blocking.")
        self.fired.append(rule.id)
        for action in rule.actions:
            if action.refuses:
                self.effects.append(Effect(action.name, _refusal_params(action.name, reason), rule.id))
        if evaluated and self.errors and self.errors[-1].rule_id == rule.id:  # its failure, told already
            last = self.errors[-1]
            self.errors[-1] = replace(last, message=f"{last.message}; the rule can block, so it failed "
                                      "closed and blocks")
        else:
            self.errors.append(Diagnostic(BUDGET_EXCEEDED, f"rule '{rule.id}' ({where}) failed closed: "
                                          f"{_short(cause)}", rule.span, Severity.WARNING, rule_id=rule.id))
        if self.tracer:
            self._trace("error", rule, f"rule {rule.id}: failed closed, it can block: {_short(cause)}",
                        depth=1)
        return True

    def _skipped(self, rules: list[CompiledRule], spent: str) -> None:
        """One warning for the rules that cannot block, skipped once the event's budget ran out."""
        names = ", ".join(f"'{r.id}'" for r in rules[:5]) + \
            (f" and {len(rules) - 5} more" if len(rules) > 5 else "")
        first = rules[0]
        self.errors.append(Diagnostic(
            BUDGET_EXCEEDED, f"rule '{first.id}' ({first.file}:{first.span.line}) and what follows: {spent}; "
            f"{len(rules)} rule(s) that cannot block were skipped for this event ({names})",
            first.span, Severity.WARNING, rule_id=first.id))

    def _rules(self) -> Sequence[CompiledRule]:
        """The event type's rules in order; without a tracer, only those the index cannot rule out."""
        rules = self.policy.by_event.get(self.event_type, ())
        if self.tracer is not None or not rule_index.enabled:
            return rules
        index = rule_index.index_for(self.policy, self.event_type)
        return rules if index is None else index.candidates(self.scope, lambda: self.sandbox)

    def _decision(self) -> Decision:
        return Decision(
            event_type=self.event_type, effects=tuple(self.effects), shadowed=tuple(self.shadowed),
            fired=tuple(self.fired), state=self.state, state_changed=self.state != self.initial_state,
            errors=tuple(self.errors), signals=dict(self.signals.values),
            signal_errors=dict(self.signals.errors), signal_codes=dict(self.signals.codes),
        )

    # --- conditions ---------------------------------------------------------------------------

    def _matches(self, rule: CompiledRule) -> bool:
        if self.tracer:
            self._trace("rule", rule, f"rule {rule.id}: enter" + (" (shadow)" if rule.shadow else ""))
        base = self._scope(rule)
        bound = self._bind(rule)
        for kind, cond, run in rule.conditions:
            try:
                value = run(base if kind == "match" else bound)
            except BudgetExceeded as exc:
                exc.source = exc.source or cond.source
                raise
            except _EVAL_ERRORS as exc:
                error = _failure(exc, cond.source)
                self._error(rule, f"{kind} failed: {error.message}",
                            rule.match_span if kind == "match" else rule.when_span, error.code)
                self._failure = f"its {kind} failed: {error.message} [{error.code}]"
                return False
            if not match_truthy(value):  # `when` conditions are already booleans (router/compile/ir.py)
                if self.tracer:
                    self._trace_condition(rule, kind, cond, value, False)
                return False
            if self.tracer:
                self._trace_condition(rule, kind, cond, value, True)
        return True

    def _trace_condition(self, rule: CompiledRule, kind: str, cond: Query | Expression,
                         value: Any, ok: bool) -> None:
        span = rule.match_span if kind == "match" else rule.when_span
        self._trace("cond", rule, f"{kind} {cond.source}: {'true' if ok else 'false'}"
                    + ("" if isinstance(value, bool) else f" ({show_value(value)})")
                    + self._bindings(rule, cond), depth=1, span=span)
        if ok:
            return
        parts = cond.conjuncts()
        for part in parts if len(parts) > 1 else ():
            try:
                part_value = part.search(self._scope(rule)) if isinstance(part, Query) \
                    else self._evaluator(rule).value(part)
            except (ExpressionError, SignalNeeded):
                continue
            if not (match_truthy if isinstance(part, Query) else expression_truthy)(part_value):
                self._trace("miss", rule, f"first miss: {part.source}{self._bindings(rule, part)}",
                            depth=1, span=span)
                return

    def _bindings(self, rule: CompiledRule, cond: Query | Expression) -> str:
        shown = []
        for path in dict.fromkeys(cond.paths):
            try:
                scope = self._bound[0] if rule.bindings and self._bound and not isinstance(cond, Query) \
                    else self._scope(rule)
                shown.append(f"{'.'.join(path)}={show_value(lookup(scope, path), 40)}")
            except SignalNeeded:
                shown.append(f"{'.'.join(path)}=<pending>")
        return f"  [{', '.join(shown)}]" if shown else ""

    # --- pending signals and errors -----------------------------------------------------------

    def _pending(self, name: str, rule: CompiledRule) -> Decision:
        spec = self.policy.signals[name]
        try:
            request = _signal_request(spec, self.sandbox_evaluator if spec.sandboxed else self.evaluator,
                                      rule.id, self.policy.confinement)
        except SignalNeeded as need:
            return self._pending(need.name, rule)
        except ExpressionError as exc:
            outcomes = {**self.signals.outcomes, name: SignalOutcome(error=f"request failed: {exc.message}")}
            return _Run(self.policy, self.event, self.initial_state, outcomes, self.values,
                        self.tracer, self.resolver, self.memo).decide(self.budget)
        if self.tracer:
            self._trace("pending", rule, f"signal {name}: waiting for the executor ({spec.kind})", depth=1)
        return Decision(event_type=self.event_type, state=dict(self.initial_state), pending=request,
                        signals=dict(self.signals.values), signal_errors=dict(self.signals.errors),
                        signal_codes=dict(self.signals.codes))

    def _exhausted(self, rule: CompiledRule, exc: BudgetExceeded, run: Any) -> None:
        """Record RT404 for the rule that was running (`run`: the condition's closure, if known)."""
        runs = [r for r, _ in rule.runs]
        if not exc.source and run in runs:
            exc.source = _source(rule, rule.conditions[runs.index(run)][0])
        where = f" (in `{_short(exc.source)}`)" if exc.source else ""
        message = f"{exc.message}{where}; the rule failed"
        self._failure = f"{exc.message} [{exc.code}]"
        self.errors.append(Diagnostic(exc.code, f"rule '{rule.id}' ({rule.file}:{rule.span.line}): {message}",
                                      rule.span, Severity.WARNING, rule_id=rule.id))
        if self.tracer:
            self._trace("error", rule, f"error: {message} [{exc.code}]", depth=1)

    def _error(self, rule: CompiledRule, message: str, span: Span | None, code: str) -> None:
        """Record an evaluation error with the code its raiser gave (RT401, RT402, RT403 …)."""
        self.errors.append(Diagnostic(code, f"rule '{rule.id}': {message}", span or rule.span,
                                      rule_id=rule.id))
        if self.tracer:
            self._trace("error", rule, f"error: {message} [{code}]", depth=1, span=span)

    def _trace(self, kind: str, rule: CompiledRule, message: str, *, depth: int = 0,
               span: Span | None = None) -> None:
        assert self.tracer is not None
        self.tracer.emit(TraceEvent(kind, rule.id, span or rule.span, message, depth=depth))


_EVAL_ERRORS = (*EVALUATION_FAILURES, JMESPathError)  # simpleeval's own limits too (IterableTooLong)


def _failure(exc: BaseException, source: str) -> ExpressionError:
    """The ExpressionError, with its catalogued code, of a condition's closure that raised `exc`:
    the code the raiser carries (RT402 a helper function, RT403 a limit), else RT401."""
    if isinstance(exc, JMESPathError):
        return ExpressionError(python_error(exc), source=source)
    return expression_error(exc, source)


def _source(rule: CompiledRule, kind: str) -> str:
    cond = rule.match if kind == "match" else rule.when
    return cond.source if cond is not None else ""


def _short(source: str, limit: int = 200) -> str:
    text = " ".join(source.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
