"""Expression signals remembered across events, keyed by exactly what each one reads.

A caller that evaluates many events of one policy (the replay runner) owns one `SignalMemo` and
passes it to `evaluate`; the interpreter stays pure (no module-level cache). An expression signal's
value (with its failure text and code) depends only on what its expressions (`expr`, `let:`
bindings, `transform`, `fallback`) read:

- the event fields and state paths they name (`session.cwd`, `state.ds.band`): the *static key*,
  each path's value read from the scope and frozen into a hashable, type-exact form;
- `vars.*`: the policy's vars for the event's environment, named by the env values they resolve from;
- the other signals they read (`signals.X`, `signal_errors.X`): which ones depends on the values
  read so far (`signals.a if c else signals.b`), so these are recorded in the order the
  computation reads them, and a later event checks them in that order, reading only what the
  computation would read. Each value a signal takes in an evaluation has a *token*: the memo
  entry it came from, or the frozen value of an external or provided signal.

A signal is never memoized when the analysis cannot see what it reads: an external signal, a
project layer's (sandboxed) signal, `signals`/`signal_errors` read other than by a literal name, a
comprehension that binds a `let:` name or a name of the scope, or a value that cannot be frozen
(anything but JSON data). The helper functions are pure (router/lang/functions); the only thing a
memoized signal does not do again is spend the evaluation's budget.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from router.compile.ir import CompiledPolicy, CompiledSignal

MAX_ENTRIES = 200_000  # values remembered before the memo starts again
_SIGNAL_ROOTS = frozenset({"signals", "signal_errors"})
_SCOPE_ROOTS = frozenset({"vars", "state", *_SIGNAL_ROOTS})
MISSING: Any = object()  # a path that ends at a field the object does not have

Result = tuple[Any, "str | None", "str | None"]  # value, failure text, failure code


class Unfreezable(Exception):
    """A value that is not JSON data: the signal is computed, not memoized."""


def freeze(value: Any) -> Hashable:
    """A hashable form of JSON data, equal only for values of the same types (True, 1 and 1.0 differ)."""
    kind = type(value)
    if kind is str or kind is int or value is None:
        return value  # type: ignore[no-any-return]
    if kind is bool:
        return ("b", value)
    if kind is float:
        return ("f", value)
    if kind is dict:  # list comprehensions: faster than tuple(generator)
        return ("d", tuple([(k, freeze(v)) for k, v in value.items()]))
    if kind is list:
        return ("l", tuple([freeze(v) for v in value]))
    if kind is tuple:
        return ("t", tuple([freeze(v) for v in value]))
    raise Unfreezable(kind.__name__)


def path_key(scope: Mapping[str, Any], path: tuple[str, ...],
             constants: Mapping[int, tuple[Any, Hashable]] | None = None) -> Hashable:
    """What reading `path` from `scope` depends on: the frozen value at its end, the field's absence,
    or the first value on the way that is not an object (its fields are not read as such).
    `constants`: values the caller never changes, by identity, with their frozen form."""
    value: Any = scope
    for depth, part in enumerate(path):
        if type(value) is not dict:
            return (depth, freeze(value))
        value = value.get(part, MISSING)
        if value is MISSING:
            return (depth, MISSING)
    known = constants.get(id(value)) if constants else None
    if known is not None and known[0] is value:
        return known[1]
    return freeze(value)


@dataclass(frozen=True)
class Plan:
    """What one signal reads, statically: the scope paths of its static key, whether it reads vars,
    and the names its comprehensions bind (never memoized while one of them is in the scope)."""

    paths: tuple[tuple[str, ...], ...]
    reads_vars: bool
    bound: frozenset[str]


@dataclass
class Leaf:
    """A remembered result and its entry number (the token of the value)."""

    result: Result
    token: int


@dataclass
class Branch:
    """The next signal the computation reads, and where each of its tokens leads."""

    dep: str
    next: dict[Hashable, Branch | Leaf] = field(default_factory=dict)


Node = Branch | Leaf


class SignalMemo:
    """The memo of one policy's expression signals (one per replay runner; not thread-safe)."""

    def __init__(self, policy: CompiledPolicy) -> None:
        self.policy = policy
        self._plans: dict[str, Plan | None] = {}
        self._roots: dict[tuple[str, Hashable], Node] = {}
        self._count = 0
        self._tokens = itertools.count(1)
        self._numbers = itertools.count(1)
        self._interned: dict[Hashable, Hashable] = {}
        self._constants: dict[int, tuple[Any, Hashable]] = {}  # id -> (value, its interned form)
        self.hits = self.misses = 0

    def plan(self, spec: CompiledSignal) -> Plan | None:
        """The signal's plan, None when it is never memoized."""
        if spec.name not in self._plans:
            self._plans[spec.name] = _plan(spec)
        return self._plans[spec.name]

    def constant(self, value: Any) -> None:
        """Declare a value the caller never changes in place (the replay's model catalog, in every
        event): it is frozen once, not at every evaluation that reads it."""
        self._constants[id(value)] = (value, self.intern(freeze(value)))

    def vars_key(self, env: Any) -> Hashable:
        """The env values the policy's vars resolve from (router/engine/vars_memo.py's key)."""
        if not self.policy.env_vars or not isinstance(env, Mapping):
            return ()
        return tuple(sorted((n, freeze(env[n])) for n in self.policy.env_names if n in env))

    def static_key(self, plan: Plan, scope: Mapping[str, Any], vars_key: Hashable,
                   seen: dict[tuple[str, ...], Hashable]) -> Hashable | None:
        """The signal's static key in `scope`; None when it cannot be memoized for this scope.
        `seen` holds the path keys already read from this scope (the caller forgets them when
        the scope changes: a state write)."""
        if plan.bound and not plan.bound.isdisjoint(scope.keys()):
            return None
        parts = []
        for path in plan.paths:
            part = seen.get(path, MISSING)
            if part is MISSING:
                try:
                    part = seen[path] = self.intern(path_key(scope, path, self._constants))
                except Unfreezable:
                    return None
            parts.append(part)
        key = tuple(parts)
        return (key, vars_key) if plan.reads_vars else key

    def intern(self, frozen: Hashable) -> Hashable:
        """A small stand-in for a frozen container (hashing a nested tuple again costs as much as
        making it): equal values get the same number, never used for another value."""
        if type(frozen) is not tuple:
            return frozen
        number = self._interned.get(frozen)
        if number is None:
            number = self._interned[frozen] = ("i", next(self._numbers))
        return number

    def frozen_path(self, scope: Mapping[str, Any], path: tuple[str, ...]) -> Hashable:
        """`path_key` of `path` in `scope`, interned, with the declared constants (Unfreezable)."""
        if len(self._interned) >= MAX_ENTRIES:
            self._interned.clear()  # numbers are never given again: a forgotten value only misses
        return self.intern(path_key(scope, path, self._constants))

    def root(self, name: str, key: Hashable) -> Node | None:
        return self._roots.get((name, key))

    def remember(self, name: str, key: Hashable, trace: Sequence[tuple[str, Hashable]],
                 result: Result) -> int | None:
        """Keep `result`, reached by reading `trace` (dep, token) in order; its token, None when the
        trace disagrees with what is remembered (it cannot, for a pure signal: then not kept)."""
        if self._count >= MAX_ENTRIES or len(self._interned) >= MAX_ENTRIES:
            self._roots.clear()
            self._interned.clear()
            self._count = 0
        leaf = Leaf(result, next(self._tokens))
        slot: tuple[dict[Any, Node], Hashable] = (self._roots, (name, key))
        for dep, token in trace:
            holder, at = slot
            node = holder.get(at)
            if node is None:
                node = holder[at] = Branch(dep)
            if not isinstance(node, Branch) or node.dep != dep:
                return None
            slot = (node.next, token)
        holder, at = slot
        if at in holder:
            return None
        holder[at] = leaf
        self._count += 1
        return leaf.token


def _plan(spec: CompiledSignal) -> Plan | None:
    if spec.external or spec.sandboxed or spec.expr is None:
        return None
    local = frozenset(name for name, _ in spec.bindings)
    expressions = [e for e in (spec.expr, spec.transform, spec.fallback) if e is not None]
    expressions += [e for _, e in spec.bindings]
    paths: set[tuple[str, ...]] = set()
    bound: set[str] = set()
    reads_vars = False
    for expression in expressions:
        if not isinstance(expression.tree, ast.AST):
            return None
        for node in ast.walk(expression.tree):
            if isinstance(node, ast.comprehension):
                bound |= {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.NamedExpr, ast.Lambda)):
                return None
        for path in expression.paths:
            root = path[0]
            if root in local:
                continue
            if root in _SIGNAL_ROOTS:
                if len(path) < 2:
                    return None  # `signals[name]`, `keys(signals)`: which signals is not known
            elif root == "vars":
                reads_vars = True
            else:
                paths.add(path)
    if bound & (local | _SCOPE_ROOTS):
        return None
    kept = sorted(p for p in paths if not any(p[:n] in paths for n in range(1, len(p))))
    return Plan(tuple(kept), reads_vars, frozenset(bound))
