"""Turn pydantic validation errors into located diagnostics with did-you-mean help."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from router.diagnostics.code_names import INVALID_VALUE, MISSING_KEY, UNKNOWN_KEY, UNSUPPORTED_VERSION
from router.diagnostics.diagnostic import Diagnostic
from router.diagnostics.suggest import did_you_mean
from router.load.source import KeyPath, SourceDoc, format_key_path


def validation_diagnostics(
    exc: ValidationError, doc: SourceDoc, root: type[BaseModel], *, base: KeyPath = ()
) -> list[Diagnostic]:
    """One diagnostic per pydantic error, placed at the offending key or value."""
    out = []
    for error in exc.errors():
        loc = _clean_loc(doc, base, error["loc"])
        kind = error["type"]
        where = format_key_path(loc[:-1]) or "the top level"
        rule = rule_label(doc, loc)
        if kind == "extra_forbidden":
            key = str(loc[-1])
            fields = _fields_at(root, loc[len(base):-1])
            out.append(Diagnostic(
                UNKNOWN_KEY, f"unknown key '{key}' in {where}{rule}", doc.span(loc, key=True),
                key_path=format_key_path(loc),
                help=((did_you_mean(key, fields) or "") + (f" expected one of: {', '.join(sorted(fields))}"
                                                          if fields else "")).strip() or None))
        elif kind == "missing":
            out.append(Diagnostic(MISSING_KEY, f"missing required key '{loc[-1]}' in {where}{rule}",
                                  doc.span(loc[:-1]), key_path=format_key_path(loc)))
        else:
            message = error["msg"][0].lower() + error["msg"][1:]
            message = message.removeprefix("value error, ")
            got = error.get("input")
            shown = "" if isinstance(got, (dict, list)) or got is None else f"; got {got!r}"
            code = UNSUPPORTED_VERSION if loc[len(base):] == ("version",) else INVALID_VALUE
            out.append(Diagnostic(code, f"{format_key_path(loc) or 'policy'}: {message}{shown}{rule}",
                                  doc.span(loc), key_path=format_key_path(loc)))
    return out


def rule_label(doc: SourceDoc, loc: KeyPath) -> str:
    """` (rule 'id')` when `loc` is inside `rules[i]` and that rule has an id."""
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        rules = doc.data.get("rules") if isinstance(doc.data, dict) else None
        if isinstance(rules, list) and loc[1] < len(rules) and isinstance(rules[loc[1]], dict):
            rule_id = rules[loc[1]].get("id")
            if isinstance(rule_id, str):
                return f" (rule '{rule_id}')"
    return ""


def _clean_loc(doc: SourceDoc, base: KeyPath, loc: tuple[Any, ...]) -> KeyPath:
    """Drop pydantic's union tags ('str', 'list[str]', 'ClassifySignal') from a loc."""
    path: list[str | int] = list(base)
    data: Any = _at(doc.data, base)
    for part in loc:
        in_dict = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if in_dict or in_list:
            path.append(part)
            data = data[part]
        elif isinstance(data, dict) and isinstance(part, str) and not _is_tag(part):
            path.append(part)
            data = None
    return tuple(path)


def _at(data: Any, path: KeyPath) -> Any:
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _is_tag(part: str) -> bool:
    return "[" in part or part[:1].isupper() or part in ("str", "int", "float", "bool")


def _fields_at(root: type[BaseModel], loc: KeyPath) -> list[str]:
    current: Any = root
    for part in loc:
        current = _descend(current, part)
        if current is None:
            return []
    model = _as_model(current)
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _as_model(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in _union_args(tp):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _union_args(tp: Any) -> tuple[Any, ...]:
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return get_args(tp)
    return ()


def _descend(tp: Any, part: str | int) -> Any:
    for candidate in (tp, *_union_args(tp)):
        model = candidate if isinstance(candidate, type) and issubclass(candidate, BaseModel) else None
        if model is not None and isinstance(part, str):
            for name, field in model.model_fields.items():
                if part in (name, field.alias):
                    return field.annotation
        origin = get_origin(candidate)
        if origin is list and isinstance(part, int):
            return get_args(candidate)[0]
        if origin is dict and isinstance(part, str):
            return get_args(candidate)[1]
    return None
