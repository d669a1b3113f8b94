"""A policy's `provides.questions:` resolved for one event (no pydantic: the sidecar's path)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from router.compile.ir import CompiledPolicy
from router.diagnostics.errors import ExpressionError
from router.events.questions import QuestionSettings, question_settings
from router.lang.expr.evaluator import Evaluator
from router.lang.expr.expression import Template, compile_template
from router.lang.expr.syntax import ExpressionSyntaxError


@lru_cache(maxsize=256)
def _template(source: str) -> Template:
    return compile_template(source)


def render_question_template(template: Template, variables: Mapping[str, Any]) -> Any:
    """The value of one declared template, its only name `vars`."""
    return Evaluator({"vars": dict(variables)}).render(template)


def resolve_question_events(declared: Mapping[str, Any], variables: Mapping[str, Any]) -> dict[str, Any]:
    """The declared values with every text rendered as a template over `vars` now (a template
    that fails leaves the field out: the engine's default holds)."""
    resolved = {}
    for name, value in declared.items():
        if isinstance(value, str):
            try:
                value = render_question_template(_template(value), variables)
            except (ExpressionError, ExpressionSyntaxError):
                continue
        resolved[name] = value
    return resolved


def policy_question_settings(policy: CompiledPolicy, env: Mapping[str, str]) -> QuestionSettings:
    """How `policy` builds question and dialog events, its vars resolved from `env`."""
    if not policy.question_events:
        return question_settings({})
    return question_settings(resolve_question_events(policy.question_events, policy.vars_for(env)))
