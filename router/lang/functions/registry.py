"""The registry of helper functions shared by both languages (JMESPath `match` and `when`), and
the argument checks they share.

Each entry is registered with `@function` into the visible `FUNCTIONS` dict, declares its arity and
carries a runnable example (`docs/reference/functions.md` is generated from these; a test runs every example).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from router.diagnostics.code_names import EVALUATION_LIMIT, HELPER_FAILED
from router.diagnostics.errors import ExpressionError
from router.lang import budget


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


def bounded_text(name: str, length: int) -> None:
    """Refuse a text result longer than MAX_TEXT (RT403)."""
    if length > MAX_TEXT:
        raise ExpressionError(f"{name}(): the result would be longer than {MAX_TEXT} characters",
                              code=EVALUATION_LIMIT)


def fail(name: str, message: str) -> ExpressionError:
    """The error of a helper called with a wrong argument (RT402)."""
    return ExpressionError(f"{name}(): {message}", code=HELPER_FAILED)


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


def text_arg(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise fail(name, f"expected a string, got {type_name(value)}")


def number_arg(name: str, value: Any) -> float | int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise fail(name, f"expected a number, got {type_name(value)}")


def list_arg(name: str, value: Any) -> Sequence[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return value
    raise fail(name, f"expected an array, got {type_name(value)}")


def function_names() -> list[str]:
    """Sorted names of every helper function."""
    return sorted(FUNCTIONS)
