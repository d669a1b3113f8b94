"""Helper functions shared by both languages (JMESPath `match` and `when` expressions).

Each entry is registered with `@function` into the visible `FUNCTIONS` dict, declares its arity and
carries a runnable example (`docs/reference/functions.md` is generated from these; a test runs every example).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import regex as regex_engine

from router.diagnostics.errors import ExpressionError
from router.lang import budget
from router.lang.jsonout import finite

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class Function:
    """A helper function: implementation, arity and documentation."""

    name: str
    impl: Callable[..., Any]
    min_args: int
    max_args: int | None
    summary: str
    example: str
    native_jmespath: bool = False  # JMESPath has a built-in of the same name and meaning
    prepare: Callable[[tuple[Any, ...]], dict[int, Any]] | None = None


FUNCTIONS: dict[str, Function] = {}
NOT_LITERAL = object()  # marks an argument whose value is only known at evaluation time


def function(
    name: str, *, min_args: int, max_args: int | None, example: str, native_jmespath: bool = False,
    prepare: Callable[[tuple[Any, ...]], dict[int, Any]] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a helper function under `name`.

    `prepare` runs at load time with the literal arguments of a call (NOT_LITERAL elsewhere) and
    returns replacements by position, such as a compiled regex for a literal pattern.
    """

    def register(impl: Callable[..., Any]) -> Callable[..., Any]:
        summary = (impl.__doc__ or "").strip()
        FUNCTIONS[name] = Function(name, _charging(impl), min_args, max_args, summary, example,
                                   native_jmespath, prepare)
        return impl

    return register


_SCALAR_RESULTS = {"bool", "int", "float | int", "int | None", "float", "str | None", "None"}


def _charging(impl: Callable[..., Any]) -> Callable[..., Any]:
    """`impl` charging its result to the evaluation budget, unless it only returns a scalar (or a
    `str | None` as regex_find, whose text is a part of its argument)."""
    if impl.__annotations__.get("return") in _SCALAR_RESULTS:
        return impl
    return budget.charged(impl)


MAX_TEXT = 1_000_000  # characters a text helper may produce


def _bounded_text(name: str, length: int) -> None:
    if length > MAX_TEXT:
        raise ExpressionError(f"{name}(): the result would be longer than {MAX_TEXT} characters",
                              code="RT403")


def _fail(name: str, message: str) -> ExpressionError:
    return ExpressionError(f"{name}(): {message}", code="RT402")


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for messages (null, boolean, number, …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, Sequence):
        return "array"
    return type(value).__name__


def _text(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _fail(name, f"expected a string, got {type_name(value)}")


def _number(name: str, value: Any) -> float | int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise _fail(name, f"expected a number, got {type_name(value)}")


def _list(name: str, value: Any) -> Sequence[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return value
    raise _fail(name, f"expected an array, got {type_name(value)}")


# --- text -------------------------------------------------------------------------------------


@function("lower", min_args=1, max_args=1, example="lower('DeepSeek-V4') == 'deepseek-v4'")
def lower(value: Any) -> Any:
    """Lower-case a string; null stays null."""
    return None if value is None else _text("lower", value).lower()


@function("upper", min_args=1, max_args=1, example="upper('ok') == 'OK'")
def upper(value: Any) -> Any:
    """Upper-case a string; null stays null."""
    return None if value is None else _text("upper", value).upper()


@function("trim", min_args=1, max_args=1, example="trim('  yes ') == 'yes'")
def trim(value: Any) -> Any:
    """Strip white space at both ends; null stays null."""
    return None if value is None else _text("trim", value).strip()


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

    options = [c for c in _list("closest", candidates) if isinstance(c, str)]
    return closest(_text("closest", name), options) if name is not None else None


@function("key_paths", min_args=1, max_args=2,
          example="key_paths({'a': {'b': 1}, 'c': {'d': 2}}, ['c']) == ['a', 'a.b', 'c']")
def key_paths(value: Any, skip: Any = None) -> list[str]:
    """The dotted paths of an object's keys at every level, not looking inside the paths in `skip`."""
    if not isinstance(value, Mapping):
        return []
    stop = {s for s in _list("key_paths", skip or []) if isinstance(s, str)}
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
    text = _text("utf16_len", value)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@function("tail", min_args=2, max_args=2, example="tail('abcdef', 2) == 'ef'")
def tail(value: Any, size: Any) -> str:
    """The last `size` characters of a string."""
    text, size = _text("tail", value), int(_number("tail", size))
    return text[-size:] if size > 0 else ""


@function("head", min_args=2, max_args=2, example="head('abcdef', 2) == 'ab'")
def head(value: Any, size: Any) -> str:
    """The first `size` characters of a string."""
    return _text("head", value)[: max(0, int(_number("head", size)))]


@function("split", min_args=2, max_args=2, example="split('a,b', ',') == ['a', 'b']")
def split(value: Any, sep: Any) -> list[str]:
    """Split a string on a separator."""
    return _text("split", value).split(_text("split", sep))


@function("replace", min_args=3, max_args=3, example="replace('a-b', '-', '+') == 'a+b'")
def replace(value: Any, old: Any, new: Any) -> str:
    """Replace every occurrence of `old` with `new`."""
    text, before, after = _text("replace", value), _text("replace", old), _text("replace", new)
    if before:
        _bounded_text("replace", len(text) + text.count(before) * (len(after) - len(before)))
    else:
        _bounded_text("replace", len(text) + (len(text) + 1) * len(after))
    return text.replace(before, after)


@function("join", min_args=2, max_args=2, example="join(', ', ['a', 'b']) == 'a, b'",
          native_jmespath=True)
def join(sep: Any, items: Any) -> str:
    """Join an array of strings with a separator (JMESPath's argument order)."""
    separator = _text("join", sep)
    parts = [_text("join", item) for item in _list("join", items)]
    _bounded_text("join", sum(map(len, parts)) + len(separator) * max(0, len(parts) - 1))
    return separator.join(parts)


MAX_INDENT = 16


@function("to_json", min_args=1, max_args=2, example="to_json({'a': 1}) == '{\"a\": 1}'")
def to_json(value: Any, indent: Any = None) -> str:
    """Serialize a value as JSON, optionally indented by 0 to 16 spaces (non-finite numbers as null)."""
    if indent is not None:
        width = _number("to_json", indent)
        if not 0 <= width <= MAX_INDENT or width != int(width):
            raise _fail("to_json", f"indent must be a whole number from 0 to {MAX_INDENT}, got {indent}")
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
        _bounded_text(name, length)
        parts.append(part)
    return "".join(parts)


@function("parse_json", min_args=1, max_args=1, example="parse_json('{\"a\": 1}').a == 1")
def parse_json(value: Any) -> Any:
    """Parse a JSON text; fails with the parser's message when it is not JSON."""
    try:
        return json.loads(_text("parse_json", value))
    except json.JSONDecodeError as exc:
        raise _fail("parse_json", f"not valid JSON: {exc.msg} at char {exc.pos}") from None


@function("parse_value", min_args=1, max_args=1,
          example="parse_value('0.6') == 0.6 and parse_value('on') == 'on'")
def parse_value(value: Any) -> Any:
    """A text as the JSON value it spells (number, true, [..]), else the text itself."""
    text = _text("parse_value", value)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@function("extract_json", min_args=1, max_args=1,
          example="extract_json('Sure: {\"x\": 2} done').x == 2")
def extract_json(value: Any) -> Any:
    """Parse JSON out of model output: strip ``` fences, else take the first `{` to the last `}`."""
    text = _text("extract_json", value).strip()
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
                raise _fail("extract_json", f"no JSON object found ({exc.msg})") from None
    raise _fail("extract_json", "no JSON object found")


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
    if isinstance(pattern, regex_engine.Pattern):
        return pattern
    return compile_regex(_text(name, pattern), _text(name, flags))


@function("regex", min_args=2, max_args=3, example="regex('MVP (Recommended)', 'recommend', 'i')",
          prepare=_prepare_regex)
def regex(value: Any, pattern: Any, flags: Any = "") -> bool:
    """True when the pattern is found anywhere in the text (a search, not a full match).

    Flags: `i` ignore case, `m` multi-line, `s` dot matches newline. A search that is still
    running when the event's evaluation time runs out stops the evaluation (RT404).
    """
    if value is None:
        return False
    return search("regex", _pattern("regex", pattern, flags), _text("regex", value)) is not None


@function("regex_find", min_args=2, max_args=3, example="regex_find('p=0.86', '[0-9.]+') == '0.86'",
          prepare=_prepare_regex)
def regex_find(value: Any, pattern: Any, flags: Any = "") -> str | None:
    """The first match of the pattern in the text, or null."""
    if value is None:
        return None
    found = search("regex_find", _pattern("regex_find", pattern, flags), _text("regex_find", value))
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
        return len(keywords.findall(value if type(value) is str else _text("count_keywords", value)))
    words = tuple(str(k) for k in _list("count_keywords", keywords) if k)
    if not words:
        return 0
    return len(_keyword_pattern(words).findall(_text("count_keywords", value)))


# --- numbers ----------------------------------------------------------------------------------


@function("clamp", min_args=3, max_args=3, example="clamp(1.7, 0, 1) == 1")
def clamp(value: Any, low: Any, high: Any) -> float | int:
    """Limit a number to [low, high]; a non-finite number becomes `low`."""
    number = _number("clamp", value)
    if isinstance(number, float) and not math.isfinite(number):
        return _number("clamp", low)
    return max(_number("clamp", low), min(_number("clamp", high), number))


@function("round", min_args=1, max_args=2, example="round(0.856, 2) == 0.86")
def round_(value: Any, digits: Any = 0) -> float | int:
    """Round half away from zero to `digits` decimals."""
    number, places = _number("round", value), _places("round", digits)
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
    number = _number(name, digits)
    if isinstance(number, float) and not math.isfinite(number):
        raise _fail(name, f"digits must be a finite number, got {number}")
    return int(max(-10_000, min(10_000, number)))


@function("fixed", min_args=2, max_args=2, example="fixed(1, 2) == '1.00'")
def fixed(value: Any, digits: Any) -> str:
    """A number as text with exactly `digits` decimals, 0 to 100 (JavaScript's toFixed)."""
    places = _places("fixed", digits)
    if not 0 <= places <= 100:
        raise _fail("fixed", f"digits must be from 0 to 100, got {digits}")
    return f"{_number('fixed', value):.{places}f}"


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
    return abs(_number("abs", value))


@function("sum", min_args=1, max_args=1, example="sum([1, 2]) == 3", native_jmespath=True)
def sum_(values: Any) -> float | int:
    """Sum of an array of numbers."""
    return sum(_number("sum", v) for v in _list("sum", values))


@function("max", min_args=1, max_args=1, example="max([1, 3, 2]) == 3", native_jmespath=True)
def max_(values: Any) -> Any:
    """Largest element of an array (null when empty)."""
    items = _list("max", values)
    return max(items) if items else None


@function("min", min_args=1, max_args=1, example="min([4, 3]) == 3", native_jmespath=True)
def min_(values: Any) -> Any:
    """Smallest element of an array (null when empty)."""
    items = _list("min", values)
    return min(items) if items else None


# --- collections ------------------------------------------------------------------------------


@function("length", min_args=1, max_args=1, example="length('abc') == 3", native_jmespath=True)
def length(value: Any) -> int:
    """Length of a string (code points), array or object."""
    if isinstance(value, (str, Sequence, Mapping)):
        return len(value)
    raise _fail("length", f"expected a string, array or object, got {type_name(value)}")


@function("contains", min_args=2, max_args=2, example="contains(['a', 'b'], 'b')",
          native_jmespath=True)
def contains(subject: Any, item: Any) -> bool:
    """True when an array holds the item, or a string holds the substring."""
    if isinstance(subject, str):
        return isinstance(item, str) and item in subject
    return item in _list("contains", subject)


@function("starts_with", min_args=2, max_args=2, example="starts_with('deepseek-v4', 'deepseek')",
          native_jmespath=True)
def starts_with(value: Any, prefix: Any) -> bool:
    """True when the string starts with the prefix."""
    return value is not None and _text("starts_with", value).startswith(_text("starts_with", prefix))


@function("ends_with", min_args=2, max_args=2, example="ends_with('a.yaml', '.yaml')",
          native_jmespath=True)
def ends_with(value: Any, suffix: Any) -> bool:
    """True when the string ends with the suffix."""
    return value is not None and _text("ends_with", value).endswith(_text("ends_with", suffix))


@function("keys", min_args=1, max_args=1, example="keys({'a': 1}) == ['a']", native_jmespath=True)
def keys(value: Any) -> list[str]:
    """Keys of an object."""
    if isinstance(value, Mapping):
        return list(value)
    raise _fail("keys", f"expected an object, got {type_name(value)}")


@function("values", min_args=1, max_args=1, example="values({'a': 1}) == [1]",
          native_jmespath=True)
def values(value: Any) -> list[Any]:
    """Values of an object."""
    if isinstance(value, Mapping):
        return list(value.values())
    raise _fail("values", f"expected an object, got {type_name(value)}")


@function("get", min_args=2, max_args=3, example="get({'a': 1}, 'b', 0) == 0")
def get(container: Any, key: Any, default: Any = None) -> Any:
    """`container[key]`, or `default` when the key or index is missing."""
    if isinstance(container, Mapping):
        return container.get(key, default)
    if isinstance(container, Sequence) and not isinstance(container, str) and isinstance(key, int):
        return container[key] if -len(container) <= key < len(container) else default
    return default


@function("merge", min_args=1, max_args=None, example="merge({'a': 1}, {'b': 2}) == {'a': 1, 'b': 2}",
          native_jmespath=True)
def merge(*objects: Any) -> dict[str, Any]:
    """Shallow merge of objects, later keys win."""
    result: dict[str, Any] = {}
    for obj in objects:
        if not isinstance(obj, Mapping):
            raise _fail("merge", f"expected objects, got {type_name(obj)}")
        result.update(obj)
    return result


def _deep_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        merged = dict(base)
        for key, value in patch.items():
            merged[key] = _deep_merge(base.get(key), value) if key in base else value
        return merged
    return patch


@function("deep_merge", min_args=1, max_args=None,
          example="deep_merge({'a': {'b': 1, 'c': 2}}, {'a': {'c': 3}}) == {'a': {'b': 1, 'c': 3}}")
def deep_merge(*objects: Any) -> Any:
    """Merge objects recursively, later ones win; null arguments are skipped."""
    result: Any = {}
    for obj in objects:
        if obj is None:
            continue
        if not isinstance(obj, Mapping):
            raise _fail("deep_merge", f"expected objects, got {type_name(obj)}")
        result = _deep_merge(result, obj)
    return result


@function("not_null", min_args=1, max_args=None, example="not_null(null, 'x') == 'x'",
          native_jmespath=True)
def not_null(*items: Any) -> Any:
    """The first argument that is not null."""
    return next((item for item in items if item is not None), None)


@function("range", min_args=1, max_args=1, example="range(3) == [0, 1, 2]")
def range_(count: Any) -> list[int]:
    """The numbers 0 to count - 1 (at most 10,000)."""
    size = int(_number("range", count))
    if size > 10_000:
        raise _fail("range", f"at most 10000 numbers, asked for {size}")
    return list(range(max(0, size)))


@function("zip", min_args=2, max_args=None, example="zip([1, 2], ['a', 'b']) == [[1, 'a'], [2, 'b']]")
def zip_(*arrays: Any) -> list[list[Any]]:
    """Arrays side by side: the i-th items together, as long as the shortest."""
    return [list(items) for items in zip(*(_list("zip", a) for a in arrays), strict=False)]


@function("to_array", min_args=1, max_args=1, example="to_array('a') == ['a'] and to_array(['a']) == ['a']",
          native_jmespath=True)
def to_array(value: Any) -> list[Any]:
    """An array as is; any other value as a one-item array."""
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]


@function("intersect", min_args=2, max_args=2, example="intersect(['a', 'b', 'c'], ['c', 'a']) == ['a', 'c']")
def intersect(first: Any, second: Any) -> list[Any]:
    """Elements of the first array that are also in the second, in the first array's order."""
    keep = set(_list("intersect", second))
    return [item for item in _list("intersect", first) if item in keep]


@function("without", min_args=2, max_args=2, example="without(['a', 'b'], ['b']) == ['a']")
def without(first: Any, second: Any) -> list[Any]:
    """Elements of the first array that are not in the second."""
    drop = set(_list("without", second))
    return [item for item in _list("without", first) if item not in drop]


@function("expand_aliases", min_args=3, max_args=3,
          example="expand_aliases(['read', 'search'], {'search': ['grep', 'find']}, ['find', 'read']) == ['read', 'find']")  # noqa: E501
def expand_aliases(names: Any, aliases: Any, available: Any) -> list[str]:
    """Map each name through an alias table and keep the results that are available, in order."""
    table = aliases if isinstance(aliases, Mapping) else {}
    present = set(_list("expand_aliases", available))
    result: dict[str, None] = {}  # ordered, and a lookup that stays O(1)
    for name in _list("expand_aliases", names):
        for candidate in table.get(name, [name]):
            if candidate in present:
                result.setdefault(candidate, None)
    return list(result)


# --- thinking levels and scores ---------------------------------------------------------------


def _level_rank(name: str, level: Any) -> int:
    if level in THINKING_LEVELS:
        return THINKING_LEVELS.index(level)
    raise _fail(name, f"unknown thinking level {level!r}; expected one of {', '.join(THINKING_LEVELS)}")


@function("cap_level", min_args=2, max_args=2, example="cap_level('medium', 'low') == 'low'")
def cap_level(level: Any, ceiling: Any) -> str | None:
    """The lower of two thinking levels (off < minimal < low < medium < high < xhigh < max)."""
    if level is None:
        return None
    if ceiling is None:
        return str(level)
    return THINKING_LEVELS[min(_level_rank("cap_level", level), _level_rank("cap_level", ceiling))]


@function("map_score", min_args=3, max_args=3,
          example="map_score(0.3, [{'score': 0.2, 'level': 'off'}, {'score': 0.4, 'level': 'low'}], 'high') == 'low'")  # noqa: E501
def map_score(score: Any, table: Any, default: Any) -> Any:
    """First entry, by ascending `score`, whose score is at least the given one; else `default`."""
    value = _number("map_score", score)
    rows = _list("map_score", table)
    if not all(isinstance(e, Mapping) for e in rows):
        raise _fail("map_score", "expected an array of objects with `score`")
    entries = sorted(rows, key=lambda e: _number("map_score", e.get("score")))
    for entry in entries:
        if value <= entry["score"]:
            return entry.get("level", entry.get("value"))
    return default


# --- model catalog ----------------------------------------------------------------------------


def _capacity(ref: str, models: Mapping[str, Any], capabilities: Mapping[str, Any], top: float) -> float:
    if ref in capabilities:
        return float(capabilities[ref])
    window = (models.get(ref) or {}).get("context_window") or 0
    return float(window) / top if top else 0.0


def _price(ref: str, models: Mapping[str, Any]) -> float:
    """Input plus output price; infinite without a price (no cost, or all zero as Pi reports none)."""
    cost = (models.get(ref) or {}).get("cost") or {}
    if not cost.get("input") and not cost.get("output"):
        return math.inf
    return float(cost.get("input") or 0) + float(cost.get("output") or 0)


@function("pick_model", min_args=3, max_args=5,
          example="pick_model(['a', 'b'], 'smallest_fitting', {'a': {'context_window': 8000}, 'b': {'context_window': 32000}}, 0.2) == 'a'")  # noqa: E501
def pick_model(refs: Any, strategy: Any, models: Any, score: Any = 0, capabilities: Any = None) -> Any:
    """Pick a model ref from a catalog list by capacity or cost.

    Capacity is the `capabilities` entry, else the context window divided by the largest window
    among the candidates. Strategies: `smallest_fitting` (smallest capacity >= score, else the
    largest), `largest`, `smallest`, `cheapest` (lowest input+output price among those that fit,
    else among all; priced models first, then those without a price (no `cost`, or zero input
    and output prices: Pi's way of saying none) in catalog order; catalog order breaks ties).
    Refs missing from `models` are skipped, even with a `capabilities` entry: Pi cannot route
    to a model it does not know.
    """
    catalog = models if isinstance(models, Mapping) else {}
    if not all(isinstance(v, Mapping) for v in catalog.values()):
        raise _fail("pick_model", "expected `models` to map refs to model objects")
    caps = capabilities if isinstance(capabilities, Mapping) else {}
    known = [r for r in _list("pick_model", refs) if r in catalog]
    if not known:
        return None
    top = max(float((catalog.get(r) or {}).get("context_window") or 0) for r in known)
    need = float(_number("pick_model", score))
    capacity = {r: _capacity(r, catalog, caps, top) for r in known}
    fitting = [r for r in known if capacity[r] >= need]
    if strategy == "smallest_fitting":
        return min(fitting, key=lambda r: capacity[r]) if fitting else max(known, key=lambda r: capacity[r])
    if strategy == "largest":
        return max(known, key=lambda r: capacity[r])
    if strategy == "smallest":
        return min(known, key=lambda r: capacity[r])
    if strategy == "cheapest":
        return min(fitting or known, key=lambda r: _price(r, catalog))
    raise _fail("pick_model", f"unknown strategy {strategy!r}; expected cheapest, largest, "
                              "smallest or smallest_fitting")


def function_names() -> list[str]:
    """Sorted names of every helper function."""
    return sorted(FUNCTIONS)


# --- questions and answers (the normalized question model of docs/events.md) ---------


@function("omit_nulls", min_args=1, max_args=1, example="omit_nulls({'a': 1, 'b': null}) == {'a': 1}")
def omit_nulls(value: Any) -> Any:
    """A copy of an object without its null-valued keys."""
    if not isinstance(value, Mapping):
        raise _fail("omit_nulls", f"expected an object, got {type_name(value)}")
    return {k: v for k, v in value.items() if v is not None}


@function("join_values", min_args=1, max_args=2, example="join_values(['a', 'b']) == 'a, b'")
def join_values(value: Any, sep: Any = ", ") -> str:
    """An array's items joined with `sep` (default ', '); any other value as text."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        parts = [str(v) for v in value]
        separator = _text("join_values", sep)
        _bounded_text("join_values", sum(map(len, parts)) + len(separator) * max(0, len(parts) - 1))
        return separator.join(parts)
    return "" if value is None else str(value)


@function("argmax", min_args=1, max_args=1, example="argmax([1, 3, 3]) == 1")
def argmax(values: Any) -> int | None:
    """Index of the first largest number (null for an empty array)."""
    items = [_number("argmax", v) for v in _list("argmax", values)]
    return max(range(len(items)), key=lambda i: (items[i], -i)) if items else None


def _score(option: Mapping[str, Any], index: int, scorer: Mapping[str, Any]) -> float:
    if scorer.get("first"):
        return float(scorer.get("add", 0)) if index == 0 else 0.0
    pattern = compile_regex(str(scorer.get("pattern", "")), str(scorer.get("flags", "")))
    for field in scorer.get("fields") or ("label", "value", "description"):
        text = option.get(field)
        if isinstance(text, str) and search("pick_option", pattern,
                                            text.strip() if scorer.get("trim") else text):
            return float(scorer.get("add", 0))
    return 0.0


@function("pick_option", min_args=2, max_args=2,
          example="pick_option([{'value': 'a', 'label': 'A'}, {'value': 'b', 'label': 'B (Recommended)'}], "
                  "[{'pattern': 'recommended', 'flags': 'i', 'add': 100}]).value == 'b'")
def pick_option(options: Any, scorers: Any) -> Any:
    """The best-scoring option (ties go to the earlier one) with its `score` and `index`, or null.

    Each scorer adds `add` when its regex `pattern` (with `flags`) is found in one of `fields`
    (default label, value, description; `trim: true` trims the text first), or, with
    `first: true`, to the first option.
    """
    items = [o for o in _list("pick_option", options) if isinstance(o, Mapping)]
    if not items:
        return None
    rules = [s for s in _list("pick_option", scorers) if isinstance(s, Mapping)]
    scores = [sum(_score(o, i, s) for s in rules) for i, o in enumerate(items)]
    best = max(range(len(items)), key=lambda i: (scores[i], -i))
    return {**items[best], "score": scores[best], "index": best}


def _answer_values(raw: Any) -> list[str] | None:
    if isinstance(raw, str):
        return [raw.strip()] if raw.strip() else None
    if isinstance(raw, Sequence) and raw and all(isinstance(v, str) for v in raw):
        values = [v.strip() for v in raw if v.strip()]
        return values or None
    return None


def _accept(answer: Any, question: Mapping[str, Any], *, reason: str | None,
            confidence: float | None, source: str | None) -> dict[str, Any] | None:
    if not isinstance(answer, Mapping):
        return None
    raw = next((answer[k] for k in ("value", "answer", "selected") if answer.get(k) is not None), None)
    values = _answer_values(raw)
    if values is None:
        return None
    options = [o for o in question.get("options") or [] if isinstance(o, Mapping)]
    matched = [next((o for o in options if v in (o.get("value"), o.get("label"))), None) for v in values]
    multi = bool(question.get("multi_select"))
    if all(m is not None for m in matched):
        chosen = [m["value"] for m in matched if m is not None]
        labels = [m["label"] for m in matched if m is not None]
    elif question.get("allow_other", True):
        chosen, labels = values, values
    else:
        return None
    given = answer.get("confidence")
    finite = isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given)
    label = answer.get("label")
    text = answer.get("reason")
    return {
        "id": answer["id"] if isinstance(answer.get("id"), str) else question.get("id"),
        "value": chosen if multi else chosen[0],
        "label": label.strip() if isinstance(label, str) and label.strip() else ", ".join(labels),
        "reason": text.strip() if isinstance(text, str) and text.strip() else reason,
        "confidence": max(0.0, min(1.0, float(given))) if finite and given is not None else confidence,
        "source": source,
    }


@function("validate_answers", min_args=2, max_args=5,
          example="validate_answers({'answers': [{'value': 'MVP'}]}, "
                  "[{'id': 'q1', 'options': [{'value': 'mvp', 'label': 'MVP'}], 'allow_other': false}])"
                  ".q1.value == 'mvp'")
def validate_answers(parsed: Any, questions: Any, reason: Any = None, confidence: Any = None,
                     source: Any = None) -> dict[str, Any]:
    """Check a model's JSON answers against normalized questions; all or nothing.

    Answers are matched to questions by position (extra ones ignored); the value comes from
    `value`, `answer` or `selected` (a non-empty string or strings); each value must equal an
    option's value or label (a label becomes its value) unless the question allows other
    answers; confidence is clamped to [0, 1]. An answer without a reason gets `reason`, one
    without a finite confidence gets `confidence` (both null when not given); every answer's
    `source` is `source` (null when not given: the policy names who answered). The result maps
    each answer's id (the answer's own `id` when it is a string) to the answer. Fails when any
    answer is invalid.
    """
    if not isinstance(parsed, Mapping) or not isinstance(parsed.get("answers"), list):
        raise _fail("validate_answers", "expected an object with an `answers` array")
    if reason is not None:
        reason = _text("validate_answers", reason)
    if confidence is not None:
        confidence = _number("validate_answers", confidence)
    if source is not None:
        source = _text("validate_answers", source)
    asked = [q for q in _list("validate_answers", questions) if isinstance(q, Mapping)]
    given = parsed["answers"]
    accepted = [_accept(given[i], q, reason=reason, confidence=confidence, source=source)
                if i < len(given) else None
                for i, q in enumerate(asked)]
    if any(a is None for a in accepted):
        raise _fail("validate_answers", "incomplete or invalid JSON answers")
    return {a["id"]: a for a in accepted if a is not None}
