"""RT335: a key `provides:` replaced, still written at the top level (it loads; lint says where),
and the rewrite `router lint --fix` applies."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from router.compile.ir import CompiledPolicy
from router.diagnostics.code_names import KEY_MOVED_UNDER_PROVIDES
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.lint import check
from router.load.model import LEGACY_PROVIDES


def fix_text(key: str) -> str:
    """What to write instead of the top-level `key:`."""
    sub = LEGACY_PROVIDES[key]
    renamed = f" renamed `{sub}:`" if sub != key else ""
    return (f"move `{key}:` and its value under the file's one `provides:` key,{renamed} indented two "
            f"spaces: `provides:` then `  {sub}: …` (a file with `provides:` already adds it there); "
            "`router lint --fix` does it, comments kept")


@check(KEY_MOVED_UNDER_PROVIDES)
def moved_keys(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Each top-level key of a file that belongs under `provides:`."""
    for f in policy.files:
        for key in f.policy.legacy_keys():
            yield Diagnostic(KEY_MOVED_UNDER_PROVIDES, f"`{key}:` belongs under `provides:` (as provides."
                             f"{LEGACY_PROVIDES[key]}); the top-level key still loads",
                             f.doc.span((key,), key=True), Severity.WARNING, help=fix_text(key))


_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*:")


def moved_text(text: str) -> str | None:
    """`text` with its old top-level keys moved under one `provides:` (where the last of them
    stood), each with the comment lines just above it, indented two spaces, and `question_events`
    renamed `questions`; every other line as it was. None when there is nothing to move, or when
    the file already has `provides:` (merging into it is left to the author: RT335 says what to
    write)."""
    lines = text.splitlines(keepends=True)
    tops = [(n, m.group("key")) for n, line in enumerate(lines) if (m := _TOP_KEY.match(line))]
    if any(key == "provides" for _, key in tops):
        return None
    blocks = [_block(lines, n) for n, key in tops if key in LEGACY_PROVIDES]
    if not blocks:
        return None
    moved = ["provides:\n"]
    for start, end, key in blocks:
        for line in lines[start:end]:
            if _TOP_KEY.match(line):
                line = LEGACY_PROVIDES[key] + line[len(key):]
            moved.append("  " + line if line.strip() else line)
    if not moved[-1].endswith("\n"):
        moved[-1] += "\n"
    taken = {n for start, end, _ in blocks for n in range(start, end)}
    out: list[str] = []
    for n, line in enumerate(lines):
        if n == blocks[-1][0]:
            out += moved
        if n not in taken:
            out.append(line)
    return "".join(out)


def _block(lines: list[str], first: int) -> tuple[int, int, str]:
    """(start, end, key) of the top-level key on line `first`: the comment lines just above it,
    its own line and every indented (or blank) line after it, less trailing blank lines."""
    match = _TOP_KEY.match(lines[first])
    assert match is not None
    start = first
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1
    end = first + 1
    while end < len(lines) and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
        end += 1
    while end > first + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end, match.group("key")


def fix_files(paths: list[Path]) -> list[str]:
    """Rewrite each policy file's old top-level keys under `provides:`; one line per file changed
    (or left alone, with why)."""
    notes = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not any((m := _TOP_KEY.match(line)) and m.group("key") in LEGACY_PROVIDES
                   for line in text.splitlines()):
            continue
        fixed = moved_text(text)
        if fixed is None:
            notes.append(f"{path}: has `provides:` already; move the keys RT335 names into it by hand")
            continue
        path.write_text(fixed, encoding="utf-8")
        notes.append(f"{path}: moved the top-level declarations under `provides:` (RT335)")
    return notes
