"""`provides.questions:` across the layers: merged field by field, each text a template over `vars`.

The engine builds question and dialog events with these values (router.events.questions). A
text is a template of the language (docs/language.md, Templates) whose only name is `vars`:
`"{vars.NAME}"`, exactly one placeholder, is the var's value with its type; it is rendered for
each event (router.compile.question_settings), so an environment-bound var follows its variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from router.compile.question_settings import render_question_template
from router.diagnostics.code_names import INVALID_VALUE, UNDEFINED_VAR, UNKNOWN_NAME
from router.diagnostics.diagnostic import Diagnostic
from router.diagnostics.errors import ExpressionError
from router.diagnostics.suggest import did_you_mean
from router.lang.expr.expression import Template, compile_template
from router.lang.expr.syntax import ExpressionSyntaxError
from router.load.loader import PolicyFile
from router.load.model import EnvVar
from router.load.provides import ConfirmOption, DialogLines

_TYPES: dict[str, tuple[Any, str]] = {
    "tool_name": (str, "a text"),
    "excerpt_entries": (int, "a whole number, 0 or more"),
    "context_chars": (int, "a whole number, 0 or more"),
    "confirm_options": (list[ConfirmOption], "a list of {value, label, description} options"),
    "dialog_lines": (DialogLines, "a mapping of confirm, input and editor labels"),
}
_ADAPTERS = {name: TypeAdapter(kind) for name, (kind, _) in _TYPES.items()}
SCOPE_NAMES = frozenset({"vars"})  # what a question declaration's template may read


def merge_question_events(files: list[PolicyFile], literals: Mapping[str, Any],
                          env_vars: Mapping[str, EnvVar], diagnostics: list[Diagnostic]) -> dict[str, Any]:
    """The fields every layer declares, later layers winning (`dialog_lines` label by label)."""
    merged: dict[str, Any] = {}
    values = {**{name: spec.default for name, spec in env_vars.items()}, **literals}
    for f in files:
        declared = f.policy.provides.questions
        if declared is None:
            continue
        where = f.policy.provided_at("questions")
        for name, value in declared.model_dump(exclude_none=True).items():
            problem = _problem(name, value, values)
            if problem is not None:
                code, message, hint = problem
                diagnostics.append(Diagnostic(code, f"{'.'.join(where)}.{name}: {message}",
                                              f.doc.span((*where, name)), help=hint))
                continue
            earlier = merged.get(name)
            if isinstance(earlier, dict) and isinstance(value, dict):
                value = {**earlier, **value}
            merged[name] = value
    return merged


def _problem(name: str, value: Any, values: Mapping[str, Any]) -> tuple[str, str, str | None] | None:
    """(code, message, help) when the field's value (a template's, with the vars' values at
    load, an environment-bound var's default) is unusable."""
    expected = _TYPES[name][1]
    origin = f"got {value!r}"
    if isinstance(value, str):
        try:
            template = compile_template(value)
        except ExpressionSyntaxError as exc:
            return (exc.code, exc.message, None)
        unknown = _unknown(template, values)
        if unknown is not None:
            return unknown
        try:
            value = render_question_template(template, values)
        except ExpressionError as exc:
            return (INVALID_VALUE, f"expected {expected}; the template fails: {exc}", None)
        if template.expression is not None:
            origin = f"{template.expression.source.strip()} is {value!r}"
    try:
        checked = _ADAPTERS[name].validate_python(value, strict=name != "dialog_lines")
    except ValidationError:
        return (INVALID_VALUE, f"expected {expected}; {origin}", None)
    if isinstance(checked, int) and (isinstance(value, bool) or checked < 0):
        return (INVALID_VALUE, f"expected {expected}; {origin}", None)
    return None


def _unknown(template: Template, values: Mapping[str, Any]) -> tuple[str, str, str | None] | None:
    """An undefined var (RT303) or a name other than `vars` (RT302) the template reads."""
    expression = template.expression
    if expression is None:
        return None
    for name in sorted(expression.names - SCOPE_NAMES):
        return (UNKNOWN_NAME, f"unknown name '{name}': a question declaration reads only vars",
                "write vars.NAME, or the value itself")
    for path in expression.paths:
        if path[0] == "vars" and len(path) > 1 and path[1] not in values:
            return (UNDEFINED_VAR, f"undefined var 'vars.{path[1]}'",
                    did_you_mean(path[1], set(values)) or "declare it under vars:")
    return None

