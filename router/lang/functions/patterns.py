"""Regular expressions (linear-time engine, compiled once) and keyword counts."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

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
    """The `regex` package, imported at its first use: a sidecar whose policy matches no regular
    expression starts without it."""

    def __getattr__(self, name: str) -> Any:
        import regex

        globals()["regex_engine"] = regex
        return getattr(regex, name)


regex_engine: Any = _RegexEngine()

# --- regular expressions and keywords ---------------------------------------------------------


@lru_cache(maxsize=512)
def compile_regex(pattern: str, flags: str = "") -> Any:
    """Compile a pattern with letter flags (i = ignore case, m = multiline, s = dot-all).

    Patterns use the `regex` package (Python's `re` syntax and meaning) so that every search can
    run with a timeout: the time left in the evaluation budget.
    """
    bits = 0
    for letter in flags:
        if letter not in "ims":
            raise ExpressionError(f"unknown regex flag {letter!r}; expected i, m or s", code="RT210")
        bits |= {"i": regex_engine.IGNORECASE, "m": regex_engine.MULTILINE, "s": regex_engine.DOTALL}[letter]
    try:
        return regex_engine.compile(pattern, bits)
    except (regex_engine.error, ValueError, OverflowError, RecursionError) as exc:
        raise ExpressionError(f"regex {pattern!r} does not compile: {exc}", code="RT210") from None


def search(name: str, pattern: Any, text: str) -> Any:
    """`pattern.search(text)` within the time the evaluation has left (BudgetExceeded after it)."""
    try:
        return pattern.search(text, timeout=budget.remaining())
    except TimeoutError:
        active = budget.active()
        limit = (active.limits if active else budget.DEFAULT_BUDGET).time_ms
        raise budget.BudgetExceeded(f"{name}(): the pattern {pattern.pattern[:80]!r} was still searching "
                                    f"when the evaluation time ({limit} ms for one event) ran out") from None


def _prepare_regex(args: tuple[Any, ...]) -> dict[int, Any]:
    pattern = args[1] if len(args) > 1 else NOT_LITERAL
    flags = args[2] if len(args) > 2 else ""
    if isinstance(pattern, str) and isinstance(flags, str):
        return {1: compile_regex(pattern, flags)}
    return {}


def _pattern(name: str, pattern: Any, flags: Any) -> Any:
    """The compiled pattern: a literal one was compiled at load (RT210 there); one computed while
    evaluating that does not compile is the helper rejecting its argument (RT402)."""
    if isinstance(pattern, regex_engine.Pattern):
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

    Flags: `i` ignore case, `m` multi-line, `s` dot matches newline. A search that is still
    running when the event's evaluation time runs out stops the evaluation (RT404).
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
