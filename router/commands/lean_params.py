"""typer's coercion of the command line's plain values, without pydantic.

typer (0.29 on) coerces every parameter through a pydantic `TypeAdapter`, which costs a command
that reads no policy (`router version`, `--help`, `explain RT301`) the import of pydantic, and
every command the building of its adapters. The router's parameters are mostly `str`, `Path`,
`bool` and lists of them; for those values this module gives exactly what typer's adapters give
(`str(value)`; `Path(value)` then typer's own path checks; a bool, or a number within its bounds,
as is), and hands any other value or type to typer's own adapter, built only then. It reaches
into typer's private modules, so it runs only with the typer versions it was checked against
(TESTED_TYPER, the pin of constraints.txt); with any other typer `install` does nothing and typer
coerces everything itself, as before.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

LEAVES = (str, Path, bool, int, float)
TESTED_TYPER = "0.29."  # the typer releases whose private coercion this module was checked against


class _Delegate(Exception):
    """A value the lean path does not coerce: typer's adapter does."""


def _leaf(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    """One value as typer's adapter for `annotation` returns it, or `_Delegate`."""
    if annotation is str and isinstance(value, str):
        return str(value)
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is Path and isinstance(value, (str, Path)):
        from typer._param_types import coerce_cli_path

        return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    if annotation in (int, float) and type(value) is annotation and _within(value, info):
        return value
    raise _Delegate


def _within(value: float, info: Any) -> bool:
    """A number typer's adapter passes unchanged: within min and max, not clamped."""
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    return (not getattr(info, "clamp", False) and (low is None or value >= low)
            and (high is None or value <= high))


def lean_type(annotation: Any, info: Any) -> Any:
    """The leaf type this module coerces for `annotation` (itself, or a list's items), else None."""
    if getattr(info, "parser", None) is not None or getattr(info, "path_type", None) is not None:
        return None
    leaf = get_args(annotation)[0] if get_origin(annotation) is list and get_args(annotation) else annotation
    return leaf if leaf in LEAVES else None


@functools.cache
def lean_class() -> Any:
    """The RuntimeParam subclass of the lean coercion, or None with a typer without the machinery."""
    import typer

    if not typer.__version__.startswith(TESTED_TYPER):
        return None
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # pragma: no cover - an older typer coerces through click's own types
        return None

    @dataclass(frozen=True)
    class LeanRuntimeParam(RuntimeParam):
        """typer's runtime coercion for str, Path, bool and numbers (and lists of them) without
        pydantic."""

        descriptor: Any

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation: Any = self.annotation
            leaf = lean_type(annotation, self.parameter_info)
            try:
                if get_origin(annotation) is list:
                    items = value if isinstance(value, (list, tuple)) else [value]
                    return [_leaf(leaf, self.parameter_info, item, param, ctx) for item in items]
                return _leaf(leaf, self.parameter_info, value, param, ctx)
            except _Delegate:
                return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    return LeanRuntimeParam


def install(params: list[Any]) -> None:
    """Give the plain parameters among `params` the lean coercion (typer builds the others')."""
    lean = lean_class()
    if lean is None:
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", "absent") is not None:
            continue
        if descriptor.file_annotation is None and lean_type(descriptor.annotation, descriptor.parameter_info):
            param._runtime_param = lean(descriptor.parameter_info, descriptor.annotation, descriptor)
