"""Load YAML with the position of every node: the data plus a side table keyed by key path."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
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
    FILE_REFUSED,
    FILE_UNREADABLE,
    INVALID_VALUE,
    INVALID_YAML,
    TOO_LARGE,
)
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import SourceError
from router.load.deadline import TooSlow as _TooSlow
from router.load.deadline import check as _check_deadline
from router.load.deadline import limit_seconds, time_limit

__all__ = ["SourceDoc", "format_key_path", "parse_source", "read_source", "read_text", "time_limit"]

KeyPath = tuple[str | int, ...]
MAX_FILE_BYTES = 4 * 1024 * 1024  # a 5,000-rule policy is about 1 MiB
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


def read_text(path: Path, *, display: str | None = None, limit: int = MAX_FILE_BYTES,
              within: Path | None = None) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; SourceError otherwise
    (`read_bytes`); invalid UTF-8 is located by line and column, and none of it is shown."""
    data = read_bytes(path, display=display, limit=limit, within=within)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        raise SourceError([_no_excerpt(Diagnostic(
            FILE_UNREADABLE, f"cannot read {path}: it is not UTF-8 text (byte {exc.start + 1})",
            Span(display or str(path), line, col),
            help="policy, test and event files are UTF-8 text; this one looks binary"))]) from None


def read_bytes(path: Path, *, display: str | None = None, limit: int = MAX_FILE_BYTES,
               within: Path | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; SourceError otherwise.

    The path is resolved first (links followed, `refused_read` checks where it leads) and the
    resolved file is opened without following a final link. FIFOs, devices and directories are
    refused without reading (opening does not block), so `/dev/zero` or a pipe nobody writes to
    cannot hang or exhaust the router; files of `/proc` and `/sys` are refused before they are
    opened (RT104), and so is a file that reports no size yet gives bytes (a kernel file
    elsewhere). With `within` (a project's directory), a file whose links lead out of it, or
    into a `.git` directory, is refused (RT104).
    """
    where = Span(display or str(path))
    real = Path(os.path.realpath(path))
    problem = refused_read(path, within, real=real)
    if problem is not None:
        raise SourceError([_no_excerpt(Diagnostic(
            FILE_REFUSED, f"{display or path} is not read: it {problem}", where,
            help=READ_HELP))])
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SourceError([Diagnostic(FILE_UNREADABLE, f"file not found: {path}", where)]) from None
    except OSError as exc:
        raise SourceError([_unreadable(path, exc, where)]) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SourceError([Diagnostic(FILE_UNREADABLE, f"cannot read {path}: {_file_kind(info.st_mode)}, "
                                          "not a regular file", where,
                                          help="policy, test and event files must be regular files")])
        if info.st_size > limit:
            raise SourceError([_too_large(path, info.st_size, limit, where)])
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise SourceError([_unreadable(path, exc, where)]) from None
    finally:
        os.close(fd)
    if len(data) > limit:  # the file grew while it was read
        raise SourceError([_too_large(path, len(data), limit, where)])
    if data and info.st_size == 0:  # a kernel file (procfs, sysfs, debugfs) reports no size
        raise SourceError([_no_excerpt(Diagnostic(
            FILE_REFUSED, f"{display or path} is not read: it is a kernel file (its size is 0, yet it "
            "gives bytes)", where, help=READ_HELP))])
    return data


READ_HELP = ("policy, test, event and data files are regular files; a project's own files stay "
             "inside the project (a link may point to another file of the project)")
SPECIAL_ROOTS = (Path("/proc"), Path("/sys"))  # devices are refused by their kind (fstat)


def refused_read(path: Path, within: Path | None, *, real: Path | None = None) -> str | None:
    """Why the file at `path` is not read (`is a file of /proc`, `leads to ~/.netrc, outside the
    project ~/src/x`), or None. `within` is the directory a project's file must stay inside."""
    from router.trust.capabilities import show_path

    real = real or Path(os.path.realpath(path))
    special = next((root for root in SPECIAL_ROOTS if real.is_relative_to(root)), None)
    if special is not None:
        return f"is a file of {special} (a kernel file system), not a policy file" \
            if real == Path(os.path.normpath(path.absolute())) else \
            f"leads to {show_path(real)}, a file of {special} (a kernel file system)"
    if within is None:
        return None
    area = Path(os.path.realpath(within))
    if not real.is_relative_to(area):
        outside = f"outside the project {show_path(area)}"
        return f"leads to {show_path(real)}, {outside}" \
            if real != Path(os.path.normpath(path.absolute())) else f"is {outside}"
    if ".git" in real.relative_to(area).parts:
        return "is inside a .git directory"
    return None


def _no_excerpt(diagnostic: Diagnostic) -> Diagnostic:
    """A diagnostic about a file that is not (or not yet) a policy: renderers quote none of it."""
    return replace(diagnostic, extra={**diagnostic.extra, "excerpt": False})


def _unreadable(path: Path, exc: OSError, where: Span) -> Diagnostic:
    return Diagnostic(FILE_UNREADABLE, f"cannot read {path}: {exc.strerror or exc}", where)


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _too_large(path: Path, size: int, limit: int, where: Span) -> Diagnostic:
    return Diagnostic(TOO_LARGE, f"{path} is {_mib(size)}; files of at most {_mib(limit)} are read",
                      where, help="split the policy into files that `use:` each other, or generate "
                      "fewer rules")


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB" if size >= 1024 * 1024 else f"{size} bytes"


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def _too_slow(path: str) -> Diagnostic:
    seconds = limit_seconds()
    return Diagnostic(TOO_LARGE, f"reading the document took longer than {seconds:g} s; it is not used",
                      Span(path), help="a policy that big is slow to read wherever it runs: split it, "
                      "or generate fewer rules and values")


def parse_source(text: str, path: str) -> SourceDoc:
    """Parse YAML text into a SourceDoc (C parser when available).

    The text is first checked by the event parser (a state machine: deep nesting cannot overflow
    its stack), which stops at the first node nested deeper than MAX_DEPTH or past MAX_NODES;
    only then does the composer, which recurses once per level, build the node graph.
    """
    try:
        return _parse(text, path)
    except SourceError as exc:  # a file that is not YAML is named, none of its text shown
        raise SourceError([_no_excerpt(d) for d in exc.diagnostics]) from None


def _parse(text: str, path: str) -> SourceDoc:
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
    return SourceDoc(path, data, builder.value_pos, builder.key_pos, text.splitlines(), builder.styles)


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
