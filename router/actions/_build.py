"""The pydantic model of an action's `Params` class, built when the registry is first used."""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, RootModel, model_validator
from pydantic import Field as PydanticField

from router.actions._base import REQUIRED, FieldInfo, Params


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


_BUILT: dict[type[Params], type[BaseModel]] = {}


def model_of(cls: type[Params]) -> type[BaseModel]:
    """The pydantic model with `cls`'s fields, defaults, descriptions, docstring and `check`."""
    if cls not in _BUILT:
        _BUILT[cls] = _build(cls)
    return _BUILT[cls]


def _build(cls: type[Params]) -> type[BaseModel]:
    hints = {name: _converted(hint) for name, hint in typing.get_type_hints(cls).items()
             if name != "model_fields_set"}
    namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                 "__doc__": cls.__doc__}
    if set(hints) == {"root"}:
        generic: Any = RootModel
        return types.new_class(cls.__name__, (generic[hints["root"]],), {}, lambda ns: ns.update(namespace))
    namespace["__annotations__"] = hints
    for name in hints:
        default = cls.__dict__.get(name, REQUIRED)
        if isinstance(default, FieldInfo):
            namespace[name] = PydanticField(default.default, description=default.description,
                                            **default.bounds)
        elif default is not REQUIRED:
            namespace[name] = default
    check = cls.__dict__.get("check")
    if check is not None:
        namespace["_check"] = model_validator(mode="after")(_after(check))
    return type(cls.__name__, (Model,), namespace)


def _after(check: Any) -> Any:
    def validate(self: Any) -> Any:
        check(self)
        return self

    return validate


def _converted(hint: Any) -> Any:
    """`hint` with every `Params` class in it replaced by its model (`list[PanelItem]`)."""
    if isinstance(hint, type) and issubclass(hint, Params):
        return model_of(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if not args or origin is typing.Literal:
        return hint
    converted = tuple(_converted(arg) for arg in args)
    if converted == args:
        return hint
    if origin in (types.UnionType, typing.Union):
        return functools.reduce(operator.or_, converted)
    return origin[converted]
