"""Load YAML with the position of every node: the data plus a side table keyed by key path.

Reading a file with its limits is router/load/file_reading.py; the YAML parse with positions is
router/load/yaml_data.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from router.diagnostics.diagnostic import Span
from router.diagnostics.errors import SourceError
from router.load.deadline import time_limit
from router.load.file_reading import no_excerpt, read_text
from router.load.yaml_data import KeyPath, compose_data

__all__ = ["KeyPath", "SourceDoc", "format_key_path", "parse_source", "read_source", "time_limit"]


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
        probe = tuple(key_path)
        while probe and probe not in self.value_pos:  # a shorthand's parameter is its parent's value
            probe = probe[:-1]
        style = self.styles.get(probe)
        if style == "|":
            return self._literal_span(base, probe, offset)
        if style == ">":
            return Span(base.path, base.line + 1, base.col)
        return Span(base.path, base.line, base.col + offset + (1 if style in ("'", '"') else 0))

    def _literal_span(self, base: Span, key_path: KeyPath, offset: int) -> Span:
        """The span of `offset` in a literal block scalar (`|`): its lines are the file's lines."""
        value = self._value(key_path)
        if not isinstance(value, str) or not 0 <= base.line < len(self.lines):
            return Span(base.path, base.line + 1, base.col)
        before = value[:offset]
        line = base.line + 1 + before.count("\n")
        first = next((text for text in self.lines[base.line:] if text.strip()), "")
        indent = len(first) - len(first.lstrip(" "))
        return Span(base.path, line, indent + len(before) - (before.rfind("\n") + 1) + 1)

    def _value(self, key_path: KeyPath) -> Any:
        value = self.data
        for part in key_path:
            try:
                value = value[part]
            except (KeyError, IndexError, TypeError):
                return None
        return value

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


def read_source(path: Path, *, display: str | None = None, within: Path | None = None) -> SourceDoc:
    """Read and parse a YAML file; raise SourceError with a located diagnostic. The document keeps
    the SHA-256 of the bytes it was parsed from (valid UTF-8 encodes back to the same bytes).
    `within`: the project directory the file must stay inside (`read_bytes`)."""
    text = read_text(path, display=display, within=within)
    doc = parse_source(text, display or str(path))
    return replace(doc, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())


def parse_source(text: str, path: str) -> SourceDoc:
    """Parse YAML text into a SourceDoc (C parser when available).

    The text is first checked by the event parser (a state machine: deep nesting cannot overflow
    its stack), which stops at the first node nested deeper than MAX_DEPTH or past MAX_NODES;
    only then does the composer, which recurses once per level, build the node graph.
    """
    try:
        data, built = compose_data(text, path)
    except SourceError as exc:  # a file that is not YAML is named, none of its text shown
        raise SourceError([no_excerpt(d) for d in exc.diagnostics]) from None
    return SourceDoc(path, data, built.value_pos, built.key_pos, text.splitlines(), built.styles)
