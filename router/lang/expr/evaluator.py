"""Evaluating expressions: the simpleeval `Evaluator` (the reference semantics, and the fallback
of the closures for comprehensions and slices), the bounded operators both use, and the one
translation of any failure into an ExpressionError that names the expression."""

from __future__ import annotations

import ast
import functools
import operator as op
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simpleeval import EvalWithCompoundTypes, InvalidExpression

from router.diagnostics.code_names import EVALUATION_LIMIT, FORBIDDEN_CONSTRUCT, UNKNOWN_FUNCTION
from router.diagnostics.errors import ExpressionError
from router.lang.budget import Budget, BudgetExceeded, active, size_of, spend
from router.lang.expr.closures import as_text
from router.lang.expr.syntax import CONSTANTS, describe
from router.lang.functions import FUNCTIONS, type_name

if TYPE_CHECKING:
    from router.lang.expr.expression import Expression, Template


@dataclass(frozen=True)
class Limits:
    """Resource bounds of single operations (per evaluator, never module globals); the total of one
    evaluation is bounded by its `router.lang.budget.Budget`."""

    max_string: int = 100_000
    max_power: int = 4_000
    max_int_bits: int = 14_000  # about 4,200 digits: what can still be written as text


DEFAULT_LIMITS = Limits()


def _ordering(compare: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """An ordering comparison where null is neither less nor greater than anything (false)."""

    def ordered(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return False
        return compare(a, b)

    return ordered


@functools.cache
def limited_operators(limits: Limits) -> dict[type[ast.AST], Callable[..., Any]]:
    """The bounded operators of `limits`, made once per Limits value (they keep no state; callers
    never change the mapping)."""
    def too_long() -> ExpressionError:
        return ExpressionError(f"result longer than {limits.max_string} items", code=EVALUATION_LIMIT)

    def bounded(result: Any) -> Any:
        if type(result) is int and result.bit_length() > limits.max_int_bits:
            raise ExpressionError(f"a number of more than {limits.max_int_bits} bits", code=EVALUATION_LIMIT)
        return result

    def add(a: Any, b: Any) -> Any:
        if hasattr(a, "__len__") and hasattr(b, "__len__"):
            if len(a) + len(b) > limits.max_string:
                raise too_long()
            spend(len(a) + len(b))
            return a + b
        return bounded(a + b)

    def mult(a: Any, b: Any) -> Any:
        for seq, times in ((a, b), (b, a)):
            if hasattr(seq, "__len__") and isinstance(times, int):
                if times * len(seq) > limits.max_string:
                    raise too_long()
                spend(max(0, times * len(seq)))
        return bounded(a * b)

    def power(a: Any, b: Any) -> Any:
        if abs(a) > limits.max_power or abs(b) > limits.max_power:
            raise ExpressionError(f"{a} ** {b} exceeds the power limit {limits.max_power}",
                                  code=EVALUATION_LIMIT)
        result = a**b
        if isinstance(result, complex):
            raise ExpressionError(f"{a} ** {b} is not a real number")
        return bounded(result)

    def modulo(a: Any, b: Any) -> Any:
        if isinstance(a, (str, bytes)):
            raise ExpressionError("'%' formatting is not supported; use a template such as '{x:.2f}'",
                                  code=EVALUATION_LIMIT)
        return a % b

    return {
        ast.Add: add, ast.Sub: op.sub, ast.Mult: mult, ast.Div: op.truediv, ast.FloorDiv: op.floordiv,
        ast.Mod: modulo, ast.Pow: power, ast.Eq: op.eq, ast.NotEq: op.ne, ast.Gt: _ordering(op.gt),
        ast.Lt: _ordering(op.lt), ast.GtE: _ordering(op.ge), ast.LtE: _ordering(op.le),
        ast.Not: op.not_, ast.USub: op.neg,
        ast.UAdd: op.pos, ast.In: lambda x, y: op.contains(y, x),
        ast.NotIn: lambda x, y: not op.contains(y, x), ast.Is: lambda x, y: x is y,
        ast.IsNot: lambda x, y: x is not y,
    }


class Evaluator(EvalWithCompoundTypes):  # type: ignore[misc]
    """Evaluates compiled expressions against one scope. Not shared between evaluations.

    Made for every template rendering and comprehension, so it is made cheaply: simpleeval's own
    constructor (which builds the operators, silences warnings and checks the functions on every
    call) runs once, for a prototype, and an instance makes its node table from the prototype's
    at its first node (an evaluator whose expressions all have closures never needs it).
    """

    def __init__(self, scope: Mapping[str, Any], *, limits: Limits | None = None) -> None:
        limits = limits or DEFAULT_LIMITS
        self.operators = limited_operators(limits)
        # what simpleeval's constructor sets; calls go to router.lang.functions (_eval_call)
        self.functions: dict[str, Any] = {"list": list, "tuple": tuple, "dict": dict, "set": set}
        self.names = scope
        self.allowed_attrs = None
        self.ATTR_INDEX_FALLBACK = True  # as simpleeval sets it (attributes go to _eval_attribute)
        self.scope = scope
        self.max_string = limits.max_string
        self.steps = 0

    @functools.cached_property
    def nodes(self) -> dict[type[ast.AST], Callable[[Any], Any]]:
        """The method of each node type, made at first use (most evaluators run only closures)."""
        return {kind: getattr(self, name) for kind, name in _node_methods().items()}

    def value(self, expression: Expression) -> Any:
        """Evaluate `expression`; any failure becomes an ExpressionError naming the source."""
        if expression.run is not None:
            return run_expression(expression, self.scope)
        with _budgeted(expression.source):
            try:
                return self.eval(expression.source, previously_parsed=expression.tree)
            except EVALUATION_FAILURES as exc:
                raise expression_error(exc, expression.source) from None

    def render(self, template: Template) -> Any:
        """The value of a template: its constant, its single value or its formatted text."""
        if template.expression is None:
            return template.constant
        return self.value(template.expression)

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        parts, length = [], 0
        for value in node.values:
            text = as_text(self._eval(value))
            length += len(text)
            if length > self.max_string:
                raise ExpressionError(f"result longer than {self.max_string} items", code=EVALUATION_LIMIT)
            parts.append(text)
        spend(length)
        return "".join(parts)

    def _eval_built(self, node: ast.AST) -> Any:
        """A comprehension, charged by its size to the evaluation budget."""
        result = self._eval_comprehension(node)
        spend(size_of(result))
        return result

    def _eval(self, node: ast.AST) -> Any:
        handler = self.nodes.get(type(node))
        if handler is None:
            raise ExpressionError(f"{describe(node)} is not allowed", code=FORBIDDEN_CONSTRUCT)
        self.steps += 1
        if self.steps & 255 == 0 and (budget := active()) is not None:  # loops run through here
            budget.check()
        return handler(node)

    def _eval_name(self, node: ast.Name) -> Any:
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        return self.scope.get(node.id)

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        base = self._eval(node.value)
        if isinstance(base, Mapping):
            return base.get(node.attr)
        if base is None:
            return None
        raise ExpressionError(f"cannot read field '{node.attr}' of a {type_name(base)}")

    def _eval_subscript(self, node: ast.Subscript) -> Any:
        base = self._eval(node.value)
        key = self._eval(node.slice)
        if base is None:
            return None
        if isinstance(base, Mapping):
            return base.get(key) if isinstance(key, (str, int, float, bool)) or key is None else None
        if isinstance(key, slice) or (isinstance(key, int) and not isinstance(key, bool)):
            try:
                return base[key]
            except IndexError:
                return None
        raise ExpressionError(f"cannot index a {type_name(base)} with a {type_name(key)}")

    def _eval_call(self, node: ast.Call) -> Any:
        assert isinstance(node.func, ast.Name)  # checked at compile time: a plain name
        name = node.func.id
        spec = FUNCTIONS.get(name)
        if spec is None:
            raise ExpressionError(f"unknown function '{name}'", code=UNKNOWN_FUNCTION)
        args = [self._eval(arg) for arg in node.args]
        return spec.impl(*args)


class _Prototype(Evaluator):
    """Runs simpleeval's own constructor once, to read the node table it builds."""

    def __init__(self) -> None:
        EvalWithCompoundTypes.__init__(self, operators={}, functions={}, names={})
        self.nodes[ast.Name] = self._eval_name
        self.nodes[ast.Attribute] = self._eval_attribute
        self.nodes[ast.Subscript] = self._eval_subscript
        self.nodes[ast.Call] = self._eval_call
        self.nodes[ast.ListComp] = self._eval_built
        self.nodes[ast.DictComp] = self._eval_built


@functools.cache
def _node_methods() -> dict[type[ast.AST], str]:
    """Each node type an Evaluator evaluates and the name of its method (simpleeval's table with
    this module's overrides)."""
    return {kind: method.__name__ for kind, method in _Prototype().nodes.items()}


def run_expression(expression: Expression, scope: Mapping[str, Any]) -> Any:
    """Evaluate a compiled expression's closures; any failure becomes an ExpressionError.

    Inside an evaluation it uses that evaluation's budget; alone, a budget of its own. (Without
    a context manager: this runs for every condition, template and signal.)
    """
    assert expression.run is not None
    if active() is None:
        with _budgeted(expression.source):
            return run_expression(expression, scope)
    try:
        return expression.run(scope)
    except EVALUATION_FAILURES as exc:
        raise expression_error(exc, expression.source) from None
    except BudgetExceeded as exc:
        exc.source = exc.source or expression.source
        raise


@contextmanager
def _budgeted(source: str) -> Iterator[None]:
    """Run under the active budget (or a new one); name `source` in a BudgetExceeded from inside."""
    try:
        if active() is None:
            with Budget().running():
                yield
        else:
            yield
    except BudgetExceeded as exc:
        exc.source = exc.source or source
        raise


EVALUATION_FAILURES = (ExpressionError, InvalidExpression, TypeError, ValueError, ZeroDivisionError,
                       OverflowError, KeyError, IndexError, AttributeError, RecursionError)


def expression_error(exc: BaseException, source: str) -> ExpressionError:
    """The ExpressionError, naming `source`, for a failure while evaluating it."""
    if isinstance(exc, ExpressionError):
        return ExpressionError(exc.message, source=source, code=exc.code)
    if isinstance(exc, InvalidExpression):
        return ExpressionError(str(exc), source=source, code=EVALUATION_LIMIT)
    if isinstance(exc, RecursionError):
        return ExpressionError("expression nested too deeply", source=source, code=EVALUATION_LIMIT)
    return ExpressionError(python_error(exc), source=source)


_PYTHON_WORDS = (("'NoneType'", "null"), ("NoneType", "null"), ("'str'", "string"), ("'int'", "number"),
                 ("'float'", "number"), ("'dict'", "object"), ("'list'", "array"), ("'bool'", "boolean"))


def python_error(exc: BaseException) -> str:
    """A Python error's text in the words of the policy language (null, number, array …)."""
    text = str(exc)
    for python, ours in _PYTHON_WORDS:
        text = text.replace(python, ours)
    return text or type(exc).__name__
