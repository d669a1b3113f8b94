"""Which expression signals can change when a rule writes state, per policy.

After a `set`/`unset` the interpreter forgets the expression signals computed so far, so that a
later read sees the new state. A signal whose expressions (its `expr`, `let:` bindings, `transform`
and `fallback`) read neither `state` nor, through `signals.NAME` / `signal_errors.NAME`, a signal
that does, has the same value before and after: it need not be computed again. Anything the
analysis cannot see through counts as reading state: `signals` or `signal_errors` read other than
by a literal field name (`signals[name]`, `keys(signals)`), and a comprehension or template loop
that binds one of the names of the scope. Only the event's own mutable value is `state`: the
event's fields, vars and external signals do not change during an evaluation.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterable, Mapping

from router.compile.ir import CompiledPolicy, CompiledSignal
from router.lang.expr.expression import Expression

SCOPE_NAMES = frozenset({"state", "signals", "signal_errors"})
_SIGNAL_ROOTS = frozenset({"signals", "signal_errors"})

_CACHE: weakref.WeakKeyDictionary[CompiledPolicy, frozenset[str]] = weakref.WeakKeyDictionary()


def state_dependent(policy: CompiledPolicy) -> frozenset[str]:
    """The policy's expression signals that may read state (directly or through other signals)."""
    found = _CACHE.get(policy)
    if found is None:
        found = _CACHE[policy] = _dependent(policy.signals)
    return found


def _dependent(signals: Mapping[str, CompiledSignal]) -> frozenset[str]:
    direct: dict[str, bool] = {}
    reads: dict[str, set[str]] = {}
    for name, spec in signals.items():
        if spec.external:
            continue
        opaque, used = _reads(_expressions(spec))
        direct[name], reads[name] = opaque, used
    dependent = {name for name, opaque in direct.items() if opaque}
    changed = True
    while changed:  # the closure over the signals each one reads (the compiler refuses cycles)
        changed = False
        for name, used in reads.items():
            if name not in dependent and used & dependent:
                dependent.add(name)
                changed = True
    return frozenset(dependent)


def _expressions(spec: CompiledSignal) -> list[Expression]:
    found = [e for e in (spec.expr, spec.transform, spec.fallback) if e is not None]
    return found + [expr for _, expr in spec.bindings]


def _reads(expressions: Iterable[Expression]) -> tuple[bool, set[str]]:
    """(whether the expressions may read state in a way that cannot be followed, the signals they
    read by name)."""
    used: set[str] = set()
    for expression in expressions:
        if not isinstance(expression.tree, ast.AST):
            return True, used
        for node in ast.walk(expression.tree):
            if isinstance(node, ast.Name):
                if node.id == "state" or (node.id in SCOPE_NAMES and not isinstance(node.ctx, ast.Load)):
                    return True, used
            elif isinstance(node, ast.arg) and node.arg in SCOPE_NAMES:
                return True, used
        signal_reads = _signal_reads(expression.tree)
        if signal_reads is None:
            return True, used
        used |= signal_reads
    return False, used


def _signal_reads(tree: ast.AST) -> set[str] | None:
    """The names of `signals.NAME` / `signal_errors.NAME` reads (also `signals['NAME']`); None when
    `signals` or `signal_errors` is read any other way."""
    named: set[int] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        base = node.value if isinstance(node, (ast.Attribute, ast.Subscript)) else None
        if not (isinstance(base, ast.Name) and base.id in _SIGNAL_ROOTS):
            continue
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            names.add(node.slice.value)
        else:
            return None
        named.add(id(base))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _SIGNAL_ROOTS and id(node) not in named:
            return None
    return names
