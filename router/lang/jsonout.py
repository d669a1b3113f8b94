"""Every JSON text the router writes (protocol lines, audit records, saved files) goes through here.

Python's `json` writes `NaN`, `Infinity` and `-Infinity` for non-finite floats, which no other JSON
parser reads, and refuses integers of more than 4,300 digits. `dumps` writes strict JSON always:
a non-finite number becomes null, an integer too long to print becomes null, a key that is not
text becomes text, any other value that is not JSON becomes its text (`default=str`). The usual case costs one
`json.dumps`; only a value that fails it is walked and cleaned.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

MAX_INT_BITS = 14_000  # about 4,200 decimal digits, inside Python's int-to-text limit
MAX_DEPTH = 200  # deeper values are cut (null): a JSON text this deep is no message of ours


def dumps(value: Any, *, indent: int | str | None = None, compact: bool = False) -> str:
    """Strict JSON text of `value` (UTF-8 characters as they are, `default=str` for other objects)."""
    separators = (",", ":") if compact else None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=indent,
                          separators=separators, default=str)
    except (ValueError, TypeError, RecursionError):
        return json.dumps(finite(value), ensure_ascii=False, allow_nan=False, indent=indent,
                          separators=separators, default=str)


def finite(value: Any, depth: int = 0) -> Any:
    """`value` with non-finite numbers and unprintable integers as null (nesting cut at MAX_DEPTH)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value if value.bit_length() <= MAX_INT_BITS else None
    if depth >= MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        return {_key(k): finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, depth + 1) for v in value]
    return value  # written with default=str


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, float) and not math.isfinite(key):
        return "null"
    return json.dumps(finite(key)) if isinstance(key, (int, float, bool)) or key is None else str(key)
