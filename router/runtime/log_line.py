"""One record, one line: the escaping every text log line the engine writes goes through.

A rule's `log:` text, an error message or a protocol line may hold a newline, a carriage return,
an ESC sequence or a Unicode line separator; written as is, it would forge records (`… trusted
/etc` on a line of its own) or rewrite a terminal that shows the log. `escape_line` makes any text
one printable line, and `unescape_line` gives the text back exactly.
"""

from __future__ import annotations

import re

_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0, DEL, C1, the line and paragraph separators, and the backslash (so the escape can be undone)
_SPECIAL = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\x85]")
_ESCAPED = re.compile(r"\\(?:\\|n|r|t|x[0-9a-f]{2}|u[0-9a-f]{4})")


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_line(text: str) -> str:
    """`text` as one line: `\\`, newline, CR, tab, other C0/C1 controls, DEL and U+2028/U+2029
    written as escapes (`\\\\`, `\\n`, `\\r`, `\\t`, `\\x1b`, `\\u2028`); other text unchanged."""
    return _SPECIAL.sub(_escape, text)


def _unescape(match: re.Match[str]) -> str:
    token = match.group(0)
    named = {"\\\\": "\\", "\\n": "\n", "\\r": "\r", "\\t": "\t"}.get(token)
    return named if named is not None else chr(int(token[2:], 16))


def unescape_line(line: str) -> str:
    """The text `escape_line` was given (for readers of the router log)."""
    return _ESCAPED.sub(_unescape, line)
