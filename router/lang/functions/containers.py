"""Helpers on arrays and objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from router.lang.functions.registry import (
    fail,
    function,
    list_arg,
    number_arg,
    text_arg,
    type_name,
)

# --- collections ------------------------------------------------------------------------------


@function("length", min_args=1, max_args=1, example="length('abc') == 3", native_jmespath=True)
def length(value: Any) -> int:
    """Length of a string (code points), array or object."""
    if isinstance(value, (str, Sequence, Mapping)):
        return len(value)
    raise fail("length", f"expected a string, array or object, got {type_name(value)}")


@function("contains", min_args=2, max_args=2, example="contains(['a', 'b'], 'b')",
          native_jmespath=True)
def contains(subject: Any, item: Any) -> bool:
    """True when an array holds the item, or a string holds the substring."""
    if isinstance(subject, str):
        return isinstance(item, str) and item in subject
    return item in list_arg("contains", subject)


@function("starts_with", min_args=2, max_args=2, example="starts_with('deepseek-v4', 'deepseek')",
          native_jmespath=True)
def starts_with(value: Any, prefix: Any) -> bool:
    """True when the string starts with the prefix."""
    return value is not None and text_arg("starts_with", value).startswith(text_arg("starts_with", prefix))


@function("ends_with", min_args=2, max_args=2, example="ends_with('a.yaml', '.yaml')",
          native_jmespath=True)
def ends_with(value: Any, suffix: Any) -> bool:
    """True when the string ends with the suffix."""
    return value is not None and text_arg("ends_with", value).endswith(text_arg("ends_with", suffix))


@function("keys", min_args=1, max_args=1, example="keys({'a': 1}) == ['a']", native_jmespath=True)
def keys(value: Any) -> list[str]:
    """Keys of an object."""
    if isinstance(value, Mapping):
        return list(value)
    raise fail("keys", f"expected an object, got {type_name(value)}")


@function("values", min_args=1, max_args=1, example="values({'a': 1}) == [1]",
          native_jmespath=True)
def values(value: Any) -> list[Any]:
    """Values of an object."""
    if isinstance(value, Mapping):
        return list(value.values())
    raise fail("values", f"expected an object, got {type_name(value)}")


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
            raise fail("merge", f"expected objects, got {type_name(obj)}")
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
            raise fail("deep_merge", f"expected objects, got {type_name(obj)}")
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
    size = int(number_arg("range", count))
    if size > 10_000:
        raise fail("range", f"at most 10000 numbers, asked for {size}")
    return list(range(max(0, size)))


@function("zip", min_args=2, max_args=None, example="zip([1, 2], ['a', 'b']) == [[1, 'a'], [2, 'b']]")
def zip_(*arrays: Any) -> list[list[Any]]:
    """Arrays side by side: the i-th items together, as long as the shortest."""
    return [list(items) for items in zip(*(list_arg("zip", a) for a in arrays), strict=False)]


@function("to_array", min_args=1, max_args=1, example="to_array('a') == ['a'] and to_array(['a']) == ['a']",
          native_jmespath=True)
def to_array(value: Any) -> list[Any]:
    """An array as is; any other value as a one-item array."""
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]


@function("intersect", min_args=2, max_args=2, example="intersect(['a', 'b', 'c'], ['c', 'a']) == ['a', 'c']")
def intersect(first: Any, second: Any) -> list[Any]:
    """Elements of the first array that are also in the second, in the first array's order."""
    keep = set(list_arg("intersect", second))
    return [item for item in list_arg("intersect", first) if item in keep]


@function("without", min_args=2, max_args=2, example="without(['a', 'b'], ['b']) == ['a']")
def without(first: Any, second: Any) -> list[Any]:
    """Elements of the first array that are not in the second."""
    drop = set(list_arg("without", second))
    return [item for item in list_arg("without", first) if item not in drop]


@function("expand_aliases", min_args=3, max_args=3,
          example="expand_aliases(['read', 'search'], {'search': ['grep', 'find']}, ['find', 'read']) == ['read', 'find']")  # noqa: E501
def expand_aliases(names: Any, aliases: Any, available: Any) -> list[str]:
    """Map each name through an alias table and keep the results that are available, in order."""
    table = aliases if isinstance(aliases, Mapping) else {}
    present = set(list_arg("expand_aliases", available))
    result: dict[str, None] = {}  # ordered, and a lookup that stays O(1)
    for name in list_arg("expand_aliases", names):
        for candidate in table.get(name, [name]):
            if candidate in present:
                result.setdefault(candidate, None)
    return list(result)
