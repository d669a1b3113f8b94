"""Truthiness, one rule per language (docs/language.md, "Truthiness").

A JMESPath `match` is false when its value is `false`, `null`, `""`, `[]` or `{}` (0 is true, as
JMESPath says); a `when` expression, an `{if}` line of a template and a signal question's `when`
follow Python's rule (0, `""`, `[]`, `{}` and null are false).
"""

from __future__ import annotations

from typing import Any


def match_truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, '', [] and {} are false; 0 is true."""
    if value is None or value is False:
        return False
    return not (isinstance(value, (str, list, dict, tuple)) and not value)


def expression_truthy(value: Any) -> bool:
    """Expression truthiness: Python's."""
    return bool(value)
