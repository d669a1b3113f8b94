"""`question_events:` across the layers: merged field by field, `{vars.NAME}` references checked.

The engine builds question and dialog events with these values (router.events.questions); a
field may name a var, resolved per event (an environment-bound var follows its variable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from router.diagnostics.code_names import INVALID_VALUE, UNDEFINED_VAR
from router.diagnostics.diagnostic import Diagnostic
from router.diagnostics.suggest import did_you_mean
from router.events.questions import VAR_REFERENCE
from router.load.loader import PolicyFile
from router.load.model import ConfirmOption, DialogLines, EnvVar

_TYPES: dict[str, tuple[Any, str]] = {
    "tool_name": (str, "a text"),
    "excerpt_entries": (int, "a whole number, 0 or more"),
    "context_chars": (int, "a whole number, 0 or more"),
    "confirm_options": (list[ConfirmOption], "a list of {value, label, description} options"),
    "dialog_lines": (DialogLines, "a mapping of confirm, input and editor labels"),
}
_ADAPTERS = {name: TypeAdapter(kind) for name, (kind, _) in _TYPES.items()}


def merge_question_events(files: list[PolicyFile], literals: Mapping[str, Any],
                          env_vars: Mapping[str, EnvVar], diagnostics: list[Diagnostic]) -> dict[str, Any]:
    """The fields every layer declares, later layers winning (`dialog_lines` label by label)."""
    merged: dict[str, Any] = {}
    for f in files:
        declared = f.policy.question_events
        if declared is None:
            continue
        for name, value in declared.model_dump(exclude_none=True).items():
            problem = _problem(name, value, literals, env_vars)
            if problem is not None:
                code, message, hint = problem
                diagnostics.append(Diagnostic(code, f"question_events.{name}: {message}",
                                              f.doc.span(("question_events", name)), help=hint))
                continue
            earlier = merged.get(name)
            if isinstance(earlier, dict) and isinstance(value, dict):
                value = {**earlier, **value}
            merged[name] = value
    return merged


def _problem(name: str, value: Any, literals: Mapping[str, Any],
             env_vars: Mapping[str, EnvVar]) -> tuple[str, str, str | None] | None:
    """(code, message, help) when the field's value, or the var it names, is unusable."""
    expected = _TYPES[name][1]
    reference = VAR_REFERENCE.fullmatch(value) if isinstance(value, str) else None
    if reference is not None:
        var = reference.group(1)
        known = set(literals) | set(env_vars)
        if var not in known:
            return (UNDEFINED_VAR, f"undefined var 'vars.{var}'",
                    did_you_mean(var, known) or "declare it under vars:")
        value = literals[var] if var in literals else env_vars[var].default
        origin = f"vars.{var} is {value!r}"
    elif isinstance(value, str) and name != "tool_name":
        return (INVALID_VALUE, f"expected {expected} or \"{{vars.NAME}}\"; got {value!r}", None)
    else:
        origin = f"got {value!r}"
    try:
        checked = _ADAPTERS[name].validate_python(value, strict=name != "dialog_lines")
    except ValidationError:
        return (INVALID_VALUE, f"expected {expected}; {origin}", None)
    if isinstance(checked, int) and (isinstance(value, bool) or checked < 0):
        return (INVALID_VALUE, f"expected {expected}; {origin}", None)
    return None
