"""An index of the rules' leading conditions: the rules of an event type that cannot match an event.

Built once per (policy, event type), on first use. Each rule's *atoms* are the leading conjuncts of
its `match` (JMESPath `a && b && …`) and, when the whole match is atoms, of its `when` (`a and b
and …`), up to the first conjunct of another shape. An atom is one of

- an equality of a field path and a string literal (`tool.name == 'bash'`, `!=`): every atom on
  the same path is answered by one dict lookup of the field's value;
- `count_keywords(path, [...]) > 0` (or `>= 1`, or the bare call): all keyword lists on one path
  are combined into one regex, so an event that holds none of them costs one search;
- a pure comparison (fields, literals, comparisons, `and`/`or`/`not`; no calls): evaluated once per
  event however many rules share it (`source == 'rpc'` in 1,000 rules is one test).

No atom reads `state`, `signals` or `signal_errors` (earlier rules change them during the
evaluation; reading a signal may compute it). So every atom is pure: evaluating it has no effect.
A rule is left out of an evaluation only when one of its atoms is known false and every one of its
atoms was evaluated without an error; the reference evaluation (the rule's own closures, left to
right) stops at the first false conjunct, so it would have found the rule false and recorded
nothing. Anything else (an atom that raised, a value of an unexpected type) keeps the rule, which
then runs exactly as before; the order of the rules that remain is the policy's order.

Nothing here generates or compiles Python source: an atom is data (a path, a literal, a compiled
regex) or one of the closures the expression compilers already build from checked trees, so no
text of a policy can become code.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from router.compile.ir import CompiledPolicy, CompiledRule
from router.engine.rule_atoms import (
    Atom,
    Equality,
    Getter,
    Keywords,
    Scope,
    Unknown,
    match_getter,
    rule_atoms,
    when_getter,
)
from router.lang.expr.expression import compile_part
from router.lang.query.query import compile_subtree

enabled = True  # False: every rule runs (the reference the tests and benches compare with)


MIN_RULES = 8  # below this many rules with atoms the index costs more than it saves


MAX_COMBINED_PATTERN = 1_000_000  # characters of one combined keyword regex


_PLAIN = (type(None), bool, int, float, list, dict)


class _EqualityGroup:
    def __init__(self, getter: Getter) -> None:
        self.getter = getter
        self.eq_all = self.all = 0
        self.eq_by: dict[str, int] = {}
        self.ne_by: dict[str, int] = {}

    def add(self, atom: Equality, bit: int) -> None:
        self.all |= bit
        if atom.equal:
            self.eq_all |= bit
            self.eq_by[atom.literal] = self.eq_by.get(atom.literal, 0) | bit
        else:
            self.ne_by[atom.literal] = self.ne_by.get(atom.literal, 0) | bit

    def test(self, scope: Scope) -> tuple[int, int]:
        """(rules with a false atom here, rules with an atom that could not be evaluated)."""
        try:
            value = self.getter(scope)
        except Unknown:
            return 0, self.all
        if type(value) is str:
            return (self.eq_all & ~self.eq_by.get(value, 0)) | self.ne_by.get(value, 0), 0
        if isinstance(value, _PLAIN) and not isinstance(value, str):
            return self.eq_all, 0  # a string literal equals no other JSON value
        return 0, self.all


class _KeywordGroup:
    def __init__(self, getter: Getter) -> None:
        self.getter = getter
        self.all = 0
        self.by_pattern: dict[tuple[str, int], tuple[re.Pattern[str], int]] = {}
        self.combined: re.Pattern[str] | None = None

    def add(self, atom: Keywords, bit: int) -> None:
        self.all |= bit
        key = (atom.pattern.pattern, atom.pattern.flags)
        pattern, mask = self.by_pattern.get(key, (atom.pattern, 0))
        self.by_pattern[key] = (pattern, mask | bit)

    def finish(self) -> None:
        """One alternation of every keyword list: it finds a match iff one of the lists does."""
        source = "|".join(f"(?:{p.pattern})" for p, _ in self.by_pattern.values())
        if len(source) <= MAX_COMBINED_PATTERN:
            try:
                self.combined = re.compile(source, re.IGNORECASE)
            except (re.error, RecursionError, OverflowError):
                self.combined = None

    def test(self, scope: Scope) -> tuple[int, int]:
        try:
            value = self.getter(scope)
        except Unknown:
            return 0, self.all
        if value is None:
            return self.all, 0  # count_keywords(null, …) is 0
        if type(value) is not str:
            return 0, self.all  # the helper reports an error: the rule's own evaluation says so
        if self.combined is not None and self.combined.search(value) is None:
            return self.all, 0
        false = 0
        for pattern, mask in self.by_pattern.values():
            if pattern.search(value) is None:
                false |= mask
        return false, 0


@dataclass
class _PureAtom:
    run: Callable[[Any], Any]
    python_truth: bool
    mask: int = 0

    def test(self, scope: Scope) -> tuple[int, int]:
        try:
            value = self.run(scope)
            if self.python_truth:
                false = not value
            else:  # JMESPath: null, false, '', [] and {} are false; 0 is true
                false = value is None or value is False or value == "" or value == [] or value == {}
        except Exception:  # the rule's own evaluation reports it
            return 0, self.mask
        return (self.mask, 0) if false else (0, 0)


Group = _EqualityGroup | _KeywordGroup | _PureAtom


class RuleIndex:
    """The atoms of one event type's rules, grouped so that one event tests each group once."""

    def __init__(self, rules: Sequence[CompiledRule], atoms: Sequence[Sequence[Atom]]) -> None:
        self.rules = tuple(rules)
        self.all = (1 << len(self.rules)) - 1
        self.groups: tuple[list[Group], list[Group]] = ([], [])  # (scope, sandbox)
        keyed: dict[tuple[bool, Any], Group] = {}
        for position, (rule, found) in enumerate(zip(self.rules, atoms, strict=True)):
            for atom in found:
                self._add(keyed, rule.sandboxed, atom, 1 << position)
        for group in keyed.values():
            if isinstance(group, _KeywordGroup):
                group.finish()

    def _add(self, keyed: dict[tuple[bool, Any], Group], sandboxed: bool, atom: Atom, bit: int) -> None:
        group: Group
        if isinstance(atom, Equality):
            key: Any = ("eq", atom.side, atom.path)
            group = keyed.get((sandboxed, key)) or _EqualityGroup(
                match_getter(atom.path) if atom.side == "match" else when_getter(atom.path))
            assert isinstance(group, _EqualityGroup)
            group.add(atom, bit)
        elif isinstance(atom, Keywords):
            key = ("kw", atom.path)
            group = keyed.get((sandboxed, key)) or _KeywordGroup(when_getter(atom.path))
            assert isinstance(group, _KeywordGroup)
            group.add(atom, bit)
        else:
            key = ("pure", atom.side, atom.key)
            group = keyed.get((sandboxed, key)) or _PureAtom(
                compile_subtree(atom.tree) if atom.side == "match" else compile_part(atom.tree),
                python_truth=atom.side == "when")
            assert isinstance(group, _PureAtom)
            group.mask |= bit
        if (sandboxed, key) not in keyed:
            keyed[(sandboxed, key)] = group
            self.groups[1 if sandboxed else 0].append(group)

    def candidates(self, scope: Scope, sandbox: Callable[[], Scope]) -> Sequence[CompiledRule]:
        """The rules, in order, that may match `scope` (all but those known not to)."""
        false = unknown = 0
        for groups, where in ((self.groups[0], scope), (self.groups[1], None)):
            if not groups:
                continue
            target = where if where is not None else sandbox()
            for group in groups:
                f, u = group.test(target)
                false |= f
                unknown |= u
        left_out = false & ~unknown
        if not left_out:
            return self.rules
        return [self.rules[i] for i in _bits(self.all & ~left_out)]


def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of `mask`, lowest first."""
    text = bin(mask)[:1:-1]
    position = text.find("1")
    while position >= 0:
        yield position
        position = text.find("1", position + 1)


def build_index(rules: Sequence[CompiledRule]) -> RuleIndex | None:
    """The index of these rules, or None when too few of them have atoms to be worth it."""
    atoms = [rule_atoms(rule) for rule in rules]
    if sum(1 for found in atoms if found) < MIN_RULES:
        return None
    return RuleIndex(rules, atoms)


_INDEXES: weakref.WeakKeyDictionary[CompiledPolicy, dict[str, RuleIndex | None]] = \
    weakref.WeakKeyDictionary()


def index_for(policy: CompiledPolicy, event_type: str) -> RuleIndex | None:
    """The policy's index for `event_type` (built on first use, then kept with the policy)."""
    per_type = _INDEXES.get(policy)
    if per_type is None:
        per_type = _INDEXES.setdefault(policy, {})
    if event_type not in per_type:
        per_type[event_type] = build_index(policy.by_event.get(event_type, ()))
    return per_type[event_type]
