"""Whole decisions remembered across events, keyed by everything the event type's rules can read.

The interpreter is pure, so an event's Decision is a function of what its rules read. For an event
type, the *plan* is the union of what every one of its rules reads (a superset of what the rules an
evaluation keeps can read): the event paths of `match` (JMESPath), `when`, `let:` and the action
templates, and, transitively, of the signals they name (`expr`, `transform`, `fallback`, `let:`,
the request of an external one), the state paths among them apart. The key of an event is its
type, one marshal encoding (format 2: exact builtin types) of what reading each path gives (the
value, a missing field apart from a null one, the first value on the way that is not an object),
in the event and in the state, and the env values the vars resolve from. On a hit the remembered
effects are taken and the remembered `set`/`unset` effects are applied to the event's own state:
what a read after a write gives depends only on the write and on what the key holds for that path,
and a state path no rule reads is carried through. The caller (the replay runner) asks only for
events whose external signals it answers the same way every time (no decision log record: each
one's fallback applies).

An event type is never memoized when the analysis cannot see everything its rules read: a path
into `signals`/`signal_errors` other than by a literal name, a JMESPath that reads the root as a
whole (`@`) or in a way not listed here, an expression that is not a plain tree, `:=` or `lambda`,
a comprehension that binds a `let:` name or a scope root (checked per event against its fields).
A decision is not kept when it is pending or its evaluation budget ran out (RT404: time-dependent);
a value marshal refuses (an object, a subclass of a builtin type) makes the event's key None.
"""

from __future__ import annotations

import ast
import marshal
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from router.actions import runner
from router.compile.ir import CompiledPolicy, CompiledRule, CompiledSignal
from router.diagnostics.code_names import BUDGET_EXCEEDED
from router.engine.decision import Decision
from router.engine.signal_memo import MISSING, SignalMemo
from router.lang.expr.expression import Expression, Template
from router.lang.query.query import Query, UnlistedPaths, root_paths

MAX_ENTRIES = 100_000  # decisions remembered before the memo starts again
# marshal's format 2: no back-references (whose use depends on reference counts), so equal data of
# the same builtin types encodes the same; marshal refuses other objects and subclasses (ValueError)
_MARSHAL = 2
_SIGNAL_ROOTS = frozenset({"signals", "signal_errors"})
_ROOT_NAMES = frozenset({"vars", "state", *_SIGNAL_ROOTS})

Decided = tuple[Decision, "tuple[str, ...] | None"]  # a decision, its external signals' sources


class Unplannable(Exception):
    """What a rule or signal reads cannot be listed completely: its event type is not memoized."""


@dataclass(frozen=True)
class Plan:
    """The event paths one event type's rules can read, the names their comprehensions bind and the
    state paths they read (`()`: the whole state)."""

    paths: tuple[tuple[str, ...], ...]
    bound: frozenset[str]
    state: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Entry:
    """A remembered decision and the sources of the external signals it read, in order."""

    decision: Decision
    sources: tuple[str, ...]


class DecisionMemo:
    """The decisions of one policy's events (one per replay runner; not thread-safe)."""

    def __init__(self, policy: CompiledPolicy, signal_memo: SignalMemo | None = None) -> None:
        self.policy = policy
        self._keys = signal_memo or SignalMemo(policy)  # its vars key
        self._plans: dict[str, Plan | None] = {}
        self._entries: dict[Hashable, Entry] = {}
        self._constants: dict[int, tuple[Any, int]] = {}  # id -> (value, its number)
        self.hits = self.misses = self.unkeyed = 0

    def plan(self, event_type: str) -> Plan | None:
        """What the event type's rules read; None when it is never memoized."""
        if event_type not in self._plans:
            try:
                self._plans[event_type] = _plan(self.policy, self.policy.by_event.get(event_type, ()))
            except Unplannable:
                self._plans[event_type] = None
        return self._plans[event_type]

    def constant(self, value: Any) -> None:
        """Declare a value the caller never changes in place (the replay's model catalog, in every
        event): keyed by a number, not encoded at every event that reads it."""
        self._constants[id(value)] = (value, len(self._constants))

    def key(self, event: Mapping[str, Any], state: Mapping[str, Any]) -> Hashable | None:
        """The event's key, None when its decision is not memoized."""
        event_type = str(event.get("type", ""))
        plan = self.plan(event_type)
        if plan is None or (plan.bound and not plan.bound.isdisjoint(event.keys())):
            self.unkeyed += 1
            return None
        try:
            read = marshal.dumps([self._read(event, path) for path in plan.paths]
                                 + [self._read(state, path) for path in plan.state], _MARSHAL)
        except ValueError:  # not builtin data (an object, a subclass): evaluated, not kept
            self.unkeyed += 1
            return None
        env = event.get("env")
        return (event_type, read, self._keys.vars_key(env) if env else ())

    def _read(self, scope: Mapping[str, Any], path: tuple[str, ...]) -> tuple[Any, ...]:
        """What reading `path` depends on, tagged: the value at its end (0), the field's absence at
        a depth (1), the first value on the way that is not an object (2), a declared constant (3)."""
        value: Any = scope
        for depth, part in enumerate(path):
            if type(value) is not dict:
                return (2, depth, value)
            value = value.get(part, MISSING)
            if value is MISSING:
                return (1, depth)
        known = self._constants.get(id(value))
        if known is not None and known[0] is value:
            return (3, known[1])
        return (0, value)

    def decide(self, event: Mapping[str, Any], state: Mapping[str, Any],
               compute: Callable[[], Decided]) -> Decided:
        """The event's remembered decision with its signals' sources, else `compute`'s (sources None:
        not to be kept), kept when the event has a key."""
        key = self.key(event, state)
        entry = self.get(key, state) if key is not None else None
        if entry is not None:
            return entry.decision, entry.sources
        decision, sources = compute()
        if key is not None and sources is not None:
            self.remember(key, decision, sources)
        return decision, sources

    def get(self, key: Hashable, state: Mapping[str, Any]) -> Entry | None:
        """The remembered decision of `key` for an event of this `state`: its effects, and the state
        its `set`/`unset` effects make of this one (the key holds only the state paths the rules
        read, the rest of the state is carried through as the evaluation would)."""
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        decision = found.decision
        after = dict(state)
        for effect in decision.effects:
            runs, handler = runner(effect.action)
            if runs == "interpreter":
                handler(after, effect.params)
        return Entry(replace(decision, state=after, state_changed=after != state), found.sources)

    def remember(self, key: Hashable, decision: Decision, sources: tuple[str, ...]) -> None:
        """Keep `decision` under `key`, unless it is pending or its budget ran out."""
        if decision.pending is not None or any(e.code == BUDGET_EXCEEDED for e in decision.errors):
            return
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = Entry(decision, sources)


def _plan(policy: CompiledPolicy, rules: tuple[CompiledRule, ...]) -> Plan:
    paths: set[tuple[str, ...]] = set()
    bound: set[str] = set()
    signals: list[str] = []
    for rule in rules:
        local = frozenset(name for name, _ in rule.bindings)
        if rule.match is not None:
            paths.update(_query_paths(rule.match))
        expressions = [rule.when] if rule.when is not None else []
        expressions += [e for _, e in rule.bindings]
        expressions += [e for action in rule.actions for e in _templates(action.params)]
        _read(expressions, local, paths, bound, signals)
    done: set[str] = set()
    while signals:
        name = signals.pop()
        if name in done:
            continue
        done.add(name)
        spec = policy.signals.get(name)
        if spec is not None:
            _read(_signal_expressions(spec), frozenset(n for n, _ in spec.bindings), paths, bound, signals)
    if bound & _ROOT_NAMES:
        raise Unplannable("a comprehension binds a scope root")
    kept = sorted(p for p in paths if p[0] != "vars" and not any(p[:n] in paths for n in range(1, len(p))))
    return Plan(tuple(p for p in kept if p[0] != "state"), frozenset(bound),
                tuple(p[1:] for p in kept if p[0] == "state"))


def _signal_expressions(spec: CompiledSignal) -> list[Expression]:
    found = [e for e in (spec.expr, spec.transform, spec.fallback) if e is not None]
    found += [e for _, e in spec.bindings]
    found += list(_templates(spec.request))
    return found


def _read(expressions: list[Expression], local: frozenset[str], paths: set[tuple[str, ...]],
          bound: set[str], signals: list[str]) -> None:
    """Add what `expressions` read to `paths` (event paths), `bound` and `signals` (names read)."""
    for expression in expressions:
        if not isinstance(expression.tree, ast.AST):
            raise Unplannable("not a plain tree")
        for node in ast.walk(expression.tree):
            if isinstance(node, ast.comprehension):
                names = {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
                if names & local:
                    raise Unplannable("a comprehension binds a let: name")
                bound |= names
            elif isinstance(node, (ast.NamedExpr, ast.Lambda)):
                raise Unplannable("an assignment or a lambda")
        for path in expression.paths:
            if path[0] in local:
                continue
            if path[0] in _SIGNAL_ROOTS:
                if len(path) < 2:
                    raise Unplannable("signals read other than by a literal name")
                signals.append(path[1])
            else:
                paths.add(path)


def _templates(tree: Any) -> Iterator[Expression]:
    """The expressions of the templates in an action's (or a request's) parameter tree."""
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _templates(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _templates(value)
    elif isinstance(tree, Template):
        if tree.expression is not None:
            yield tree.expression
    elif isinstance(tree, Expression):
        yield tree
    elif isinstance(tree, Query):
        raise Unplannable("a query in a parameter tree")


def _query_paths(query: Query) -> list[tuple[str, ...]]:
    """The root paths a JMESPath reads, listed completely; Unplannable when that cannot be said."""
    try:
        return root_paths(query.parsed.parsed, strict=True)
    except UnlistedPaths as exc:
        raise Unplannable(str(exc)) from exc
