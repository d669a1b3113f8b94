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

import ast
import json
import re
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from router.compile.ir import CompiledPolicy, CompiledRule
from router.lang.expr.expression import compile_part
from router.lang.expr.syntax import CONSTANTS
from router.lang.query.query import compile_subtree

enabled = True  # False: every rule runs (the reference the tests and benches compare with)
MIN_RULES = 8  # below this many rules with atoms the index costs more than it saves
MAX_COMBINED_PATTERN = 1_000_000  # characters of one combined keyword regex
_MUTABLE_ROOTS = frozenset({"state", "signals", "signal_errors"})
_PLAIN = (type(None), bool, int, float, list, dict)
Scope = Mapping[str, Any]
Getter = Callable[[Scope], Any]


class _Unknown(Exception):
    """A path's value cannot be read without the error the rule's own evaluation would report."""


# --- atoms ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Equality:
    side: str  # "match" (JMESPath) or "when" (expression)
    path: tuple[str, ...]
    literal: str
    equal: bool


@dataclass(frozen=True)
class _Keywords:
    path: tuple[str, ...]
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class _Pure:
    side: str
    key: str  # the canonical form of the subtree: equal keys, one evaluation
    tree: Any = field(compare=False, hash=False)


Atom = _Equality | _Keywords | _Pure


def _conjuncts_match(node: dict[str, Any]) -> list[dict[str, Any]]:
    if node.get("type") == "and_expression":
        left, right = node["children"]
        return _conjuncts_match(left) + _conjuncts_match(right)
    return [node]


def _conjuncts_when(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [part for value in node.values for part in _conjuncts_when(value)]
    return [node]


def _field_chain(node: dict[str, Any]) -> tuple[str, ...] | None:
    """The names of a `a.b.c` field chain, else None."""
    if node.get("type") == "field" and isinstance(node.get("value"), str):
        return (node["value"],)
    if node.get("type") == "subexpression":
        names: list[str] = []
        for child in node["children"]:
            part = _field_chain(child)
            if part is None:
                return None
            names += part
        return tuple(names)
    return None


_PURE_MATCH = frozenset({"field", "subexpression", "comparator", "literal", "and_expression",
                         "or_expression", "not_expression", "index", "index_expression"})


def _pure_match(node: dict[str, Any], *, root: bool = True) -> bool:
    """Only field reads (never of state or signals), literals, comparisons and logic."""
    kind = node.get("type")
    if kind not in _PURE_MATCH:
        return False
    if kind == "field":
        return not (root and node.get("value") in _MUTABLE_ROOTS)
    children = node.get("children") or []
    if kind in ("subexpression", "index_expression"):
        return bool(children) and _pure_match(children[0], root=root) and all(
            _pure_match(c, root=False) for c in children[1:])
    return all(isinstance(c, dict) and _pure_match(c, root=True) for c in children)


def match_atom(node: dict[str, Any]) -> Atom | None:
    """The atom of one conjunct of a JMESPath match, or None."""
    if node.get("type") == "comparator" and node.get("value") in ("eq", "ne"):
        left, right = node["children"]
        for path_node, literal_node in ((left, right), (right, left)):
            path = _field_chain(path_node)
            literal = literal_node.get("value") if literal_node.get("type") == "literal" else None
            if path and isinstance(literal, str) and path[0] not in _MUTABLE_ROOTS:
                return _Equality("match", path, literal, node["value"] == "eq")
    if _pure_match(node):
        return _Pure("match", json.dumps(node, sort_keys=True, default=repr), node)
    return None


def _name_chain(node: ast.expr) -> tuple[str, ...] | None:
    """The names of a `a.b.c` chain rooted at a scope name, else None."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id not in CONSTANTS:
        return (node.id, *reversed(attrs))
    return None


_PURE_WHEN = (ast.Compare, ast.Name, ast.Attribute, ast.Constant, ast.BoolOp, ast.UnaryOp, ast.Load,
              ast.And, ast.Or, ast.Not, ast.Eq, ast.NotEq, ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.In,
              ast.NotIn, ast.Is, ast.IsNot)


def _pure_when(node: ast.expr) -> bool:
    for child in ast.walk(node):
        if not isinstance(child, _PURE_WHEN):
            return False
        if isinstance(child, ast.UnaryOp) and not isinstance(child.op, ast.Not):
            return False
        if isinstance(child, ast.Constant) and not isinstance(child.value, (str, int, float, bool,
                                                                            type(None))):
            return False
        if isinstance(child, ast.Name) and child.id in _MUTABLE_ROOTS:
            return False
    return True


def _keyword_call(node: ast.expr) -> _Keywords | None:
    """`count_keywords(path, [literal words])` with its load-time pattern, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "count_keywords" and len(node.args) == 2):
        return None
    path, words = _name_chain(node.args[0]), node.args[1]
    if path is None or path[0] in _MUTABLE_ROOTS or not isinstance(words, ast.Constant):
        return None
    pattern = words.value
    if not isinstance(pattern, re.Pattern) or pattern.flags != re.IGNORECASE | re.UNICODE:
        return None
    return _Keywords(path, pattern)


def when_atom(node: ast.expr) -> Atom | None:
    """The atom of one conjunct of a `when` expression, or None."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        op, right = node.ops[0], node.comparators[0]
        if isinstance(op, (ast.Eq, ast.NotEq)):
            for path_node, literal_node in ((node.left, right), (right, node.left)):
                path = _name_chain(path_node)
                if path and path[0] not in _MUTABLE_ROOTS and isinstance(literal_node, ast.Constant) \
                        and isinstance(literal_node.value, str):
                    return _Equality("when", path, literal_node.value, isinstance(op, ast.Eq))
        bound = right.value if isinstance(right, ast.Constant) and type(right.value) is int else None
        if (isinstance(op, ast.Gt) and bound == 0) or (isinstance(op, ast.GtE) and bound == 1):
            found = _keyword_call(node.left)
            if found is not None:
                return found
    found = _keyword_call(node)
    if found is not None:
        return found
    if _pure_when(node):
        return _Pure("when", ast.dump(node), node)
    return None


def rule_atoms(rule: CompiledRule) -> list[Atom]:
    """The leading conjuncts of the rule that are atoms, in evaluation order."""
    atoms: list[Atom] = []
    if rule.match is not None:
        tree = cast(dict[str, Any], rule.match.parsed.parsed)
        for conjunct in _conjuncts_match(tree):
            atom = match_atom(conjunct)
            if atom is None:
                return atoms
            atoms.append(atom)
    if rule.when is None or rule.when.run is None or rule.bindings:  # `let:` names shadow the scope
        return atoms
    for part in _conjuncts_when(rule.when.tree):
        atom = when_atom(part)
        if atom is None:
            break
        atoms.append(atom)
    return atoms


# --- reading paths ----------------------------------------------------------------------------


def _match_getter(path: tuple[str, ...]) -> Getter:
    """JMESPath field reads: null for anything without fields (never an error)."""

    def get(scope: Scope) -> Any:
        value: Any = scope
        for name in path:
            try:
                value = value.get(name)
            except AttributeError:
                return None
        return value

    return get


def _when_getter(path: tuple[str, ...]) -> Getter:
    """Expression field reads: null through null; a field of anything else is an error (_Unknown)."""
    first, rest = path[0], path[1:]

    def get(scope: Scope) -> Any:
        value = scope.get(first)
        for name in rest:
            if isinstance(value, Mapping):
                value = value.get(name)
            elif value is None:
                return None
            else:
                raise _Unknown
        return value

    return get


# --- groups: all atoms of one kind on one path, answered together -----------------------------


class _EqualityGroup:
    def __init__(self, getter: Getter) -> None:
        self.getter = getter
        self.eq_all = self.all = 0
        self.eq_by: dict[str, int] = {}
        self.ne_by: dict[str, int] = {}

    def add(self, atom: _Equality, bit: int) -> None:
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
        except _Unknown:
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

    def add(self, atom: _Keywords, bit: int) -> None:
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
        except _Unknown:
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


# --- the index ----------------------------------------------------------------------------------


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
        if isinstance(atom, _Equality):
            key: Any = ("eq", atom.side, atom.path)
            group = keyed.get((sandboxed, key)) or _EqualityGroup(
                _match_getter(atom.path) if atom.side == "match" else _when_getter(atom.path))
            assert isinstance(group, _EqualityGroup)
            group.add(atom, bit)
        elif isinstance(atom, _Keywords):
            key = ("kw", atom.path)
            group = keyed.get((sandboxed, key)) or _KeywordGroup(_when_getter(atom.path))
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
