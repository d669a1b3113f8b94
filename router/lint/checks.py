"""The semantic lint checks (the syntax and name checks run while compiling)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any
from weakref import WeakKeyDictionary

from router.compile.ir import CompiledPolicy, CompiledRule
from router.diagnostics.code_names import (
    INLINE_EXAMPLE_FAILS,
    PATTERN_FROM_DATA,
    REGEX_MAY_BACKTRACK,
    RULE_NEVER_FIRES,
    SHADOW_RULE_WRITES_STATE,
    STATE_KEY_NEVER_WRITTEN,
    UNDECLARED_ENV_VAR,
    UNUSED_VAR_OR_SIGNAL,
    WRITES_OUTSIDE_PROJECT,
)
from router.diagnostics.diagnostic import Diagnostic, Severity, Span
from router.lang.expr.expression import Expression, Template, compile_template
from router.lang.expr.syntax import ExpressionSyntaxError
from router.lang.expr.trees import templates_in
from router.lang.query.query import Query
from router.lint import check
from router.lint import moved_keys as _moved_keys  # noqa: F401  (registers RT335)
from router.lint import readability as _readability  # noqa: F401  (registers RT332)
from router.lint.mistakes import always_true  # (registers RT317, RT318)
from router.testing.runner import run_examples

try:  # the regex parser is private; the check is skipped where it is missing
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    sre_parse = None


@check(RULE_NEVER_FIRES)
def unreachable_rules(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """A rule no event can reach: an earlier unconditional rule of its group stops every event."""
    stoppers: dict[tuple[str, str], CompiledRule] = {}
    for rule in policy.rules:
        blockers = [stoppers.get((rule.group, e)) for e in rule.on]
        if blockers and all(blockers):
            first = blockers[0]
            assert first is not None
            why = "has no condition" if not first.conditions else "has a condition that is always true"
            yield Diagnostic(
                RULE_NEVER_FIRES, f"rule '{rule.id}' can never fire: rule '{first.id}' "
                f"({first.file}:{first.span.line}) {why} and stops its group first",
                rule.span, rule_id=rule.id,
                help=f"give '{first.id}' a condition or `continue: true`, move this rule before it, "
                     "or put it in another `group:`")
        if always_true(rule) and not rule.continue_ and not rule.shadow:
            for event_type in rule.on:
                stoppers.setdefault((rule.group, event_type), rule)


@check(REGEX_MAY_BACKTRACK)
def slow_regexes(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Regex patterns (literals and `vars:` texts) with nested unbounded repeats, which can
    backtrack catastrophically."""
    for owner, span, rule_id, cond in _owned_expressions(policy):
        for kind, text in _pattern_args(cond):
            pattern = policy.vars.get(text) if kind == "var" else text if kind == "literal" else None
            if isinstance(pattern, str) and _nested_repeat(pattern):
                yield Diagnostic(
                    REGEX_MAY_BACKTRACK, f"regex {pattern!r} in {owner} repeats a repeated group and can "
                    "take exponential time on some inputs", span, Severity.WARNING, rule_id=rule_id,
                    help="remove the inner or outer repeat, e.g. write (ab)+ instead of (a+b?)+")


@check(PATTERN_FROM_DATA)
def data_regexes(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Regex patterns computed from evaluation data, which no load-time check can see."""
    for owner, span, rule_id, cond in _owned_expressions(policy):
        for kind, text in _pattern_args(cond):
            if kind == "data" or (kind == "var" and not isinstance(policy.vars.get(text), str)):
                shown = f"vars.{text}" if kind == "var" else text
                yield Diagnostic(
                    PATTERN_FROM_DATA,
                    f"the regex pattern `{shown}` in {owner} is computed while evaluating, so "
                    "it is not checked when the policy loads", span, Severity.WARNING, rule_id=rule_id,
                    help="write the pattern in the policy or in `vars:`; to find a piece of text use "
                    "contains() or count_keywords(); it runs within the evaluation budget (RT404)")


@check(INLINE_EXAMPLE_FAILS)
def failing_examples(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Inline `examples:` whose expectation does not hold."""
    for result in run_examples(policy):
        if not result.passed:
            yield Diagnostic(INLINE_EXAMPLE_FAILS,
                             f"{result.name} fails: {result.problems[0].splitlines()[0]}",
                             result.span, help="run `router test` for the full diff")


@check(UNUSED_VAR_OR_SIGNAL)
def unused_definitions(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Vars and signals that no rule, signal or template reads."""
    used = _used_paths(policy) | {("vars" if r.kind == "var" else "signals", r.name)
                                  for r in policy.refused if r.kind in ("var", "signal")}
    used |= _question_reads(policy)
    for f in policy.files:
        for name in f.policy.vars:
            if ("vars", name) not in used and f.layer != "pack":
                yield Diagnostic(UNUSED_VAR_OR_SIGNAL, f"var '{name}' is never used",
                                 f.doc.span(("vars", name), key=True),
                                 Severity.WARNING, help="remove it, or read it as vars." + name)
        for name in f.policy.signals:
            if ("signals", name) not in used and ("signal_errors", name) not in used:
                yield Diagnostic(UNUSED_VAR_OR_SIGNAL, f"signal '{name}' is never used",
                                 f.doc.span(("signals", name), key=True), Severity.WARNING)


def _question_reads(policy: CompiledPolicy) -> set[tuple[str, str]]:
    """The vars the templates of `provides.questions:` read."""
    reads = set()
    for value in policy.question_events.values():
        try:
            expression = compile_template(value).expression if isinstance(value, str) else None
        except ExpressionSyntaxError:
            continue
        reads |= {(p[0], p[1]) for p in (expression.paths if expression else ()) if len(p) > 1}
    return reads


@check(STATE_KEY_NEVER_WRITTEN)
def state_never_written(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """State keys read by a rule that no `set` action ever writes."""
    written: set[str] = set()
    for rule in policy.rules:
        for action in rule.actions:
            if action.name == "set" and isinstance(action.params, dict):
                for key in action.params:
                    parts = key.split(".")
                    written.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    for rule, exprs in _rules_expressions(policy):
        for path in _paths(exprs):
            if path[0] == "state" and len(path) > 1 and ".".join(path[1:]) not in written \
                    and path[1] not in written:
                yield Diagnostic(STATE_KEY_NEVER_WRITTEN,
                                 f"rule '{rule.id}' reads state.{'.'.join(path[1:])}, "
                                 "which no rule sets", rule.span, Severity.WARNING, rule_id=rule.id,
                                 help="it is always null; check the spelling against the `set:` actions")


@check(UNDECLARED_ENV_VAR)
def undeclared_env(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """`env.NAME` reads of variables the policy does not declare (they are always null)."""
    for rule, exprs in _rules_expressions(policy):
        for path in _paths(exprs):
            if path[0] == "env" and len(path) > 1 and path[1] not in policy.env_names:
                yield Diagnostic(UNDECLARED_ENV_VAR,
                                 f"rule '{rule.id}' reads env.{path[1]}, which the policy "
                                 "does not declare", rule.span, Severity.WARNING, rule_id=rule.id,
                                 help=f"add `env: [{path[1]}]` at the top level of the policy")


@check(SHADOW_RULE_WRITES_STATE)
def shadow_state_writes(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Shadow rules with `set`/`unset`: their writes are recorded but never applied."""
    for rule in policy.rules:
        if rule.shadow and any(a.name in ("set", "unset") for a in rule.actions):
            yield Diagnostic(SHADOW_RULE_WRITES_STATE,
                             f"shadow rule '{rule.id}' writes state, which is never applied",
                             rule.span, Severity.WARNING, rule_id=rule.id,
                             help="later rules will not see these values; remove `shadow` to apply them")


@check(WRITES_OUTSIDE_PROJECT)
def refused_capabilities(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """What a layer may not do (RT601-RT606): rules, signals, vars and entries left out of the policy."""
    for refusal in policy.refused:
        yield refusal.diagnostic()


def _rule_expressions(rule: CompiledRule) -> list[Expression | Query]:
    found: list[Expression | Query] = [c for c in (rule.match, rule.when) if c is not None]
    found += [e for _, e in rule.bindings]
    for action in rule.actions:
        found += [t.expression for t in _templates(action.params) if t.expression is not None]
    return found


RuleExpressions = list[tuple[CompiledRule, list[Expression | Query]]]
_EXPRESSIONS: WeakKeyDictionary[CompiledPolicy, RuleExpressions] = WeakKeyDictionary()


def _rules_expressions(policy: CompiledPolicy) -> RuleExpressions:
    """Each rule with its expressions, collected once per (immutable) policy for the five checks
    that read them; an entry goes with its policy."""
    found = _EXPRESSIONS.get(policy)
    if found is None:
        found = _EXPRESSIONS[policy] = [(rule, _rule_expressions(rule)) for rule in policy.rules]
    return found


def _paths(exprs: list[Expression | Query]) -> list[tuple[str, ...]]:
    return [p for e in exprs for p in e.paths]


def _templates(tree: Any) -> list[Template]:
    return templates_in(tree)


def _used_paths(policy: CompiledPolicy) -> set[tuple[str, str]]:
    exprs: list[Expression | Query | None] = [e for _, found in _rules_expressions(policy) for e in found]
    for sig in policy.signals.values():
        exprs += [sig.expr, sig.fallback, sig.transform, *(q.when for q in sig.questions)]
        exprs += [e for _, e in sig.bindings]
        exprs += [t.expression for t in _templates(sig.request)]
    used: set[tuple[str, str]] = set()
    for expr in exprs:
        if expr is not None:
            used.update((p[0], p[1]) for p in expr.paths if len(p) > 1)
    for rule in policy.rules:
        for example, _ in rule.examples:
            used.update(("signals", n) for n in example.signals)
    return used


_REGEX_FUNCTIONS = ("regex", "regex_find")


def _owned_expressions(policy: CompiledPolicy) -> Iterator[tuple[str, Span, str | None, Expression | Query]]:
    """Each rule and signal expression with what to call its owner, where, and the rule id."""
    for rule, conds in _rules_expressions(policy):
        for cond in conds:
            yield f"rule '{rule.id}'", rule.span, rule.id, cond
    for sig in policy.signals.values():
        for expr in (sig.expr, sig.fallback, sig.transform, *(e for _, e in sig.bindings)):
            if expr is not None:
                yield f"signal '{sig.name}'", sig.span, None, expr


def _pattern_args(cond: Expression | Query) -> Iterator[tuple[str, str]]:
    """The pattern of each regex()/regex_find() call: ("literal", text), ("var", name) for
    `vars.name`, or ("data", source) for anything computed while evaluating."""
    if not any(name in _REGEX_FUNCTIONS for name, _ in cond.calls):
        return
    if isinstance(cond, Query):
        yield from _jmespath_patterns(cond.parsed.parsed)
        return
    for node in ast.walk(cond.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _REGEX_FUNCTIONS and len(node.args) > 1):
            continue
        arg = node.args[1]
        if isinstance(arg, ast.Constant):  # a literal (compiled at load, or a bad type: RT402)
            pattern = getattr(arg.value, "pattern", arg.value)
            if isinstance(pattern, str):
                yield "literal", pattern
        elif isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "vars":
            yield "var", arg.attr
        else:
            yield "data", ast.unparse(arg)


def _jmespath_patterns(node: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(node, dict):
        return
    children = node.get("children") or []
    if node.get("type") == "function_expression" and node.get("value") in _REGEX_FUNCTIONS \
            and len(children) > 1:
        arg = children[1]
        fields = [c.get("value") for c in arg.get("children") or []]
        if arg.get("type") == "literal" and isinstance(arg.get("value"), str):
            yield "literal", arg["value"]
        elif arg.get("type") == "subexpression" and len(fields) == 2 and fields[0] == "vars" \
                and all(c.get("type") == "field" for c in arg["children"]):
            yield "var", str(fields[1])
        elif arg.get("type") == "field":
            yield "data", str(arg.get("value"))
        elif arg.get("type") != "literal":
            simple = arg.get("type") == "subexpression" and all(c.get("type") == "field"
                                                                  for c in arg["children"])
            yield "data", ".".join(map(str, fields)) if simple else "a computed value"
    for child in children:
        yield from _jmespath_patterns(child)


def _nested_repeat(pattern: str) -> bool:
    if sre_parse is None:
        return False
    try:
        tree = sre_parse.parse(pattern)
    except re.error:
        return False
    return _walk_repeats(tree, inside=False)


def _walk_repeats(items: Any, *, inside: bool) -> bool:
    for op, arg in items:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            _, high, sub = arg
            unbounded = high == sre_parse.MAXREPEAT or high > 100
            if unbounded and inside:
                return True
            if _walk_repeats(sub, inside=inside or unbounded):
                return True
        elif name == "SUBPATTERN":
            if _walk_repeats(arg[-1], inside=inside):
                return True
        elif name == "BRANCH" and any(_walk_repeats(b, inside=inside) for b in arg[1]):
            return True
    return False
