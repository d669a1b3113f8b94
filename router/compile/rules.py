"""One rule compiled: its `match`, `when`, `let:` bindings and actions, every expression checked
(event types, actions and their parameters, functions and arity, names and field paths)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ValidationError

from router.actions import ACTIONS
from router.compile.context import Context, Entry
from router.compile.ir import (
    CompiledAction,
    CompiledRule,
)
from router.compile.readable import (
    command_match,
    command_problems,
    compile_bindings,
    unused_bindings,
    with_defaults,
)
from router.diagnostics.code_names import (
    ACTION_WITHOUT_EFFECT,
    BAD_LET_BINDING,
    INVALID_ACTION_PARAMS,
    UNDEFINED_SIGNAL,
    UNDEFINED_VAR,
    UNKNOWN_ACTION,
    UNKNOWN_EVENT_FIELD,
    UNKNOWN_EVENT_TYPE,
    UNKNOWN_FUNCTION,
    UNKNOWN_NAME,
    WRONG_ARGUMENT_COUNT,
)
from router.diagnostics.diagnostic import Span, has_errors
from router.diagnostics.suggest import did_you_mean
from router.events.catalog import EVENT_TYPES
from router.events.fields import check_path, events_with_field, scope_tree
from router.lang.expr.expression import Expression, Template, compile_expression, compile_template
from router.lang.expr.syntax import ExpressionSyntaxError
from router.lang.expr.trees import templates_in
from router.lang.functions import FUNCTIONS
from router.lang.query.query import JMESPATH_ARITY, JMESPATH_BUILTINS, Query, compile_query
from router.load.managed import MANAGED
from router.load.model import Rule
from router.load.source import KeyPath, SourceDoc, format_key_path
from router.load.validation import validation_diagnostics
from router.trust.capabilities import (
    is_confined,
)


def compile_rule(entry: Entry, order: int, ctx: Context) -> CompiledRule | None:
    rule, doc = entry.rule, entry.file.doc
    base: KeyPath = ("rules", entry.index)
    for i, event_type in enumerate(rule.on):
        if event_type not in EVENT_TYPES:
            ctx.error(UNKNOWN_EVENT_TYPE, f"unknown event type '{event_type}' in rule '{rule.id}'",
                      doc.span((*base, "on", i)),
                      help=did_you_mean(event_type, EVENT_TYPES)
                      or f"expected one of: {', '.join(EVENT_TYPES)}",
                      rule_id=rule.id)
    tree = scope_tree(rule.on, var_names=ctx.var_names, signal_names=ctx.signal_names)
    reads = ctx.reads.setdefault(("rule", rule.id), [])
    read: set[str] = set()
    bindings = rule_bindings(rule.let, base, tree, doc, ctx, rule.id, reads, read=read)
    checker = Checker(ctx, tree, doc, rule.id, extra_names=frozenset(rule.let), reads=reads)
    match = _rule_match(rule, base, doc, checker)
    when = checker.expression(rule.when, (*base, "when")) if rule.when is not None else None
    defaults = entry.file.policy.defaults
    actions = tuple(a for i, item in enumerate(rule.do)
                    if (a := _compile_action(item, (*base, "do", i), rule, doc, checker, defaults))
                    is not None)
    used = read | names_read([when, *template_expressions([a.params for a in actions])])
    ctx.diagnostics.extend(unused_bindings(kept_bindings(rule.let, bindings), used, doc, base, rule.id))
    examples = tuple((ex, doc.span((*base, "examples", i))) for i, ex in enumerate(rule.examples))
    span = doc.span(base)
    return CompiledRule(
        id=rule.id, index=order, group=entry.group, on=tuple(rule.on), match=match, when=when,
        actions=actions, continue_=rule.continue_, shadow=rule.shadow, span=span,
        file=entry.file.path, key_path=format_key_path(base), description=rule.description,
        examples=examples,
        match_span=doc.span((*base, "command" if rule.command is not None else "match"))
        if rule.match is not None or rule.command is not None else None,
        when_span=doc.span((*base, "when")) if rule.when is not None else None,
        layer=entry.file.layer, sandboxed=is_confined(entry.file.layer), bindings=tuple(bindings),
        origin=f"{entry.file.path}:{span.line}", locked=rule.locked and entry.file.layer == MANAGED,
    )


def _rule_match(rule: Rule, base: KeyPath, doc: SourceDoc, checker: Checker) -> Query | None:
    """The rule's match: its `match`, and-ed with the expansion of its `command:` shorthand."""
    if rule.command is None:
        return checker.query(rule.match, (*base, "match")) if rule.match is not None else None
    problems = command_problems(rule.command, rule.on, set(checker.ctx.commands), doc, base, rule.id)
    checker.ctx.diagnostics.extend(problems)
    if has_errors(problems):
        return None
    source = command_match(rule.command)
    if rule.match is not None:
        own = checker.query(rule.match, (*base, "match"))
        if own is None:
            return None
        source = f"({source}) && ({rule.match})"
    return checker.query(source, (*base, "command"))


def rule_bindings(let: dict[str, str], base: KeyPath, tree: dict[str, Any], doc: SourceDoc, ctx: Context,
              rule_id: str | None, reads: list[tuple[Span, tuple[str, ...]]],
              extra: frozenset[str] = frozenset(), read: set[str] | None = None,
              ) -> list[tuple[str, Expression]]:
    """The compiled `let:` bindings of a rule or signal (their names hide nothing of `tree`)."""
    if not let:
        return []
    taken = {name: "a name of this scope (an event field, vars, state, signals, env, …)" for name in tree}
    taken.update({name: "a name of this signal's transform" for name in extra})

    def compile_one(source: str, key_path: KeyPath, names: frozenset[str]) -> Expression | None:
        return Checker(ctx, tree, doc, rule_id, extra_names=names, reads=reads).expression(source, key_path)

    compiled, problems = compile_bindings(let, base, taken, doc, compile_one, rule_id, read)
    ctx.diagnostics.extend(problems)
    return compiled


def kept_bindings(let: dict[str, str], bindings: list[tuple[str, Expression]]) -> dict[str, str]:
    """The bindings that compiled (a rejected one is not also reported as unused)."""
    names = {name for name, _ in bindings}
    return {name: source for name, source in let.items() if name in names}


def names_read(exprs: Iterable[Expression | None]) -> set[str]:
    return {n for e in exprs if e is not None for n in e.names}


def _compile_action(item: dict[str, Any], key_path: KeyPath, rule: Rule, doc: SourceDoc,
                    checker: Checker, defaults: dict[str, dict[str, Any]] | None = None,
                    ) -> CompiledAction | None:
    ctx, span = checker.ctx, doc.span(key_path)
    if not isinstance(item, dict) or len(item) != 1:
        ctx.error(INVALID_ACTION_PARAMS, f"an action is a mapping with one key (rule '{rule.id}')", span,
                  help="write `- notify: hello` or `- tools: {only: [read]}`", rule_id=rule.id)
        return None
    name, raw = next(iter(item.items()))
    spec = ACTIONS.get(name)
    if spec is None:
        ctx.error(UNKNOWN_ACTION, f"unknown action '{name}' in rule '{rule.id}'",
                  doc.span((*key_path, name), key=True),
                  help=did_you_mean(name, ACTIONS) or f"expected one of: {', '.join(sorted(ACTIONS))}",
                  rule_id=rule.id)
        return None
    if spec.events is not None and not set(rule.on) & spec.events:
        ctx.error(ACTION_WITHOUT_EFFECT,
                  f"action '{name}' has no effect on {', '.join(rule.on)} events (rule '{rule.id}')",
                  doc.span((*key_path, name), key=True), rule_id=rule.id,
                  help=f"'{name}' applies to: {', '.join(sorted(spec.events))}")
    params = {spec.shorthand: raw} if spec.shorthand and not isinstance(raw, dict) else raw
    if params is None:
        params = {}
    params, defaulted = with_defaults(params, (defaults or {}).get(name))
    try:
        validated = spec.params.model_validate(params)
    except ValidationError as exc:
        if spec.shorthand and not isinstance(raw, dict):
            ctx.error(INVALID_ACTION_PARAMS, f"invalid shorthand for action '{name}' (rule '{rule.id}'): "
                      f"{exc.errors()[0]['msg'].lower()}", doc.span((*key_path, name)), rule_id=rule.id)
        else:
            found = validation_diagnostics(exc, doc, spec.params, base=(*key_path, name))
            ctx.diagnostics.extend(replace(d, code=INVALID_ACTION_PARAMS, rule_id=rule.id) for d in found)
        return None
    dumped = validated.model_dump()
    if not defaulted or not isinstance(dumped, dict):
        return CompiledAction(name, checker.params(dumped, (*key_path, name)), span, refuses=spec.refuses)
    tree = {k: checker.params(v, ("defaults", name, k) if k in defaulted else (*key_path, name, k))
            for k, v in dumped.items()}
    return CompiledAction(name, tree, span, defaulted=defaulted, refuses=spec.refuses)


_PATH_PROBLEMS = {"vars": (UNDEFINED_VAR, "undefined var"), "signals": (UNDEFINED_SIGNAL, "undefined signal"),
                  "signal_errors": (UNDEFINED_SIGNAL, "undefined signal")}


class Checker:
    """Compiles expressions of one rule (or signal) and checks names, paths and functions."""

    def __init__(self, ctx: Context, tree: dict[str, Any], doc: SourceDoc, rule_id: str | None,
                 *, extra_names: frozenset[str] = frozenset(),
                 reads: list[tuple[Span, tuple[str, ...]]] | None = None) -> None:
        self.ctx, self.tree, self.doc, self.rule_id = ctx, tree, doc, rule_id
        self.extra_names = extra_names
        self.reads = reads  # (where, path) of every field path read, for the capability analysis
        self._known: frozenset[str] | None = None

    @property
    def known(self) -> frozenset[str]:
        """The names of this scope and the extra names (made once per checker)."""
        if self._known is None:
            self._known = frozenset(self.tree) | self.extra_names
        return self._known

    def _record(self, paths: Iterable[tuple[str, ...]], key_path: KeyPath) -> None:
        if self.reads is not None:
            span = self.doc.span(key_path)
            self.reads.extend((span, p) for p in paths)

    def _where(self, key_path: KeyPath) -> str:
        label = f" (rule '{self.rule_id}')" if self.rule_id else ""
        return f"{format_key_path(key_path)}{label}"

    def query(self, source: str, key_path: KeyPath) -> Query | None:
        try:
            query = compile_query(source)
        except ExpressionSyntaxError as exc:
            self._syntax(exc, key_path)
            return None
        self._check_calls(query.calls, key_path, jmespath=True)
        self._check_paths(query.paths, key_path, jmespath=True)
        self._record(query.paths, key_path)
        return query

    def expression(self, source: str, key_path: KeyPath) -> Expression | None:
        try:
            expr = compile_expression(source)
        except ExpressionSyntaxError as exc:
            self._syntax(exc, key_path)
            return None
        self._check_expression(expr, key_path)
        return expr

    def template(self, source: str, key_path: KeyPath) -> Template | str | None:
        try:
            template = compile_template(source)
        except ExpressionSyntaxError as exc:
            self._syntax(exc, key_path)
            return None
        if template.expression is None:
            return source
        if template.block is not None:
            self._check_loop_names(template.block.loop_names, key_path)
        self._check_expression(template.expression, key_path)
        return template

    def _check_loop_names(self, names: Iterable[str], key_path: KeyPath) -> None:
        for name in sorted(set(names) & self.known):
            self.ctx.error(BAD_LET_BINDING, f"template loop name '{name}' is already a name here, in "
                           f"{self._where(key_path)}", self.doc.span(key_path), rule_id=self.rule_id,
                           help="choose another name: loop names never hide fields, vars, signals or "
                           "bindings")

    def params(self, value: Any, key_path: KeyPath) -> Any:
        if isinstance(value, str):
            return self.template(value, key_path)
        if isinstance(value, list):
            return [self.params(v, (*key_path, i)) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.params(v, (*key_path, k)) for k, v in value.items()}
        if isinstance(value, BaseModel):
            return self.params(value.model_dump(), key_path)
        return value

    def _syntax(self, exc: ExpressionSyntaxError, key_path: KeyPath) -> None:
        self.ctx.error(exc.code, f"{exc.message} in {self._where(key_path)}",
                       self.doc.span_in(key_path, exc.offset), rule_id=self.rule_id)

    def _check_expression(self, expr: Expression, key_path: KeyPath) -> None:
        self._record(expr.paths, key_path)
        self._check_calls(expr.calls, key_path, jmespath=False)
        for name in sorted(expr.names - self.known):
            known = set(self.tree) | self.extra_names  # in this order for the suggestion
            self.ctx.error(UNKNOWN_NAME, f"unknown name '{name}' in {self._where(key_path)}",
                           self.doc.span(key_path), rule_id=self.rule_id,
                           help=_elsewhere(name) or did_you_mean(name, known)
                           or f"write '{name}' in quotes for a string")
        self._check_paths([p for p in expr.paths if p[0] in self.tree], key_path)

    def _check_calls(self, calls: Iterable[tuple[str, int]], key_path: KeyPath, *, jmespath: bool) -> None:
        for name, arity in calls:
            spec = FUNCTIONS.get(name)
            if spec is None and not (jmespath and name in JMESPATH_BUILTINS):
                names = set(FUNCTIONS) | (JMESPATH_BUILTINS if jmespath else set())
                self.ctx.error(UNKNOWN_FUNCTION, f"unknown function '{name}' in {self._where(key_path)}",
                               self.doc.span(key_path), rule_id=self.rule_id,
                               help=did_you_mean(name, names) or "see docs/reference/functions.md")
                continue
            if jmespath and name in JMESPATH_ARITY and (spec is None or spec.native_jmespath):
                low, high = JMESPATH_ARITY[name]
                example = f"see the JMESPath specification of {name}()"
            elif spec is not None:
                low, high, example = spec.min_args, spec.max_args, f"example: {spec.example}"
            else:
                continue
            if arity < low or (high is not None and arity > high):
                expected = str(low) if high == low else f"{low} to {high if high is not None else 'any'}"
                self.ctx.error(WRONG_ARGUMENT_COUNT, f"{name}() takes {expected} arguments, got {arity} in "
                               f"{self._where(key_path)}", self.doc.span(key_path), rule_id=self.rule_id,
                               help=example)

    def _check_paths(self, paths: Iterable[tuple[str, ...]], key_path: KeyPath, *,
                     jmespath: bool = False) -> None:
        for path in paths:
            if path[0] in self.extra_names:
                continue
            problem = check_path(self.tree, path)
            if problem is None:
                continue
            bad = ".".join(path[: problem.index + 1])
            root = path[0]
            code, what = _PATH_PROBLEMS.get(root, (UNKNOWN_EVENT_FIELD, "unknown field"))
            hint = did_you_mean(path[problem.index], problem.known) or \
                (f"known here: {', '.join(problem.known)}" if problem.known else None)
            if jmespath and len(path) == 1 and path[0] in ("null", "true", "false"):
                hint = f"JMESPath literals go in backticks: `{path[0]}`"
            self.ctx.error(code, f"{what} '{bad}' in {self._where(key_path)}", self.doc.span(key_path),
                           rule_id=self.rule_id, help=hint)

def _elsewhere(name: str) -> str | None:
    """A hint for a name that is a field of other event types than the rule's."""
    others = events_with_field(name)
    if not others:
        return None
    return (f"'{name}' is a field of {', '.join(others)} events, not of the events this reads "
            f"(`on:`); put the condition in a rule `on: {others[0]}`")


def template_expressions(tree: Any) -> list[Expression | None]:
    return [template.expression for template in templates_in(tree)]
