"""Regular expressions (RE2: linear time, compiled once) and keyword counts."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from router.diagnostics.code_names import REGEX_DOES_NOT_COMPILE
from router.diagnostics.errors import ExpressionError
from router.lang import budget
from router.lang.functions.registry import (
    NOT_LITERAL,
    fail,
    function,
    list_arg,
    text_arg,
)


class _RegexEngine:
    """The `re2` package (google-re2), imported at its first use: a sidecar whose policy matches no
    regular expression starts without it."""

    def __getattr__(self, name: str) -> Any:
        import re2

        globals()["regex_engine"] = re2
        return getattr(re2, name)


regex_engine: Any = _RegexEngine()

# --- regular expressions and keywords ---------------------------------------------------------

# Python's classes are Unicode-aware, RE2's perl classes ASCII only: they are written out so a
# pattern keeps the meaning it has in Python (`\w` matches `é`, `\d` matches `٣`, `\s` matches
# U+00A0). `\b` stays RE2's (ASCII) word boundary: docs/language.md says so.
_WORD, _SPACE = r"\p{L}\p{N}_", r"\s\v\x{1c}-\x{1f}\x{85}\p{Z}"
_OUTSIDE = {"w": f"[{_WORD}]", "W": f"[^{_WORD}]", "d": r"\p{Nd}", "D": r"\P{Nd}",
            "s": f"[{_SPACE}]", "S": f"[^{_SPACE}]", "Z": r"\z"}
_INSIDE = {"w": _WORD, "d": r"\p{Nd}", "D": r"\P{Nd}", "s": _SPACE}
_UNSUPPORTED = (
    (("(?=", "(?!", "(?<=", "(?<!"), "a lookaround ((?=…), (?!…), (?<=…), (?<!…))",
     "match the surrounding text itself (write 'no bash' instead of '(?<=no )bash'), or split the "
     "test into two regex() calls joined by `and` / `and not`"),
    (("(?P=",), "a backreference ((?P=name))",
     "capture the part with regex_find() and compare it in the expression"),
    (("(?>",), "an atomic group ((?>…))", "write the group without (?>…): RE2 never backtracks"),
    (("(?#",), "a comment group ((?#…))", "remove the comment"),
    (("(?x", "(?a", "(?L", "(?u"), "an inline flag other than i, m, s and U",
     "use the flags argument (i, m, s), or write the pattern on one line without (?x)"),
)
_SPECIAL = re.compile(r"[\\$\[]|\(\?")
_BACKREF_HELP = "capture the part with regex_find() and compare it in the expression"


def translate(pattern: str, multiline: bool = False) -> str:
    """`pattern` (Python's `re` syntax) in RE2's syntax with the same meaning; ExpressionError
    (RT210) for what a linear-time engine cannot do (lookarounds, backreferences). Without the
    multi-line flag Python's `$` also matches before a final line break: `(?:\\n?\\z)` here."""
    if not _SPECIAL.search(pattern):  # most patterns: words and alternations, nothing to translate
        return pattern
    multiline = multiline or re.match(r"\(\?[imsU]*m", pattern) is not None
    for starts, what, instead in _UNSUPPORTED if "(?" in pattern else ():
        if any(_unescaped(pattern, start) for start in starts):
            raise _refused(pattern, what, instead)
    out: list[str] = []
    i, in_class, n = 0, False, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt.isdigit() and nxt != "0":
                raise _refused(pattern, f"a backreference (\\{nxt})", _BACKREF_HELP)
            table = _INSIDE if in_class else _OUTSIDE
            width = {"u": 4, "U": 8}.get(nxt, 0)
            if width and _is_hex(pattern[i + 2:i + 2 + width], width):  # \\u00e9: RE2 writes \\x{e9}
                out.append(f"\\x{{{pattern[i + 2:i + 2 + width]}}}")
                i += 2 + width
                continue
            if nxt in table:
                out.append(table[nxt])
            elif in_class and nxt in "WS":
                raise _refused(pattern, f"\\{nxt} inside […]",
                               f"write the class without \\{nxt} (an alternation: (?:\\{nxt}|[…]))")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
            i += 1
            continue
        if char == "$" and not multiline:
            out.append(r"(?:\n?\z)")
            i += 1
            continue
        if char == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":  # a `]` first in a class is a literal one
                j += 1
            out.append(pattern[i:j])
            in_class, i = True, j
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _is_hex(text: str, width: int) -> bool:
    return len(text) == width and all(c in "0123456789abcdefABCDEF" for c in text)


def _unescaped(pattern: str, needle: str) -> bool:
    """Whether `needle` occurs in `pattern` with its first character not escaped."""
    start = pattern.find(needle)
    while start >= 0:
        backslashes = len(pattern[:start]) - len(pattern[:start].rstrip("\\"))
        if backslashes % 2 == 0:
            return True
        start = pattern.find(needle, start + 1)
    return False


def _refused(pattern: str, what: str, instead: str) -> ExpressionError:
    return ExpressionError(f"regex {pattern!r} uses {what}, which the linear-time regex engine (RE2) "
                           f"does not support: {instead}", code=REGEX_DOES_NOT_COMPILE)


@lru_cache(maxsize=1)
def _options() -> Any:
    """RE2's options for every pattern: the defaults (UTF-8, 8 MiB of memory), errors not logged
    to stderr (they come back as RT210)."""
    options = regex_engine.Options()
    options.log_errors = False
    return options


class Pattern:
    """A compiled pattern: the text as written (`pattern`, for messages and the lint) and the
    search of its RE2 translation."""

    __slots__ = ("flags", "pattern", "search")

    def __init__(self, pattern: str, flags: str, compiled: Any) -> None:
        self.pattern, self.flags = pattern, flags
        self.search: Any = compiled.search

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r}, {self.flags!r})"


@lru_cache(maxsize=8192)
def compile_regex(pattern: str, flags: str = "") -> Pattern:
    """Compile a pattern with letter flags (i = ignore case, m = multiline, s = dot-all).

    Patterns are written in Python's `re` syntax and run on RE2, a linear-time engine: no pattern
    can backtrack, so a search takes time in proportion to the text. What RE2 cannot do
    (lookarounds, backreferences) is refused with RT210 and what to write instead.
    """
    for letter in flags:
        if letter not in "ims":
            raise ExpressionError(f"unknown regex flag {letter!r}; expected i, m or s",
                                  code=REGEX_DOES_NOT_COMPILE)
    translated = translate(pattern, "m" in flags)
    options = _options()
    inline = "".join(sorted(set(flags)))
    try:
        compiled = regex_engine.compile(f"(?{inline}){translated}" if inline else translated, options)
    except (regex_engine.error, ValueError, OverflowError, RecursionError, TypeError) as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ExpressionError(f"regex {pattern!r} does not compile: {text}",
                              code=REGEX_DOES_NOT_COMPILE) from None
    return Pattern(pattern, flags, compiled)


def search(name: str, pattern: Any, text: str) -> Any:
    """`pattern.search(text)`: RE2 takes time in proportion to the text; the budget is checked after."""
    found = pattern.search(text)
    active = budget.active()
    if active is not None:
        active.check()
    return found


def _prepare_regex(args: tuple[Any, ...]) -> dict[int, Any]:
    pattern = args[1] if len(args) > 1 else NOT_LITERAL
    flags = args[2] if len(args) > 2 else ""
    if isinstance(pattern, str) and isinstance(flags, str):
        return {1: compile_regex(pattern, flags)}
    return {}


def _pattern(name: str, pattern: Any, flags: Any) -> Any:
    """The compiled pattern: a literal one was compiled at load (RT210 there); one computed while
    evaluating that does not compile is the helper rejecting its argument (RT402)."""
    if isinstance(pattern, Pattern):
        return pattern
    text, letters = text_arg(name, pattern), text_arg(name, flags)
    try:
        return compile_regex(text, letters)
    except ExpressionError as exc:
        raise fail(name, exc.message) from None


@function("regex", min_args=2, max_args=3, example="regex('MVP (Recommended)', 'recommend', 'i')",
          prepare=_prepare_regex)
def regex(value: Any, pattern: Any, flags: Any = "") -> bool:
    """True when the pattern is found anywhere in the text (a search, not a full match).

    Flags: `i` ignore case, `m` multi-line, `s` dot matches newline. The engine is RE2 (linear
    time): lookarounds and backreferences are refused (RT210).
    """
    if value is None:
        return False
    return search("regex", _pattern("regex", pattern, flags), text_arg("regex", value)) is not None


@function("regex_find", min_args=2, max_args=3, example="regex_find('p=0.86', '[0-9.]+') == '0.86'",
          prepare=_prepare_regex)
def regex_find(value: Any, pattern: Any, flags: Any = "") -> str | None:
    """The first match of the pattern in the text, or null."""
    if value is None:
        return None
    found = search("regex_find", _pattern("regex_find", pattern, flags), text_arg("regex_find", value))
    return found.group(0) if found else None


@lru_cache(maxsize=1024)
def _keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(k) for k in keywords if k), re.IGNORECASE)


def _prepare_keywords(args: tuple[Any, ...]) -> dict[int, Any]:
    words = args[1] if len(args) > 1 else NOT_LITERAL
    if isinstance(words, list) and any(words) and all(isinstance(w, str) for w in words):
        return {1: _keyword_pattern(tuple(w for w in words if w))}
    return {}


@function("count_keywords", min_args=2, max_args=2,
          example="count_keywords('add a prefix to the debug tool', ['fix', 'debug']) == 2",
          prepare=_prepare_keywords)
def count_keywords(value: Any, keywords: Any) -> int:
    """Count keyword occurrences as case-insensitive substrings, left to right, non-overlapping.

    Keywords are tried in the order given at each position, like a regex alternation.
    """
    if value is None:
        return 0
    if isinstance(keywords, re.Pattern):
        return len(keywords.findall(value if type(value) is str else text_arg("count_keywords", value)))
    words = tuple(str(k) for k in list_arg("count_keywords", keywords) if k)
    if not words:
        return 0
    return len(_keyword_pattern(words).findall(text_arg("count_keywords", value)))
