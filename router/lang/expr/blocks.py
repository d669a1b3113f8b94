"""Multi-line templates: text lines with `{…}` placeholders plus line forms for loops and choices.

A template with at least one line that is exactly `{for NAME in EXPR}` or `{if EXPR}` (spaces
around allowed) is a block template. Its forms, each alone on its line:

    {for NAME in EXPR}   repeat the lines up to the matching {end} for each item of an array
    {if EXPR}            the lines up to {elif …}, {else} or {end} when EXPR is true
    {elif EXPR}          …
    {else}
    {end}

A form's line (with its line break) produces nothing; every other line is text with `{…}`
placeholders, exactly as in one-line templates. The result is text; it ends with a line break only
when the template does (YAML `|` keeps the last one, `|-` drops it). `for` over null repeats
nothing; over anything but an array it is an error. The output is at most MAX_OUTPUT characters.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from router.diagnostics.code_names import EVALUATION_LIMIT
from router.diagnostics.errors import ExpressionError
from router.lang.budget import spend
from router.lang.expr.closures import as_text
from router.lang.functions import type_name
from router.lang.truth import expression_truthy

if TYPE_CHECKING:
    from router.lang.expr.expression import Expression

MAX_OUTPUT = 100_000  # characters of one rendered block template
MAX_DEPTH = 16  # nested for/if forms

_FORM = re.compile(r"^[ \t]*\{[ \t]*(for|if|elif|else|end)\b(.*)\}[ \t]*$")
_OPENER = re.compile(r"^[ \t]*\{[ \t]*(?:for|if)\b.*\}[ \t]*$", re.MULTILINE)
_FOR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s+in\s+(\S.*)$", re.DOTALL)


class BlockSyntaxError(Exception):
    """A block template that cannot compile; `offset` is 0-based within the whole source."""

    def __init__(self, message: str, offset: int) -> None:
        self.message, self.offset = message, offset
        super().__init__(message)


@dataclass(frozen=True, eq=False)
class Text:
    line: int
    expression: Expression | None  # None: constant text
    constant: str = ""


@dataclass(frozen=True, eq=False)
class Loop:
    line: int
    name: str
    items: Expression
    body: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Choice:
    line: int
    branches: tuple[tuple[Expression | None, tuple[Node, ...]], ...]  # None: {else}


Node = Text | Loop | Choice


@dataclass(frozen=True, eq=False)
class Block:
    """A compiled block template: its nodes, the loop names it introduces, the expressions it holds."""

    source: str
    nodes: tuple[Node, ...]
    loop_names: frozenset[str]
    expressions: tuple[Expression, ...] = field(default=())
    outer: tuple[frozenset[str], ...] = field(default=())  # the loop names around each expression
    trailing_newline: bool = False


def is_block(source: str) -> bool:
    """Whether `source` is a block template (has a `{for …}` or `{if …}` line)."""
    return "\n" in source and _OPENER.search(source) is not None


def compile_block(source: str) -> Block:
    """Parse a block template; raise BlockSyntaxError (located) or ExpressionSyntaxError."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    parser = _Parser(source, lines, offsets)
    nodes = parser.sequence(0, stop=())
    if parser.index < len(lines):  # a stray {elif}, {else} or {end}
        kind = parser.form(parser.index)
        raise BlockSyntaxError(f"{{{kind[0] if kind else 'end'}}} without an opening {{for …}} or "
                               "{if …} line", offsets[parser.index])
    return Block(source, tuple(nodes), frozenset(parser.loop_names), tuple(parser.expressions),
                 tuple(parser.outer), source.endswith("\n"))


class _Parser:
    def __init__(self, source: str, lines: list[str], offsets: list[int]) -> None:
        self.source, self.lines, self.offsets = source, lines, offsets
        self.index = 0
        self.loop_names: set[str] = set()
        self.expressions: list[Expression] = []
        self.outer: list[frozenset[str]] = []  # the loop names around each expression
        self.active: list[str] = []

    def form(self, index: int) -> tuple[str, str] | None:
        found = _FORM.match(self.lines[index].rstrip("\r\n"))
        return (found.group(1), found.group(2)) if found else None

    def sequence(self, depth: int, stop: tuple[str, ...]) -> list[Node]:
        nodes: list[Node] = []
        text_start: int | None = None
        while self.index < len(self.lines):
            form = self.form(self.index)
            if form is None:
                text_start = self.index if text_start is None else text_start
                self.index += 1
                continue
            if text_start is not None:
                nodes.append(self._text(text_start, self.index))
                text_start = None
            kind, rest = form
            if kind in ("elif", "else", "end"):
                if not stop:
                    break  # a stray closing form: compile_block reports it
                return nodes
            if depth >= MAX_DEPTH:
                raise BlockSyntaxError(f"more than {MAX_DEPTH} nested {{for}}/{{if}} forms",
                                       self.offsets[self.index])
            nodes.append(self._loop(rest, depth) if kind == "for" else self._choice(rest, depth))
        if text_start is not None:
            nodes.append(self._text(text_start, self.index))
        if stop:
            raise BlockSyntaxError("missing {end} for the form that starts here", self._opener_offset)
        return nodes

    _opener_offset = 0

    def _text(self, start: int, end: int) -> Text:
        from router.lang.expr.expression import compile_text
        from router.lang.expr.syntax import ExpressionSyntaxError

        chunk = "".join(self.lines[start:end])
        try:
            template = compile_text(chunk)
        except ExpressionSyntaxError as exc:
            raise ExpressionSyntaxError(exc.message, self.offsets[start] + exc.offset, exc.code) from None
        if template.expression is None:
            return Text(start + 1, None, template.constant or "")
        self._keep(template.expression)
        return Text(start + 1, template.expression)

    def _expression(self, text: str, what: str) -> Expression:
        from router.lang.expr.expression import compile_expression
        from router.lang.expr.syntax import ExpressionSyntaxError

        offset = self.offsets[self.index] + self.lines[self.index].find(text) if text.strip() else \
            self.offsets[self.index]
        if not text.strip():
            raise BlockSyntaxError(f"{{{what}}} needs an expression: {{{what} EXPR}}", offset)
        try:
            expr = compile_expression(text)
        except ExpressionSyntaxError as exc:
            raise ExpressionSyntaxError(f"{exc.message} in {{{what} …}}", offset + exc.offset,
                                        exc.code) from None
        self._keep(expr)
        return expr

    def _keep(self, expr: Expression) -> None:
        self.expressions.append(expr)
        self.outer.append(frozenset(self.active))

    def _open(self, depth: int, stop: tuple[str, ...]) -> tuple[list[Node], tuple[str, str] | None]:
        opener = self.offsets[self.index]
        self.index += 1
        saved, self._opener_offset = self._opener_offset, opener
        body = self.sequence(depth + 1, stop)
        self._opener_offset = saved
        return body, self.form(self.index) if self.index < len(self.lines) else None

    def _loop(self, rest: str, depth: int) -> Loop:
        line = self.index + 1
        found = _FOR.match(rest)
        if found is None:
            raise BlockSyntaxError("write the loop as {for NAME in EXPR}", self.offsets[self.index])
        name = found.group(1)
        items = self._expression(found.group(2), "for")
        self.loop_names.add(name)
        self.active.append(name)
        body, closing = self._open(depth, ("end",))
        self.active.pop()
        if closing is None or closing[0] != "end":
            got = closing[0] if closing else ""
            raise BlockSyntaxError(f"{{for {name} in …}} ends with {{end}}, not {{{got}}}",
                                   self.offsets[min(self.index, len(self.lines) - 1)])
        self._no_rest(closing, "end")
        self.index += 1
        return Loop(line, name, items, tuple(body))

    def _choice(self, rest: str, depth: int) -> Choice:
        line = self.index + 1
        branches: list[tuple[Expression | None, tuple[Node, ...]]] = []
        condition: Expression | None = self._expression(rest, "if")
        while True:
            body, closing = self._open(depth, ("elif", "else", "end"))
            branches.append((condition, tuple(body)))
            assert closing is not None  # sequence() raised otherwise
            kind, more = closing
            if kind == "end":
                self._no_rest(closing, "end")
                self.index += 1
                return Choice(line, tuple(branches))
            if condition is None:
                raise BlockSyntaxError(f"{{{kind}}} after {{else}}", self.offsets[self.index])
            if kind == "else":
                self._no_rest(closing, "else")
                condition = None
            else:
                condition = self._expression(more, "elif")

    def _no_rest(self, form: tuple[str, str], kind: str) -> None:
        if form[1].strip():
            raise BlockSyntaxError(f"{{{kind}}} takes nothing after it", self.offsets[self.index])


def render_block(block: Block, scope: Mapping[str, Any]) -> str:
    """The text of a block template in `scope`; ExpressionError naming the template line on failure."""
    out: list[str] = []
    _render(block.nodes, scope, out, [0])
    text = "".join(out)
    if not block.trailing_newline and text.endswith("\n"):
        text = text[:-1]
    return text


def _render(nodes: tuple[Node, ...], scope: Mapping[str, Any], out: list[str], length: list[int]) -> None:
    from router.lang.expr.evaluator import run_expression
    from router.lang.expr.layered import Layered

    for node in nodes:
        try:
            if isinstance(node, Text):
                text = node.constant if node.expression is None else \
                    as_text(run_expression(node.expression, scope))
                length[0] += len(text)
                if length[0] > MAX_OUTPUT:
                    raise ExpressionError(f"the template's output is longer than {MAX_OUTPUT:,} "
                                          "characters", code=EVALUATION_LIMIT)
                out.append(text)
            elif isinstance(node, Loop):
                items = run_expression(node.items, scope)
                if items is None:
                    continue
                if not isinstance(items, (list, tuple)):
                    raise ExpressionError(f"{{for {node.name} in …}} needs an array, got a "
                                          f"{type_name(items)}" + (" (use keys() or values())"
                                                                   if isinstance(items, Mapping) else ""))
                for item in items:
                    spend(1)
                    _render(node.body, Layered(scope, {node.name: item}), out, length)
            else:
                for condition, body in node.branches:
                    if condition is None or expression_truthy(run_expression(condition, scope)):
                        _render(body, scope, out, length)
                        break
        except ExpressionError as exc:
            if exc.message.startswith("template line "):
                raise
            raise ExpressionError(f"template line {node.line}: {exc.message}", source=exc.source,
                                  code=exc.code) from None


def aggregate_tree(block: Block) -> ast.expr:
    """One tree holding every expression of the block (for checks that walk trees)."""
    return ast.List(elts=[e.tree for e in block.expressions], ctx=ast.Load())
