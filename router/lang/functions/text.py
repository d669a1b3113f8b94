"""Text and JSON helpers."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from router.lang.functions.registry import (
    bounded_text,
    fail,
    function,
    list_arg,
    number_arg,
    text_arg,
    type_name,
)
from router.lang.jsonout import finite

# --- text -------------------------------------------------------------------------------------


@function("lower", min_args=1, max_args=1, example="lower('DeepSeek-V4') == 'deepseek-v4'")
def lower(value: Any) -> Any:
    """Lower-case a string; null stays null."""
    return None if value is None else text_arg("lower", value).lower()


@function("upper", min_args=1, max_args=1, example="upper('ok') == 'OK'")
def upper(value: Any) -> Any:
    """Upper-case a string; null stays null."""
    return None if value is None else text_arg("upper", value).upper()


@function("trim", min_args=1, max_args=1, example="trim('  yes ') == 'yes'")
def trim(value: Any) -> Any:
    """Strip white space at both ends; null stays null."""
    return None if value is None else text_arg("trim", value).strip()


@function("type_of", min_args=1, max_args=1,
          example="type_of(0.5) == 'number' and type_of(true) == 'boolean'")
def type_of(value: Any) -> str:
    """The JSON type of a value: null, boolean, number, string, array or object (JMESPath's `type`)."""
    return type_name(value)


@function("closest", min_args=2, max_args=2,
          example="closest('threshhold', ['mode', 'threshold']) == 'threshold'")
def closest_name(name: Any, candidates: Any) -> str | None:
    """The candidate closest to a name (a "did you mean"), null when none is close."""
    from router.diagnostics.suggest import closest

    options = [c for c in list_arg("closest", candidates) if isinstance(c, str)]
    return closest(text_arg("closest", name), options) if name is not None else None


@function("key_paths", min_args=1, max_args=2,
          example="key_paths({'a': {'b': 1}, 'c': {'d': 2}}, ['c']) == ['a', 'a.b', 'c']")
def key_paths(value: Any, skip: Any = None) -> list[str]:
    """The dotted paths of an object's keys at every level, not looking inside the paths in `skip`."""
    if not isinstance(value, Mapping):
        return []
    stop = {s for s in list_arg("key_paths", skip or []) if isinstance(s, str)}
    found: list[str] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, child in node.items():
            path = f"{prefix}{key}"
            found.append(path)
            if isinstance(child, Mapping) and path not in stop and len(found) < 10_000:
                walk(child, path + ".")

    walk(value, "")
    return found


@function("utf16_len", min_args=1, max_args=1, example="utf16_len('a😀') == 3")
def utf16_len(value: Any) -> int:
    """Length in UTF-16 code units, as JavaScript's `String.length` counts it."""
    text = text_arg("utf16_len", value)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@function("tail", min_args=2, max_args=2, example="tail('abcdef', 2) == 'ef'")
def tail(value: Any, size: Any) -> str:
    """The last `size` characters of a string."""
    text, size = text_arg("tail", value), int(number_arg("tail", size))
    return text[-size:] if size > 0 else ""


@function("head", min_args=2, max_args=2, example="head('abcdef', 2) == 'ab'")
def head(value: Any, size: Any) -> str:
    """The first `size` characters of a string."""
    return text_arg("head", value)[: max(0, int(number_arg("head", size)))]


@function("split", min_args=2, max_args=2, example="split('a,b', ',') == ['a', 'b']")
def split(value: Any, sep: Any) -> list[str]:
    """Split a string on a separator."""
    return text_arg("split", value).split(text_arg("split", sep))


@function("replace", min_args=3, max_args=3, example="replace('a-b', '-', '+') == 'a+b'")
def replace(value: Any, old: Any, new: Any) -> str:
    """Replace every occurrence of `old` with `new`."""
    text, before, after = text_arg("replace", value), text_arg("replace", old), text_arg("replace", new)
    if before:
        bounded_text("replace", len(text) + text.count(before) * (len(after) - len(before)))
    else:
        bounded_text("replace", len(text) + (len(text) + 1) * len(after))
    return text.replace(before, after)


@function("join", min_args=2, max_args=2, example="join(', ', ['a', 'b']) == 'a, b'",
          native_jmespath=True)
def join(sep: Any, items: Any) -> str:
    """Join an array of strings with a separator (JMESPath's argument order)."""
    separator = text_arg("join", sep)
    parts = [text_arg("join", item) for item in list_arg("join", items)]
    bounded_text("join", sum(map(len, parts)) + len(separator) * max(0, len(parts) - 1))
    return separator.join(parts)


MAX_INDENT = 16


@function("to_json", min_args=1, max_args=2, example="to_json({'a': 1}) == '{\"a\": 1}'")
def to_json(value: Any, indent: Any = None) -> str:
    """Serialize a value as JSON, optionally indented by 0 to 16 spaces (non-finite numbers as null)."""
    if indent is not None:
        width = number_arg("to_json", indent)
        if not 0 <= width <= MAX_INDENT or width != int(width):
            raise fail("to_json", f"indent must be a whole number from 0 to {MAX_INDENT}, got {indent}")
        indent = int(width)
    return json_text("to_json", value, indent)


def json_text(name: str, value: Any, indent: int | None = None) -> str:
    """Strict JSON text of `value` (non-finite numbers as null), stopped past MAX_TEXT characters."""
    try:
        return _encode(name, value, indent)
    except ValueError:  # a non-finite number or an integer too long to write: null
        return _encode(name, finite(value), indent)


def _encode(name: str, value: Any, indent: int | None) -> str:
    encoder = json.JSONEncoder(ensure_ascii=False, indent=indent, default=str, allow_nan=False)
    parts, length = [], 0
    for part in encoder.iterencode(value):  # piece by piece when indented: stops early
        length += len(part)
        bounded_text(name, length)
        parts.append(part)
    return "".join(parts)


@function("parse_json", min_args=1, max_args=1, example="parse_json('{\"a\": 1}').a == 1")
def parse_json(value: Any) -> Any:
    """Parse a JSON text; fails with the parser's message when it is not JSON."""
    try:
        return json.loads(text_arg("parse_json", value))
    except json.JSONDecodeError as exc:
        raise fail("parse_json", f"not valid JSON: {exc.msg} at char {exc.pos}") from None


@function("parse_value", min_args=1, max_args=1,
          example="parse_value('0.6') == 0.6 and parse_value('on') == 'on'")
def parse_value(value: Any) -> Any:
    """A text as the JSON value it spells (number, true, [..]), else the text itself."""
    text = text_arg("parse_value", value)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@function("extract_json", min_args=1, max_args=1,
          example="extract_json('Sure: {\"x\": 2} done').x == 2")
def extract_json(value: Any) -> Any:
    """Parse JSON out of model output: strip ``` fences, else take the first `{` to the last `}`."""
    text = text_arg("extract_json", value).strip()
    text = re.sub(r"^```(?:json)?\s*", "", text, flags=re.IGNORECASE)
    if text.endswith("```"):  # not a regex: `\s*```$` backtracks over every run of blanks
        text = text[:-3].rstrip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start >= 0 and end > start:
            try:
                return json.loads(text[start : end + 1])
            except json.JSONDecodeError as exc:
                raise fail("extract_json", f"no JSON object found ({exc.msg})") from None
    raise fail("extract_json", "no JSON object found")
