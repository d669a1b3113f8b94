"""A policy's `question_events:` resolved for one event (no pydantic: the sidecar's path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.compile.ir import CompiledPolicy
from router.events.questions import VAR_REFERENCE, QuestionSettings, question_settings


def resolve_question_events(declared: Mapping[str, Any], variables: Mapping[str, Any]) -> dict[str, Any]:
    """The declared values with every `{vars.NAME}` replaced by that var's value now."""
    resolved = {}
    for name, value in declared.items():
        reference = VAR_REFERENCE.fullmatch(value) if isinstance(value, str) else None
        resolved[name] = variables.get(reference.group(1)) if reference is not None else value
    return resolved


def policy_question_settings(policy: CompiledPolicy, env: Mapping[str, str]) -> QuestionSettings:
    """How `policy` builds question and dialog events, its vars resolved from `env`."""
    if not policy.question_events:
        return question_settings({})
    return question_settings(resolve_question_events(policy.question_events, policy.vars_for(env)))
