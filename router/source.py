"""Load YAML with the position of every node: the data plus a side table keyed by key path."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from router.diagnostics import Diagnostic, Span
from router.errors import SourceError

KeyPath = tuple[str | int, ...]
MAX_NODES = 1_000_000
MAX_ALIAS_NODES = 10_000

_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class SourceDoc:
    """A parsed YAML document: plain data, positions of values and keys, and the text."""

    path: str
    data: Any
    value_pos: dict[KeyPath, tuple[int, int]] = field(repr=False)
    key_pos: dict[KeyPath, tuple[int, int]] = field(repr=False)
    lines: list[str] = field(repr=False)
    styles: dict[KeyPath, str] = field(repr=False, default_factory=dict)
    sha256: str = ""
    """SHA-256 of the bytes that were parsed (read_source), for trust by content."""

    def span_in(self, key_path: KeyPath, offset: int) -> Span:
        """The span of character `offset` inside the scalar at `key_path` (single-line scalars)."""
        base = self.span(key_path)
        style = self.styles.get(tuple(key_path))
        if style in ("|", ">"):
            return Span(base.path, base.line + 1, base.col)
        return Span(base.path, base.line, base.col + offset + (1 if style in ("'", '"') else 0))

    def span(self, key_path: KeyPath, *, key: bool = False) -> Span:
        """The span of the value at `key_path` (or of its key), else of the closest parent."""
        table = self.key_pos if key else self.value_pos
        probe = tuple(key_path)
        while probe:
            if probe in table:
                line, col = table[probe]
                return Span(self.path, line, col)
            if key and probe in self.value_pos:
                line, col = self.value_pos[probe]
                return Span(self.path, line, col)
            probe = probe[:-1]
        line, col = self.value_pos.get((), (1, 1))
        return Span(self.path, line, col)


def format_key_path(key_path: Iterable[str | int]) -> str:
    """Render ('rules', 3, 'when') as `rules[3].when`."""
    out = ""
    for part in key_path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def read_source(path: Path, *, display: str | None = None) -> SourceDoc:
    """Read and parse a YAML file; raise SourceError with a located diagnostic."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise SourceError([Diagnostic("RT100", f"file not found: {path}", Span(str(path)))]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError([Diagnostic("RT100", f"cannot read {path}: {exc}", Span(str(path)))]) from None
    doc = parse_source(text, display or str(path))
    return replace(doc, sha256=hashlib.sha256(data).hexdigest())


def parse_source(text: str, path: str) -> SourceDoc:
    """Parse YAML text into a SourceDoc (C parser when available)."""
    yaml = YAML(typ="safe")
    try:
        node = yaml.compose(text)
    except MarkedYAMLError as exc:
        raise SourceError([_yaml_diagnostic(exc, path)]) from None
    except ReaderError as exc:
        before = text[: max(0, exc.position)]
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        raise SourceError([Diagnostic(
            "RT101", f"invalid YAML: character {exc.character!r} is not allowed", Span(path, line, col),
            help="remove control characters; YAML files are printable UTF-8 text")]) from None
    except YAMLError as exc:
        raise SourceError([Diagnostic("RT101", f"invalid YAML: {exc}", Span(path))]) from None
    builder = _Builder(path, yaml)
    data = builder.build(node, ()) if node is not None else None
    if builder.errors:
        raise SourceError(builder.errors)
    return SourceDoc(path, data, builder.value_pos, builder.key_pos, text.splitlines(), builder.styles)


def _yaml_diagnostic(exc: MarkedYAMLError, path: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = exc.problem or "invalid YAML"
    context = f" ({exc.context})" if exc.context else ""
    return Diagnostic("RT101", f"invalid YAML: {problem}{context}", Span(path, line, col),
                      help="check indentation, quoting and brackets near this place")


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
        self._too_big = False
        self._built: set[int] = set()

    def build(self, node: Node, key_path: KeyPath) -> Any:
        repeated = id(node) in self._built  # an alias: the node is expanded once more
        self._built.add(id(node))
        self._nodes += 1
        self._alias_nodes += repeated or self._in_alias > 0
        if self._nodes > MAX_NODES or self._alias_nodes > MAX_ALIAS_NODES:
            if not self._too_big:
                self._too_big = True
                self._error("RT101", "the document expands to too many values (aliases repeated too "
                            f"often; at most {MAX_ALIAS_NODES} values may come from aliases)", node)
            return None
        if repeated and not isinstance(node, ScalarNode):
            self._in_alias += 1
            try:
                return self._build(node, key_path)
            finally:
                self._in_alias -= 1
        return self._build(node, key_path)

    def _build(self, node: Node, key_path: KeyPath) -> Any:
        self.value_pos[key_path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, ScalarNode):
            if node.style:
                self.styles[key_path] = node.style
            return self._scalar(node)
        self._depth += 1
        try:
            if self._depth > 64:
                self._error("RT101", "YAML nesting is deeper than 64 levels", node)
                return None
            if isinstance(node, SequenceNode):
                return [self.build(item, (*key_path, i)) for i, item in enumerate(node.value)]
            if isinstance(node, MappingNode):
                return self._mapping(node, key_path)
        finally:
            self._depth -= 1
        self._error("RT101", f"unsupported YAML node {node.tag}", node)
        return None

    def _mapping(self, node: MappingNode, key_path: KeyPath) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merges: list[MappingNode] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    if isinstance(source, MappingNode):
                        merges.append(source)
                    else:
                        self._error("RT101", "a merge key (<<) needs a mapping or a list of mappings", source)
                continue
            if not isinstance(key_node, ScalarNode):
                self._error("RT101", "mapping keys must be plain scalars", key_node)
                continue
            key = str(self._scalar(key_node))
            if key in result:
                self._error("RT102", f"duplicate key '{key}'", key_node,
                            help="each key may appear once in a mapping; remove or rename one")
                continue
            child = (*key_path, key)
            self.key_pos[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = self.build(value_node, child)
        if merges:  # explicit keys win, then earlier merged mappings; explicit positions are kept
            explicit = {k: v for k, v in self.value_pos.items() if k[: len(key_path)] == key_path}
            explicit_keys = {k: v for k, v in self.key_pos.items() if k[: len(key_path)] == key_path}
            merged: dict[str, Any] = {}
            for source in reversed(merges):  # the earliest mapping is built last and wins
                merged.update(self._mapping(source, key_path))
            for merged_key, merged_value in merged.items():
                result.setdefault(merged_key, merged_value)
            self.value_pos.update(explicit)
            self.key_pos.update(explicit_keys)
        return result

    def _scalar(self, node: ScalarNode) -> Any:
        tag = node.tag
        if tag in (_BOOL_TAG, _INT_TAG, _FLOAT_TAG, _NULL_TAG):
            try:
                return self.constructor.construct_object(node)
            except ValueError:  # ruamel resolves a few odd plain scalars ("._") as numbers it cannot read
                return str(node.value)
        return str(node.value)

    def _error(self, code: str, message: str, node: Node, *, help: str | None = None) -> None:
        span = Span(self.path, node.start_mark.line + 1, node.start_mark.column + 1)
        self.errors.append(Diagnostic(code, message, span, help=help))
