"""Number helpers."""

from __future__ import annotations

import math
from typing import Any

from router.lang.functions.registry import (
    fail,
    function,
    list_arg,
    number_arg,
)
from router.lang.functions.text import json_text

# --- numbers ----------------------------------------------------------------------------------


@function("clamp", min_args=3, max_args=3, example="clamp(1.7, 0, 1) == 1")
def clamp(value: Any, low: Any, high: Any) -> float | int:
    """Limit a number to [low, high]; a non-finite number becomes `low`."""
    number = number_arg("clamp", value)
    if isinstance(number, float) and not math.isfinite(number):
        return number_arg("clamp", low)
    return max(number_arg("clamp", low), min(number_arg("clamp", high), number))


@function("round", min_args=1, max_args=2, example="round(0.856, 2) == 0.86")
def round_(value: Any, digits: Any = 0) -> float | int:
    """Round half away from zero to `digits` decimals."""
    number, places = number_arg("round", value), _places("round", digits)
    if places > 323 or (isinstance(number, float) and not math.isfinite(number)):
        return number  # no float has a digit that far: nothing to round
    if places < -308:
        return 0.0 * number
    scale = 10**places
    try:
        rounded = math.floor(abs(number) * scale + 0.5) / scale
    except OverflowError:  # the number has no digits that small: nothing to round
        return number
    result = math.copysign(rounded, number)
    return int(result) if places == 0 else result


def _places(name: str, digits: Any) -> int:
    number = number_arg(name, digits)
    if isinstance(number, float) and not math.isfinite(number):
        raise fail(name, f"digits must be a finite number, got {number}")
    return int(max(-10_000, min(10_000, number)))


@function("fixed", min_args=2, max_args=2, example="fixed(1, 2) == '1.00'")
def fixed(value: Any, digits: Any) -> str:
    """A number as text with exactly `digits` decimals, 0 to 100 (JavaScript's toFixed)."""
    places = _places("fixed", digits)
    if not 0 <= places <= 100:
        raise fail("fixed", f"digits must be from 0 to 100, got {digits}")
    return f"{number_arg('fixed', value):.{places}f}"


@function("to_number", min_args=1, max_args=1, example="to_number('90.5') == 90.5",
          native_jmespath=True)
def to_number(value: Any) -> float | int | None:
    """Parse a number from a string (null when it is not one); numbers pass through."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() and "." not in value else number
    return None


@function("to_string", min_args=1, max_args=1, example="to_string(3) == '3'", native_jmespath=True)
def to_string(value: Any) -> str:
    """A string as is; anything else as JSON."""
    return value if isinstance(value, str) else json_text("to_string", value)


@function("abs", min_args=1, max_args=1, example="abs(-2) == 2", native_jmespath=True)
def abs_(value: Any) -> float | int:
    """Absolute value."""
    return abs(number_arg("abs", value))


@function("sum", min_args=1, max_args=1, example="sum([1, 2]) == 3", native_jmespath=True)
def sum_(values: Any) -> float | int:
    """Sum of an array of numbers."""
    return sum(number_arg("sum", v) for v in list_arg("sum", values))


@function("max", min_args=1, max_args=1, example="max([1, 3, 2]) == 3", native_jmespath=True)
def max_(values: Any) -> Any:
    """Largest element of an array (null when empty)."""
    items = list_arg("max", values)
    return max(items) if items else None


@function("min", min_args=1, max_args=1, example="min([4, 3]) == 3", native_jmespath=True)
def min_(values: Any) -> Any:
    """Smallest element of an array (null when empty)."""
    items = list_arg("min", values)
    return min(items) if items else None
