"""Scan expression text for the characters that sit outside quotes and brackets."""

from __future__ import annotations

from collections.abc import Iterator


def top_level(text: str, quotes: str = "'\"") -> Iterator[int]:
    """Indexes of the characters outside quoted strings and (), [], {} (backslash escapes apply)."""
    depth, quote, i = 0, "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in quotes:
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            yield i
        i += 1
