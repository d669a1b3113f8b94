"""Safe `when` expressions and `{…}` templates: simpleeval, parsed once, default-deny.

An expression is Python-like (`signals.p >= vars.threshold and not state.done`). Names are the
top-level fields of the evaluation scope, `a.b` reads a field of an object (null when missing),
calls reach only the helper functions of `router.lang.functions`. Templates are strings with `{expr}`
placeholders (f-string rules, `{x:.2f}` formats); a template that is exactly one placeholder
yields the value itself, not its text.
"""

from __future__ import annotations

import ast
import functools
import operator as op
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from simpleeval import EvalWithCompoundTypes, InvalidExpression

from router.diagnostics.code_names import (
    EVALUATION_LIMIT,
    FORBIDDEN_CONSTRUCT,
    INVALID_EXPRESSION,
    INVALID_TEMPLATE,
    UNKNOWN_FUNCTION,
)
from router.diagnostics.errors import ExpressionError
from router.lang.budget import Budget, BudgetExceeded, active, size_of, spend
from router.lang.expr.blocks import (
    Block,
    BlockSyntaxError,
    aggregate_tree,
    compile_block,
    is_block,
    render_block,
)
from router.lang.expr.closures import Run, as_text, compile_tree
from router.lang.functions import FUNCTIONS, NOT_LITERAL, type_name
from router.lang.scanning import top_level

CONSTANTS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
MAX_SOURCE_LENGTH = 20_000

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Store, ast.Attribute, ast.Subscript,
    ast.Slice, ast.Call, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.List,
    ast.Tuple, ast.Dict, ast.JoinedStr, ast.FormattedValue, ast.ListComp, ast.DictComp, ast.comprehension,
    ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult, ast.Div,
    ast.FloorDiv, ast.Mod, ast.Pow, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In,
    ast.NotIn, ast.Is, ast.IsNot,
)


@dataclass(frozen=True)
class Limits:
    """Resource bounds of single operations (per evaluator, never module globals); the total of one
    evaluation is bounded by its `router.lang.budget.Budget`."""

    max_string: int = 100_000
    max_power: int = 4_000
    max_int_bits: int = 14_000  # about 4,200 digits: what can still be written as text


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class ExpressionSyntaxError(Exception):
    """An expression or template that cannot compile; `offset` is 0-based within the source."""

    message: str
    offset: int = 0
    code: str = INVALID_EXPRESSION

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, eq=False)
class Expression:
    """A compiled expression: its source, tree, closures and the names, functions, paths it reads."""

    source: str
    tree: ast.expr
    names: frozenset[str] = field(default=frozenset())
    calls: tuple[tuple[str, int], ...] = ()
    paths: tuple[tuple[str, ...], ...] = ()
    literal_args: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    run: Run | None = field(default=None, repr=False)

    def conjuncts(self) -> list[Expression]:
        """Split a top-level `a and b and c` into its parts (for `router explain`)."""
        if isinstance(self.tree, ast.BoolOp) and isinstance(self.tree.op, ast.And):
            parsed = f"({self.source}\n)"
            return [replace(_from_tree(ast.get_source_segment(parsed, part) or "?", part),
                            run=_closures(part)) for part in self.tree.values]
        return [self]


@dataclass(frozen=True, eq=False)
class Template:
    """A compiled template: a constant, a single expression (typed value) or an f-string."""

    source: str
    constant: str | None = None
    expression: Expression | None = None
    block: Block | None = None  # a multi-line template with {for}/{if} lines

    @property
    def is_constant(self) -> bool:
        return self.expression is None


def compile_expression(source: str) -> Expression:
    """Parse and check an expression; raise ExpressionSyntaxError on any problem."""
    if not isinstance(source, str) or not source.strip():
        raise ExpressionSyntaxError("empty expression")
    if len(source) > MAX_SOURCE_LENGTH:
        raise ExpressionSyntaxError(f"expression is longer than {MAX_SOURCE_LENGTH} characters")
    text = source.strip()
    lead = len(source) - len(source.lstrip())
    try:  # parenthesized, so an expression may span lines (YAML folded scalars)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(f"({text}\n)", mode="eval").body
    except SyntaxError as exc:
        offset = max(0, (exc.offset or 2) - 2) + lead if exc.lineno in (None, 1) else lead
        raise ExpressionSyntaxError(f"invalid expression: {exc.msg}", offset) from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionSyntaxError("expression is nested too deeply") from None
    nodes = _all_nodes(tree)
    _check_tree(nodes, lead - 1)  # the parse added "(" in front
    facts = _facts(nodes)
    _prepare_calls(nodes, lead - 1)
    try:
        return Expression(text, tree, *facts, run=_closures(tree))
    except RecursionError:
        raise ExpressionSyntaxError("expression is nested too deeply") from None


def compile_template(source: str) -> Template:
    """Compile a `{…}` template string (a block template when it has `{for …}`/`{if …}` lines)."""
    if "{" not in source and "}" not in source:
        return Template(source, constant=source)
    if is_block(source):
        return _block_template(source)
    inner = source.strip()
    if inner.startswith("{") and not inner.startswith("{{") and inner.endswith("}") \
            and _single_placeholder(inner):
        return Template(source, expression=compile_expression(inner[1:-1]))
    return compile_text(source)


def compile_text(source: str) -> Template:
    """Compile `source` as text with `{…}` placeholders (never a single typed value)."""
    if "{" not in source and "}" not in source:
        return Template(source, constant=source)
    try:
        tree = ast.parse("f" + repr(_join_placeholder_lines(source)), mode="eval").body
    except SyntaxError as exc:
        offset = min(len(source), max(0, (exc.offset or 2) - 3))
        raise ExpressionSyntaxError(f"invalid template: {exc.msg}", offset, code=INVALID_TEMPLATE) from None
    nodes = _all_nodes(tree)
    _check_tree(nodes, 0)
    facts = _facts(nodes)
    _prepare_calls(nodes, 0)
    try:
        return Template(source, expression=Expression(source, tree, *facts, run=_closures(tree)))
    except RecursionError:
        raise ExpressionSyntaxError("template is nested too deeply", code=INVALID_TEMPLATE) from None


def _block_template(source: str) -> Template:
    try:
        block = compile_block(source)
    except BlockSyntaxError as exc:
        raise ExpressionSyntaxError(f"invalid template: {exc.message}", exc.offset,
                                    code=INVALID_TEMPLATE) from None
    names: set[str] = set()
    paths: list[tuple[str, ...]] = []
    for expr, outer in zip(block.expressions, block.outer, strict=True):
        names |= expr.names - outer
        paths += [p for p in expr.paths if p[0] not in outer]
    expression = Expression(
        source, aggregate_tree(block), frozenset(names), tuple(c for e in block.expressions for c in e.calls),
        tuple(paths), tuple(a for e in block.expressions for a in e.literal_args),
        run=lambda scope: render_block(block, scope))
    return Template(source, expression=expression, block=block)


def compile_part(tree: ast.AST) -> Run:
    """The closures of a subtree of a compiled (checked, prepared) expression."""
    return _closures(tree)


def _closures(tree: ast.AST) -> Run:
    return compile_tree(tree, operators=_default_operators(), constants=CONSTANTS, fallback=_fallback,
                        max_string=DEFAULT_LIMITS.max_string)


def _fallback(scope: Mapping[str, Any], node: ast.AST) -> Any:
    """A subtree the closures leave to simpleeval; its refusals (IterableTooLong, NumberTooHigh,
    FeatureNotAvailable …, all InvalidExpression) become an ExpressionError (RT403) like every
    other failure, so a compiled condition fails its rule instead of reaching the caller."""
    try:
        return Evaluator(scope, limits=DEFAULT_LIMITS)._eval(node)
    except InvalidExpression as exc:
        raise ExpressionError(str(exc) or type(exc).__name__, code=EVALUATION_LIMIT) from None


@functools.cache
def _default_operators() -> dict[type[ast.AST], Callable[..., Any]]:
    """The operators of DEFAULT_LIMITS, made once (they keep no state)."""
    return _limited(DEFAULT_LIMITS)


def _all_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of `tree` in `ast.walk`'s order (breadth first), without its generator overhead.

    Left out: the `Load`/`Store` markers of names, attributes and subscripts (allowed everywhere,
    read by no pass), and the fields of leaves (a `Name`'s id, a `Constant`'s value)."""
    nodes = [tree]
    for node in nodes:  # the loop also visits the children appended while it runs
        kind = type(node)
        if kind is ast.Name or kind is ast.Constant:
            continue
        for name in node._fields:
            if name == "ctx":
                continue
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                nodes.append(value)
            elif isinstance(value, list):
                nodes.extend(v for v in value if isinstance(v, ast.AST))
    return nodes


# Argument nodes `ast.literal_eval` always refuses (it builds four closures to say so).
_NEVER_LITERAL: frozenset[type[ast.AST]] = frozenset({
    ast.Name, ast.Attribute, ast.Subscript, ast.Compare, ast.BoolOp, ast.IfExp, ast.JoinedStr})


def _literal(node: ast.expr) -> Any:
    if type(node) is ast.Constant:
        return node.value
    if type(node) in _NEVER_LITERAL:
        return NOT_LITERAL
    if type(node) is ast.List:
        values = [e.value for e in node.elts if type(e) is ast.Constant]
        if len(values) == len(node.elts):
            return values  # what literal_eval returns for a list of constants
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def _prepare_calls(nodes: list[ast.AST], lead: int) -> None:
    """Replace literal arguments by their load-time form (compiled regexes, keyword sets)."""
    for node in nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        spec = FUNCTIONS.get(node.func.id)
        if spec is None or spec.prepare is None:
            continue
        try:
            replacements = spec.prepare(tuple(_literal(arg) for arg in node.args))
        except ExpressionError as exc:
            raise ExpressionSyntaxError(exc.message, lead + node.col_offset, code=exc.code) from None
        for index, value in replacements.items():
            node.args[index] = ast.copy_location(ast.Constant(value=value), node.args[index])


def _single_placeholder(text: str) -> bool:
    depth = 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0 and i < len(text) - 1:
            return False
    outside = _outside_brackets(text[1:-1])
    return ":" not in outside and re.search(r"![rsa]\s*$", outside) is None


def _join_placeholder_lines(source: str) -> str:
    """Line breaks inside `{…}` become spaces (f-string placeholders cannot hold them)."""
    if "\n" not in source:
        return source
    out, depth, i = [], 0, 0
    while i < len(source):
        ch = source[i]
        if depth == 0 and source.startswith(("{{", "}}"), i):
            out.append(source[i : i + 2])
            i += 2
            continue
        depth += 1 if ch == "{" else -1 if ch == "}" and depth > 0 else 0
        out.append(" " if ch == "\n" and depth > 0 else ch)
        i += 1
    return "".join(out)


def _outside_brackets(text: str) -> str:
    return "".join(text[i] for i in top_level(text))


# Allowed node types that need no check of their own (most nodes: the loop below skips them).
_ALLOWED_TYPES = frozenset(_ALLOWED_NODES)
_PLAIN_NODES = _ALLOWED_TYPES - {ast.Attribute, ast.Name, ast.Call, ast.FormattedValue}


def _check_tree(nodes: list[ast.AST], lead: int) -> None:
    plain = _PLAIN_NODES
    for node in nodes:
        if type(node) not in plain:
            _check_node(node, lead)


def _check_node(node: ast.AST, lead: int) -> None:
    offset = max(0, lead + getattr(node, "col_offset", 0))
    if type(node) not in _ALLOWED_TYPES and not isinstance(node, _ALLOWED_NODES):
        raise ExpressionSyntaxError(f"{_describe(node)} is not allowed in expressions", offset,
                                    code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise ExpressionSyntaxError(f"field '{node.attr}' is not accessible (leading '_')",
                                    offset, code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        raise ExpressionSyntaxError(f"name '{node.id}' is not accessible", offset, code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise ExpressionSyntaxError("only helper functions can be called (no methods)",
                                        offset, code=FORBIDDEN_CONSTRUCT)
        if node.keywords:
            raise ExpressionSyntaxError("keyword arguments are not supported", offset,
                                        code=FORBIDDEN_CONSTRUCT)
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise ExpressionSyntaxError("*args are not supported", offset, code=FORBIDDEN_CONSTRUCT)
    if isinstance(node, ast.FormattedValue) and node.conversion != -1:
        raise ExpressionSyntaxError("conversions such as !r and !s are not supported in templates",
                                    offset, code=INVALID_TEMPLATE)
    if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
        spec = node.format_spec
        if not all(isinstance(v, ast.Constant) for v in getattr(spec, "values", [])):
            raise ExpressionSyntaxError("nested placeholders in a format spec are not allowed",
                                        offset, code=INVALID_TEMPLATE)
        text = "".join(str(v.value) for v in getattr(spec, "values", []))
        if re.search(r"\d{4,}", text):
            raise ExpressionSyntaxError(f"format spec '{text}' asks for a width over 999",
                                        offset, code=INVALID_TEMPLATE)


def _describe(node: ast.AST) -> str:
    names = {ast.Lambda: "lambda", ast.NamedExpr: "':=' assignment", ast.Await: "await",
             ast.Yield: "yield", ast.SetComp: "a set comprehension",
             ast.GeneratorExp: "a generator expression", ast.Starred: "'*' unpacking",
             ast.Set: "a set literal", ast.BitAnd: "'&' (use 'and')", ast.BitOr: "'|' (use 'or')",
             ast.Invert: "'~'", ast.BitXor: "'^'", ast.LShift: "'<<'", ast.RShift: "'>>'"}
    return names.get(type(node), type(node).__name__)


Facts = tuple[frozenset[str], tuple[tuple[str, int], ...], tuple[tuple[str, ...], ...],
              tuple[tuple[str, tuple[Any, ...]], ...]]


def _from_tree(source: str, tree: ast.expr) -> Expression:
    return Expression(source, tree, *_facts(_all_nodes(tree)))


def _facts(nodes: list[ast.AST]) -> Facts:
    """What the nodes of a tree read: names, calls with their arity, field paths, literal arguments."""
    bound = {t.id for c in nodes if isinstance(c, ast.comprehension)
             for t in ast.walk(c.target) if isinstance(t, ast.Name)}
    names = set()
    calls = []
    literal_args = []
    callee = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            names.add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            callee.add(node.func.id)
            calls.append((node.func.id, len(node.args)))
            literal_args.append((node.func.id, tuple(a.value if isinstance(a, ast.Constant) else None
                                                     for a in node.args)))
    return (frozenset(names - callee - CONSTANTS.keys()), tuple(calls), tuple(_paths(nodes, bound)),
            tuple(literal_args))


def _paths(nodes: list[ast.AST], bound: set[str]) -> list[tuple[str, ...]]:
    """Root-anchored field paths such as ('signals', 'p_complex')."""
    found: list[tuple[str, ...]] = []
    inner: set[int] = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    for node in nodes:
        if id(node) in inner or not isinstance(node, (ast.Attribute, ast.Subscript, ast.Name)):
            continue
        parts: list[str] = []
        cursor: ast.AST = node
        while True:
            if isinstance(cursor, ast.Attribute):
                parts.append(cursor.attr)
            elif isinstance(cursor, ast.Subscript):
                key = cursor.slice
                parts = [] if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) \
                    else [*parts, key.value]
            elif isinstance(cursor, ast.Name):
                if cursor.id not in bound and cursor.id not in CONSTANTS:
                    found.append((cursor.id, *reversed(parts)))
                break
            else:
                break
            inner.add(id(cursor.value))
            cursor = cursor.value
    return found


def _ordering(compare: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """An ordering comparison where null is neither less nor greater than anything (false)."""

    def ordered(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return False
        return compare(a, b)

    return ordered


def _limited(limits: Limits) -> dict[type[ast.AST], Callable[..., Any]]:
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
    """Evaluates compiled expressions against one scope. Not shared between evaluations."""

    def __init__(self, scope: Mapping[str, Any], *, limits: Limits | None = None) -> None:
        super().__init__(operators=_limited(limits or Limits()), functions={}, names=scope)
        self.scope = scope
        self.max_string = (limits or Limits()).max_string
        self.nodes[ast.Name] = self._eval_name
        self.nodes[ast.Attribute] = self._eval_attribute
        self.nodes[ast.Subscript] = self._eval_subscript
        self.nodes[ast.Call] = self._eval_call
        self.nodes[ast.ListComp] = self._eval_built
        self.nodes[ast.DictComp] = self._eval_built
        self.steps = 0

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
            raise ExpressionError(f"{_describe(node)} is not allowed", code=FORBIDDEN_CONSTRUCT)
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


def run_expression(expression: Expression, scope: Mapping[str, Any]) -> Any:
    """Evaluate a compiled expression's closures; any failure becomes an ExpressionError.

    Inside an evaluation it uses that evaluation's budget; alone, a budget of its own.
    """
    assert expression.run is not None
    with _budgeted(expression.source):
        try:
            return expression.run(scope)
        except EVALUATION_FAILURES as exc:
            raise expression_error(exc, expression.source) from None


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
