"""Policy variables bound to environment variables, parsed the way the seeds parse them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_FALSE_WORDS = {"0", "false", "off", "no"}


def resolve_vars(literals: Mapping[str, Any], env_vars: Mapping[str, Any],
                 env: Mapping[str, str]) -> dict[str, Any]:
    """Literal vars plus environment-bound ones (default when unset or invalid)."""
    resolved = dict(literals)
    for name, spec in env_vars.items():
        resolved[name] = parse_env_value(spec, env.get(_field(spec, "env")))
    return resolved


def _field(spec: Any, name: str) -> Any:
    """A field of a var spec, given as a mapping or as the pydantic `EnvVar`."""
    return spec.get(name) if isinstance(spec, Mapping) else getattr(spec, name, None)


def parse_env_value(spec: Any, raw: str | None) -> Any:
    """Parse one environment value by the var's type; fall back to its default.

    - bool: off for 0/false/off/no (trimmed, any case), on for anything else, '' included;
    - number: JavaScript `Number()` rules ('' and blanks are 0), finite and within min/max;
    - int: digits only, within min/max;
    - string: the raw value, '' meaning unset;
    - list: comma-separated, trimmed, empty items dropped.
    """
    default, kind = _field(spec, "default"), _field(spec, "type") or "string"
    if raw is None:
        return default
    if kind == "bool":
        return raw.strip().lower() not in _FALSE_WORDS
    if kind == "number":
        return _bounded(spec, _js_number(raw))
    if kind == "int":
        text = raw.strip()
        return _bounded(spec, int(text)) if re.fullmatch(r"[+-]?\d+", text) else default
    if kind == "list":
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw if raw != "" else default


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|Infinity)")
_RADIX = {"0x": 16, "0o": 8, "0b": 2}


def _js_number(raw: str) -> float | None:
    """JavaScript's `Number(text)`: blanks are 0, decimal or 0x/0o/0b literals, else NaN (None)."""
    text = raw.strip()
    if text == "":
        return 0.0
    base = _RADIX.get(text[:2].lower())
    if base is not None:
        digits = text[2:]
        try:
            return float(int(digits, base)) if digits.isalnum() else None
        except ValueError:
            return None
    if not _DECIMAL.fullmatch(text):
        return None
    return float(text.replace("Infinity", "inf"))


def _bounded(spec: Any, value: float | int | None) -> Any:
    default, low, high = _field(spec, "default"), _field(spec, "min"), _field(spec, "max")
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return default
    if (low is not None and value < low) or (high is not None and value > high):
        return default
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
