"""YAML text to plain data with the position of every value and key: the shape checked by the event
parser first (nesting, size, the deadline), then composed and built without recursion limits of
ruamel's constructor; aliases and merge keys counted."""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import main as ruamel_main
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import VersionedResolver

from router.diagnostics.code_names import (
    DUPLICATE_KEY,
    INVALID_VALUE,
    INVALID_YAML,
    TOO_LARGE,
)
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import SourceError
from router.load.deadline import TooSlow as _TooSlow
from router.load.deadline import check as _check_deadline
from router.load.deadline import limit_seconds

KeyPath = tuple[str | int, ...]


MAX_DEPTH = 64


MAX_NODES = 1_000_000


MAX_ALIAS_NODES = 10_000
"""Values that come from aliases or merge keys (`<<`): each merged mapping counts, and so does
each value it brings, however deep the chain (200 chained merges stop here, not after minutes)."""


CHECK_EVERY = 2048  # the parse looks at its deadline once per this many YAML events or values


_BOOL_TAG = "tag:yaml.org,2002:bool"


_INT_TAG = "tag:yaml.org,2002:int"


_FLOAT_TAG = "tag:yaml.org,2002:float"


_NULL_TAG = "tag:yaml.org,2002:null"


_MERGE_TAG = "tag:yaml.org,2002:merge"


def compose_data(text: str, path: str) -> tuple[Any, _Builder]:
    """The data of `text` and the builder that recorded its positions; SourceError when it is not
    YAML, too deep, too big or too slow to read."""
    yaml = _safe_yaml()
    try:
        _check_shape(yaml, text, path)
        _check_deadline(0.2)  # composing takes about four times the shape check
        node = yaml.compose(text)
        _check_deadline()
    except _TooSlow:
        raise SourceError([_too_slow(path)]) from None
    except MarkedYAMLError as exc:
        raise SourceError([_yaml_diagnostic(exc, path)]) from None
    except ReaderError as exc:
        before = text[: max(0, exc.position)]
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        raise SourceError([Diagnostic(
            INVALID_YAML, f"invalid YAML: character {exc.character!r} is not allowed", Span(path, line, col),
            help="remove control characters; YAML files are printable UTF-8 text")]) from None
    except YAMLError as exc:
        raise SourceError([Diagnostic(INVALID_YAML, f"invalid YAML ({type(exc).__name__})",
                                      Span(path))]) from None
    except RecursionError:  # not expected after the shape check; never a traceback
        raise SourceError([Diagnostic(INVALID_YAML, f"YAML nesting is deeper than {MAX_DEPTH} levels",
                                      Span(path))]) from None
    builder = _Builder(path, yaml)
    try:
        data = builder.build(node, ()) if node is not None else None
    except _TooSlow:
        raise SourceError([_too_slow(path)]) from None
    if builder.errors:
        raise SourceError(builder.errors)
    return data, builder


def _too_slow(path: str) -> Diagnostic:
    seconds = limit_seconds()
    return Diagnostic(TOO_LARGE, f"reading the document took longer than {seconds:g} s; it is not used",
                      Span(path), help="a policy that big is slow to read wherever it runs: split it, "
                      "or generate fewer rules and values")


_C_PARSER: type | None = getattr(ruamel_main, "CParser", None)  # None without the C extension


class _LoaderResolver(VersionedResolver):
    """ruamel's resolver, whose table of implicit tags a C loader looks up once, not twice per
    scalar: each lookup of the YAML version caught two AttributeErrors (half of composing).

    The C loader's version is fixed (its own, else YAML 1.2; a `%YAML` line does not reach it),
    so the table is the same each time; other loaders look it up every time, as ruamel does."""

    @property
    def versioned_resolver(self) -> Any:
        table = self.__dict__.get("_implicit_table")
        if table is None:
            table = super().versioned_resolver
            if _C_PARSER is not None and isinstance(self.loadumper, _C_PARSER):
                self.__dict__["_implicit_table"] = table
        return table


def _safe_yaml() -> YAML:
    """ruamel's safe loader (the C parser when available), with `_LoaderResolver`."""
    yaml = YAML(typ="safe")
    yaml.Resolver = _LoaderResolver
    return yaml


def _check_shape(yaml: YAML, text: str, path: str) -> None:
    """SourceError at the first node nested deeper than MAX_DEPTH or past MAX_NODES nodes."""
    depth = nodes = 0
    for event in yaml.parse(text):
        if isinstance(event, CollectionStartEvent):
            depth += 1
            nodes += 1
            if depth > MAX_DEPTH:
                raise SourceError([_event_error(INVALID_YAML, f"YAML nesting is deeper than {MAX_DEPTH} "
                                                "levels", event, path)])
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
        elif isinstance(event, (ScalarEvent, AliasEvent)):
            nodes += 1
        if not nodes % CHECK_EVERY:
            _check_deadline()
        if nodes > MAX_NODES:
            raise SourceError([_event_error(TOO_LARGE, f"the document has more than {MAX_NODES} values",
                                            event, path)])


def _event_error(code: str, message: str, event: Any, path: str) -> Diagnostic:
    mark = event.start_mark
    span = Span(path, mark.line + 1, mark.column + 1) if mark is not None else Span(path)
    return Diagnostic(code, message, span, help="generate a flatter or smaller document")


def _yaml_diagnostic(exc: MarkedYAMLError, path: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = _unquoted(exc.problem or "invalid YAML")
    context = f" ({_unquoted(exc.context)})" if exc.context else ""
    return Diagnostic(INVALID_YAML, f"invalid YAML: {problem}{context}", Span(path, line, col),
                      help="check indentation, quoting and brackets near this place")


_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def _unquoted(message: str) -> str:
    """A parser's message without the file's text it quotes (an alias, a tag, a directive):
    only token names (`'<scalar>'`) and single punctuation characters are kept."""
    def keep(match: re.Match[str]) -> str:
        inner = match.group(1) if match.group(1) is not None else match.group(2) or ""
        token = inner.startswith("<") and inner.endswith(">")
        mark = len(inner) == 1 and not inner.isalnum()
        return match.group(0) if token or mark else "'…'"

    return _QUOTED.sub(keep, message)


class _Builder:
    """Turn a composed node graph into plain data, recording positions."""

    def __init__(self, path: str, yaml: YAML) -> None:
        self.path = path
        self.constructor = yaml.constructor
        self.value_pos: dict[KeyPath, tuple[int, int]] = {}
        self.key_pos: dict[KeyPath, tuple[int, int]] = {}
        self.styles: dict[KeyPath, str] = {}
        self.errors: list[Diagnostic] = []
        self._depth = 0
        self._nodes = 0
        self._alias_nodes = 0
        self._in_alias = 0
        self._merging = 0  # inside a merged mapping: positions already set are kept
        self._too_big = False
        self._built: set[int] = set()
        self._active: set[int] = set()  # nodes being built: an alias to one of them is recursive

    def build(self, node: Node, key_path: KeyPath) -> Any:
        if id(node) in self._active:
            self._error(INVALID_YAML, "an alias refers to a node that contains it (a recursive alias)", node,
                        help="an anchor's node cannot include its own alias")
            return None
        repeated = id(node) in self._built  # an alias: the node is expanded once more
        self._built.add(id(node))
        if not self._count(node, repeated or self._in_alias > 0):
            return None
        if isinstance(node, ScalarNode):  # holds nothing: no recursion, no alias expansion inside
            return self._build(node, key_path)
        self._active.add(id(node))
        self._in_alias += repeated
        try:
            return self._build(node, key_path)
        finally:
            self._in_alias -= repeated
            self._active.discard(id(node))

    def _count(self, node: Node, aliased: bool) -> bool:
        """Count one value (`aliased`: from an alias or a merge); False past the limits."""
        self._nodes += 1
        self._alias_nodes += aliased
        if not self._nodes % CHECK_EVERY:
            _check_deadline()
        if self._nodes > MAX_NODES or self._alias_nodes > MAX_ALIAS_NODES:
            if not self._too_big:
                self._too_big = True
                self._error(INVALID_YAML, "the document expands to too many values (aliases or merge keys "
                            f"repeated too often; at most {MAX_ALIAS_NODES} values may come from "
                            "aliases and merges)", node)
            return False
        return True

    def _build(self, node: Node, key_path: KeyPath) -> Any:
        position = (node.start_mark.line + 1, node.start_mark.column + 1)
        if self._merging:  # a merged value never moves what the mapping's own keys placed
            self.value_pos.setdefault(key_path, position)
        else:
            self.value_pos[key_path] = position
        if isinstance(node, ScalarNode):
            if node.style and (not self._merging or key_path not in self.styles):
                self.styles[key_path] = node.style
            return self._scalar(node)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                self._error(INVALID_YAML, f"YAML nesting is deeper than {MAX_DEPTH} levels", node)
                return None
            if isinstance(node, SequenceNode):
                return [self.build(item, (*key_path, i)) for i, item in enumerate(node.value)]
            if isinstance(node, MappingNode):
                return self._mapping(node, key_path)
        finally:
            self._depth -= 1
        self._error(INVALID_YAML, f"unsupported YAML node {node.tag}", node)
        return None

    def _mapping(self, node: MappingNode, key_path: KeyPath) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merges: list[MappingNode] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    if id(source) in self._active or source is node:
                        self._error(INVALID_YAML, "a merge key (<<) refers to the mapping that contains it",
                                    key_node, help="merge another anchored mapping, not the one being "
                                    "defined")
                    elif isinstance(source, MappingNode):
                        merges.append(source)
                    else:
                        self._error(INVALID_YAML, "a merge key (<<) needs a mapping or a list of mappings",
                                    source)
                continue
            if not isinstance(key_node, ScalarNode):
                self._error(INVALID_YAML, "mapping keys must be plain scalars", key_node)
                continue
            key = str(self._scalar(key_node))
            if key in result:
                self._error(DUPLICATE_KEY, f"duplicate key '{key}'", key_node,
                            help="each key may appear once in a mapping; remove or rename one")
                continue
            child = (*key_path, key)
            position = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if self._merging:
                self.key_pos.setdefault(child, position)
            else:
                self.key_pos[child] = position
            result[key] = self.build(value_node, child)
        if merges:  # explicit keys win, then earlier merged mappings; explicit positions are kept
            self._merge(node, merges, key_path, result)
        return result

    def _merge(self, node: MappingNode, merges: list[MappingNode], key_path: KeyPath,
               result: dict[str, Any]) -> None:
        """Add the keys of the merged mappings `result` lacks (the earliest mapping wins). Each
        merged mapping counts as a value from an alias and as one level of nesting, so a chain of
        merges is bounded like nested aliases; positions are set only where none is yet (no scan)."""
        self._depth += 1
        self._merging += 1
        self._in_alias += 1
        try:
            if self._depth > MAX_DEPTH or self._too_big:
                if not self._too_big:  # one error: the chain's other links say the same
                    self._too_big = True
                    self._error(INVALID_YAML, f"merge keys (<<) are nested deeper than {MAX_DEPTH} levels "
                                "(a chain of merged mappings)", node,
                                help="merge the mappings you need directly, not through a chain")
                return
            for source in merges:
                if self._too_big or not self._count(source, True):
                    return
                self._active.add(id(source))
                try:
                    merged = self._mapping(source, key_path)
                finally:
                    self._active.discard(id(source))
                for merged_key, merged_value in merged.items():
                    result.setdefault(merged_key, merged_value)
        finally:
            self._depth -= 1
            self._merging -= 1
            self._in_alias -= 1

    def _scalar(self, node: ScalarNode) -> Any:
        tag = node.tag
        if tag in (_BOOL_TAG, _INT_TAG, _FLOAT_TAG, _NULL_TAG):
            try:
                return self.constructor.construct_object(node)
            except (ValueError, IndexError, KeyError):
                # ruamel resolves a few odd plain scalars ("._") as numbers it cannot read, and
                # fails on an explicit tag without a value (`a: !!int `)
                if node.value == "" and str(tag).startswith("tag:yaml.org"):
                    self._error(INVALID_VALUE, f"`!!{tag.rsplit(':', 1)[-1]}` without a value", node,
                                help="give the value after the tag, or remove the tag")
                    return None
                return str(node.value)
        return str(node.value)

    def _error(self, code: str, message: str, node: Node, *, help: str | None = None) -> None:
        span = Span(self.path, node.start_mark.line + 1, node.start_mark.column + 1)
        self.errors.append(Diagnostic(code, message, span, help=help))
