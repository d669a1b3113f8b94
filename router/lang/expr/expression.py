"""Safe `when` expressions and `{…}` templates: parsed and checked once (default-deny), run as
closures.

An expression is Python-like (`signals.p >= vars.threshold and not state.done`). Names are the
top-level fields of the evaluation scope, `a.b` reads a field of an object (null when missing),
calls reach only the helper functions of `router.lang.functions`. Templates are strings with `{expr}`
placeholders (f-string rules, `{x:.2f}` formats); a template that is exactly one placeholder
yields the value itself, not its text.

What a tree may hold is checked in `syntax.py`, the closures are built in `closures.py`, and the
simpleeval `Evaluator` with the bounded operators is `evaluator.py`.
"""

from __future__ import annotations

import ast
import functools
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from simpleeval import InvalidExpression

from router.diagnostics.code_names import EVALUATION_LIMIT, INVALID_TEMPLATE
from router.diagnostics.errors import ExpressionError
from router.lang.expr.blocks import (
    Block,
    BlockSyntaxError,
    aggregate_tree,
    compile_block,
    is_block,
    render_block,
)
from router.lang.expr.closures import Run, compile_tree
from router.lang.expr.evaluator import DEFAULT_LIMITS, Evaluator, limited_operators
from router.lang.expr.syntax import (
    CONSTANTS,
    ExpressionSyntaxError,
    all_nodes,
    check_tree,
    prepare_calls,
    tree_facts,
)
from router.lang.scanning import top_level

MAX_SOURCE_LENGTH = 20_000


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
    nodes = all_nodes(tree)
    check_tree(nodes, lead - 1)  # the parse added "(" in front
    facts = tree_facts(nodes)
    prepare_calls(nodes, lead - 1)
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
    nodes = all_nodes(tree)
    check_tree(nodes, 0)
    facts = tree_facts(nodes)
    prepare_calls(nodes, 0)
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
    return limited_operators(DEFAULT_LIMITS)


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


def _from_tree(source: str, tree: ast.expr) -> Expression:
    return Expression(source, tree, *tree_facts(all_nodes(tree)))
