"""Compile a checked expression tree into nested Python closures with the Evaluator's semantics.

simpleeval walks the tree on every evaluation; rule conditions run for every event inside the
agent loop, so each expression is turned once into closures. Comprehensions have closures that
follow simpleeval's own loop (`_comprehension`); node types without a closure here (slices)
evaluate that subtree through the simpleeval-based `Evaluator`, so the semantics stay one:
`tests/lang/test_expr_compiler.py` checks with hypothesis that both agree.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from simpleeval import MAX_COMPREHENSION_LENGTH  # items one comprehension (and those in it) iterates

from router.diagnostics.code_names import EVALUATION_LIMIT, UNKNOWN_FUNCTION
from router.diagnostics.errors import ExpressionError
from router.lang.budget import active, size_of, spend
from router.lang.functions import FUNCTIONS, type_name

Run = Callable[[Mapping[str, Any]], Any]
_RAW_ORDERING: dict[type[ast.AST], Callable[[Any, Any], Any]] = {
    ast.Gt: operator.gt, ast.Lt: operator.lt, ast.GtE: operator.ge, ast.LtE: operator.le}
Fallback = Callable[[Mapping[str, Any], ast.AST], Any]
BUDGET_CHECK_EVERY = 32  # iterations between two looks at the evaluation's time budget


def compile_tree(node: ast.AST, *, operators: Mapping[type[ast.AST], Callable[..., Any]],
                 constants: Mapping[str, Any], fallback: Fallback, max_string: int) -> Run:
    """Closures for `node`; unsupported node types go through `fallback(scope, node)`."""
    return _Compiler(operators, constants, fallback, max_string).build(node)


def as_text(value: Any) -> str:
    """A value inside a text template: strings as they are, null/true/false and arrays as JSON."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _field(value: Any, attr: str) -> Any:
    """`value.attr`: a field of an object, null for null, an error for anything else."""
    if type(value) is dict or isinstance(value, Mapping):
        return value.get(attr)
    if value is None:
        return None
    raise ExpressionError(f"cannot read field '{attr}' of a {type_name(value)}")


class _Compiler:
    def __init__(self, operators: Mapping[type[ast.AST], Callable[..., Any]],
                 constants: Mapping[str, Any], fallback: Fallback, max_string: int) -> None:
        self.operators, self.constants = operators, constants
        self.fallback, self.max_string = fallback, max_string

    def build(self, node: ast.AST) -> Run:
        kind = type(node)
        method = _METHODS[kind] if kind in _METHODS else _METHODS.setdefault(
            kind, getattr(_Compiler, f"_{kind.__name__}", None))
        if method is None:
            fallback = self.fallback
            return lambda scope: fallback(scope, node)
        result: Run = method(self, node)
        return result

    def _Constant(self, node: ast.Constant) -> Run:
        value = node.value
        return lambda scope: value

    def _Name(self, node: ast.Name) -> Run:
        name = node.id
        if name in self.constants:
            constant = self.constants[name]
            return lambda scope: constant
        return lambda scope: scope.get(name)

    def _Attribute(self, node: ast.Attribute) -> Run:
        attr = node.attr
        if isinstance(node.value, ast.Name) and node.value.id not in self.constants:
            name = node.value.id  # `state.x`: one closure instead of two
            return lambda scope: _field(scope.get(name), attr)
        base = self.build(node.value)
        return lambda scope: _field(base(scope), attr)

    def _Subscript(self, node: ast.Subscript) -> Run:
        if isinstance(node.slice, ast.Slice):
            fallback = self.fallback
            return lambda scope: fallback(scope, node)
        base, key = self.build(node.value), self.build(node.slice)

        def subscript(scope: Mapping[str, Any]) -> Any:
            value, index = base(scope), key(scope)
            if value is None:
                return None
            if isinstance(value, Mapping):
                return value.get(index) if isinstance(index, (str, int, float, bool)) or index is None \
                    else None
            if isinstance(index, int) and not isinstance(index, bool):
                try:
                    return value[index]
                except IndexError:
                    return None
            raise ExpressionError(f"cannot index a {type_name(value)} with a {type_name(index)}")

        return subscript

    def _Call(self, node: ast.Call) -> Run:
        assert isinstance(node.func, ast.Name)
        spec = FUNCTIONS.get(node.func.id)
        if spec is None:
            name = node.func.id

            def unknown(scope: Mapping[str, Any]) -> Any:
                raise ExpressionError(f"unknown function '{name}'", code=UNKNOWN_FUNCTION)

            return unknown
        impl, args = spec.impl, [self.build(a) for a in node.args]
        if len(args) == 1:
            (only,) = args
            return lambda scope: impl(only(scope))
        if len(args) == 2:
            first, second = args
            return lambda scope: impl(first(scope), second(scope))
        return lambda scope: impl(*[arg(scope) for arg in args])

    def _BinOp(self, node: ast.BinOp) -> Run:
        op, left, right = self.operators[type(node.op)], self.build(node.left), self.build(node.right)
        return lambda scope: op(left(scope), right(scope))

    def _UnaryOp(self, node: ast.UnaryOp) -> Run:
        op, operand = self.operators[type(node.op)], self.build(node.operand)
        return lambda scope: op(operand(scope))

    def _BoolOp(self, node: ast.BoolOp) -> Run:
        parts = [self.build(v) for v in node.values]
        if len(parts) == 2:  # Python's own `and`/`or` have the same value semantics
            first, second = parts
            if isinstance(node.op, ast.And):
                return lambda scope: first(scope) and second(scope)
            return lambda scope: first(scope) or second(scope)
        if isinstance(node.op, ast.And):
            def all_of(scope: Mapping[str, Any]) -> Any:
                result: Any = False
                for part in parts:
                    result = part(scope)
                    if not result:
                        break
                return result

            return all_of

        def any_of(scope: Mapping[str, Any]) -> Any:
            result: Any = False
            for part in parts:
                result = part(scope)
                if result:
                    break
            return result

        return any_of

    def _Compare(self, node: ast.Compare) -> Run:
        first = self.build(node.left)
        steps = [(self.operators[type(o)], self.build(c)) for o, c in zip(node.ops, node.comparators,
                                                                           strict=True)]
        if len(steps) == 1:
            ((op, other),) = steps
            raw = _RAW_ORDERING.get(type(node.ops[0]))
            if raw is not None:  # inline the null check of ordering comparisons
                def ordered(scope: Mapping[str, Any]) -> Any:
                    a, b = first(scope), other(scope)
                    return False if a is None or b is None else raw(a, b)

                return ordered
            return lambda scope: op(first(scope), other(scope))

        def chain(scope: Mapping[str, Any]) -> Any:
            right = first(scope)
            result: Any = True
            for op, other in steps:
                left, right = right, other(scope)
                result = op(left, right)
                if not result:
                    break
            return result

        return chain

    def _IfExp(self, node: ast.IfExp) -> Run:
        test, body, orelse = self.build(node.test), self.build(node.body), self.build(node.orelse)
        return lambda scope: body(scope) if test(scope) else orelse(scope)

    def _List(self, node: ast.List) -> Run:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            fallback = self.fallback
            return lambda scope: fallback(scope, node)
        items = [self.build(e) for e in node.elts]
        return lambda scope: [item(scope) for item in items]

    def _Tuple(self, node: ast.Tuple) -> Run:
        items = [self.build(e) for e in node.elts]
        return lambda scope: tuple(item(scope) for item in items)

    def _Dict(self, node: ast.Dict) -> Run:
        if any(k is None for k in node.keys):
            fallback = self.fallback
            return lambda scope: fallback(scope, node)
        pairs = [(self.build(k), self.build(v)) for k, v in zip(node.keys, node.values, strict=True)
                 if k is not None]
        return lambda scope: {key(scope): value(scope) for key, value in pairs}

    def _JoinedStr(self, node: ast.JoinedStr) -> Run:
        parts = [self.build(v) for v in node.values]
        limit = self.max_string

        def joined(scope: Mapping[str, Any]) -> str:
            out, length = [], 0
            for part in parts:
                text = as_text(part(scope))
                length += len(text)
                if length > limit:
                    raise ExpressionError(f"result longer than {limit} items", code=EVALUATION_LIMIT)
                out.append(text)
            spend(length)
            return "".join(out)

        return joined

    def _FormattedValue(self, node: ast.FormattedValue) -> Run:
        inner = self.build(node.value)
        if node.format_spec is None:
            return inner
        spec = "".join(str(v.value) for v in getattr(node.format_spec, "values", [])
                       if isinstance(v, ast.Constant))
        pattern = "{:" + spec + "}"
        return lambda scope: pattern.format(inner(scope))


    def _ListComp(self, node: ast.ListComp) -> Run:
        return self._comprehension(node, node.generators, (self.build(node.elt),))

    def _DictComp(self, node: ast.DictComp) -> Run:
        return self._comprehension(node, node.generators, (self.build(node.key), self.build(node.value)))

    def _comprehension(self, node: ast.AST, generators: list[ast.comprehension],
                       parts: tuple[Run, ...]) -> Run:
        """A list or dict comprehension with simpleeval's semantics (EvalWithCompoundTypes): the
        loop names on top of the scope, generators left to right, targets unpacked with `zip`,
        at most MAX_COMPREHENSION_LENGTH items iterated (nested comprehensions count with their
        outer one), the result charged to the budget by its size, whose time is checked as it runs."""
        bound = {t.id for g in generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
        if bound & set(self.constants):  # `null` bound as a loop name: simpleeval's own rules
            fallback = self.fallback
            return lambda scope: fallback(scope, node)
        loops = tuple((g.target, self.build(g.iter), tuple(self.build(i) for i in g.ifs)) for g in generators)
        dict_result = isinstance(node, ast.DictComp)

        def comprehension(scope: Mapping[str, Any]) -> Any:
            local = _Loop(scope)
            result: Any = {} if dict_result else []
            _generate(loops, 0, local, local.counter, result, parts)
            spend(size_of(result))
            return result

        return comprehension


class _Loop(Mapping[str, Any]):
    """The scope of a comprehension's body: its loop names, then the scope it is in."""

    __slots__ = ("base", "counter", "names")

    def __init__(self, base: Mapping[str, Any]) -> None:
        self.base = base
        self.names: dict[str, Any] = {}
        self.counter: list[int] = base.counter if isinstance(base, _Loop) else [0]  # the outer loop's

    def get(self, name: str, default: Any = None) -> Any:
        names = self.names
        return names[name] if name in names else self.base.get(name, default)

    def __getitem__(self, name: str) -> Any:
        return self.names[name] if name in self.names else self.base[name]

    def __contains__(self, name: object) -> bool:
        return name in self.names or name in self.base

    def __iter__(self) -> Iterator[str]:
        yield from self.names
        yield from (n for n in self.base if n not in self.names)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _generate(loops: tuple[tuple[ast.expr, Run, tuple[Run, ...]], ...], index: int, local: _Loop,
              counter: list[int], result: Any, parts: tuple[Run, ...]) -> None:
    target, items, conditions = loops[index]
    last = index == len(loops) - 1
    for item in items(local):
        counter[0] += 1
        if counter[0] > MAX_COMPREHENSION_LENGTH:
            raise ExpressionError("Comprehension generates too many elements", code=EVALUATION_LIMIT)
        if not counter[0] % BUDGET_CHECK_EVERY and (budget := active()) is not None:
            budget.check()
        _bind(target, item, local.names)
        if all(condition(local) for condition in conditions):
            if not last:
                _generate(loops, index + 1, local, counter, result, parts)
            elif len(parts) == 2:
                result[parts[0](local)] = parts[1](local)
            else:
                result.append(parts[0](local))


def _bind(target: Any, value: Any, names: dict[str, Any]) -> None:
    """simpleeval's `recurse_targets`: a name takes the value, a tuple or list unpacks it with zip."""
    if isinstance(target, ast.Name):
        names[target.id] = value
    else:
        for part, item in zip(target.elts, value, strict=False):  # as simpleeval unpacks
            _bind(part, item, names)


# The builder of each node type (None: through the fallback), looked up once per type.
_METHODS: dict[type[ast.AST], Callable[[_Compiler, Any], Run] | None] = {}
