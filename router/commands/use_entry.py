"""Rewrite `use:` entries of a policy file in place, for `router update`: the file is parsed with
ruamel.yaml's round-trip loader to find each entry's line and column, only the entry's characters
are replaced (and a `# frozen: <ref>` comment set or dropped at the end of its line), so every
other byte, comments and layout included, stays. The result is parsed again and must differ only
in those entries; a file that cannot be parsed, or an entry written in a form this cannot edit
safely (escapes, a multi-line scalar), is refused and never written."""

from __future__ import annotations

import io
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

FROZEN = re.compile(r"\s+#\s*frozen:\s*(\S+)\s*$")


class RewriteError(Exception):
    """The file cannot be rewritten: where and why (nothing was written)."""


@dataclass(frozen=True)
class Change:
    """One `use:` entry to replace, and the ref to name in a `# frozen:` comment (None: none)."""

    old: str
    new: str
    frozen: str | None = None


@dataclass(frozen=True)
class Edited:
    """An entry replaced: its line (1-based) and the entries before and after."""

    line: int
    old: str
    new: str


def frozen_ref(path: Path, entry: str) -> str | None:
    """The ref of the `# frozen: <ref>` comment on the line of `entry` in `path`, if any."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeError):
        return None
    for line in text.splitlines():
        if entry in line and (found := FROZEN.search(line)) is not None:
            return found.group(1)
    return None


def rewrite(path: Path, changes: list[Change]) -> tuple[str, list[Edited]]:
    """The new text of `path` with `changes` made, and where each was; RewriteError otherwise."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeError) as exc:
        raise RewriteError(f"{path}: cannot read it ({exc})") from None
    data = _parse(text, path)
    entries = data.get("use") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise RewriteError(f"{path}: `use:` is not a list; write the entries as a list to update them")
    wanted = {c.old: c for c in changes}
    lines = text.split("\n")  # as the parser counts lines
    edits: list[tuple[int, int, Change]] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str) and entry in wanted:
            line, column = entries.lc.item(index)  # type: ignore[attr-defined]
            edits.append((line, column, wanted[entry]))
    done = []
    for line, column, change in sorted(edits, key=lambda e: (e[0], -e[1])):
        lines[line] = _edit_line(lines[line], column, change, path, line + 1)
        done.append(Edited(line + 1, change.old, change.new))
    result = "\n".join(lines)
    expected = [wanted[e].new if isinstance(e, str) and e in wanted else e for e in entries]
    _check(result, data, expected, path)
    return result, sorted(done, key=lambda e: e.line)


def _edit_line(line: str, column: int, change: Change, path: Path, number: int) -> str:
    """`line` with the entry at `column` (its quote, or its first character) replaced."""
    start = line.find(change.old, column)
    if start not in (column, column + 1):
        raise RewriteError(f"{path}:{number}: the `use:` entry {change.old!r} is not written as one plain "
                           "or quoted string on this line; edit it by hand")
    quote = line[column] if start == column + 1 else ""
    if quote and quote not in "'\"":
        raise RewriteError(f"{path}:{number}: cannot edit the `use:` entry here; edit it by hand")
    edited = line[:start] + change.new + line[start + len(change.old):]
    ending = edited[len(edited.rstrip("\r\n")):]
    body = FROZEN.sub("", edited.rstrip("\r\n"))
    if change.frozen is not None:
        body += f"  # frozen: {change.frozen}"
    return body + ending


def _parse(text: str, path: Path) -> Any:
    try:
        return YAML(typ="rt").load(io.StringIO(text))
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise RewriteError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}); "
                           "the file was not changed") from None


def _check(text: str, before: Any, expected: list[Any], path: Path) -> None:
    """The rewritten text parses, its `use:` is `expected` and everything else is as before."""
    try:
        after = _parse(text, path)
    except RewriteError:
        raise RewriteError(f"{path}: the rewritten file would not parse; it was not changed") from None
    same = {k: v for k, v in after.items() if k != "use"} == {k: v for k, v in before.items() if k != "use"}
    if list(after.get("use") or []) != expected or not same:
        raise RewriteError(f"{path}: rewriting its `use:` entries would change more than them; "
                           "it was not changed (edit the entries by hand)")


def write(path: Path, text: str) -> None:
    """Replace `path` with `text` at once (a temporary file beside it, its mode kept)."""
    mode = path.stat().st_mode & 0o7777
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
