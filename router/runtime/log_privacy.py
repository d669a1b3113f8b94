"""What the engine's own records may keep of a conversation: nothing (docs/observability.md).

A decision record is built from an allow-list: ids, enums, numbers, model refs, digests. Any other
text of a decision (an action's rendered parameter, a signal value, an error message) is replaced
by a stub that holds only its length and a keyed digest, `<text:LEN:DIGEST>`, whatever function or
template made it: the text is not searched for the prompt (a redaction misses `upper(text)`), it is
left out unless it is known to be safe. A string is known to be safe when it is

- a literal of the policy (a rule's parameter, a var, a signal's request, a virtual model: the
  policy author's text, never the conversation's),
- a value an action's parameter allows (`notify.level: warning`, `input.action: continue`, …), or
- a name the event carries from Pi rather than from the conversation: a model ref of its catalog
  or its current model, a tool name.

The digest is an HMAC-SHA256 with a key private to the log's directory, so a short text (a 4-letter
password) cannot be found again by hashing guesses, while equal texts still have equal stubs.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from router.compile.ir import CompiledPolicy
from router.lang.expr.expression import Template
from router.lang.functions.models import THINKING_LEVELS

KEEP_FIELDS = ("prompt", "actions", "signals", "errors")  # what `decision_log: {keep_text: …}` names
THINKING = frozenset(THINKING_LEVELS)
# (action, parameter) -> the values kept as they are (tests/runtime/test_log_privacy.py checks these against
# the Literal types of the action registry, so a new enum parameter cannot be missed)
ENUMS: dict[tuple[str, str], frozenset[str]] = {
    ("notify", "level"): frozenset({"info", "warning", "error"}),
    ("input", "action"): frozenset({"continue", "transform", "handled"}),
    ("context_message", "role"): frozenset({"user", "custom"}),
    ("context_message", "position"): frozenset({"after_user", "end"}),
    ("follow_up", "deliver"): frozenset({"followUp", "steer", "nextTurn"}),
    ("trust", "trusted"): frozenset({"yes", "no", "undecided"}),
    ("thinking", "level"): THINKING,
    ("thinking", "ceiling"): THINKING,
    ("route", "thinking"): THINKING,
}


def literals_of(policy: CompiledPolicy) -> frozenset[str]:
    """Every string the policy itself spells out: constants of rule and signal parameters, vars,
    virtual models, commands, tools and the models it prices (worked out once per policy)."""
    found: set[str] = set()

    def walk(value: Any, depth: int = 0) -> None:
        if depth > 40:
            return
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, Template):
            if value.constant is not None:
                found.add(value.constant)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(key, depth + 1)
                walk(item, depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                walk(item, depth + 1)
        elif is_dataclass(value) and not isinstance(value, type):
            for spec in fields(value):
                if spec.name not in ("span", "when", "expr", "transform", "fallback", "bindings"):
                    walk(getattr(value, spec.name), depth + 1)

    for rule in policy.rules:
        found.add(rule.id)
        for action in rule.actions:
            walk(action.params)
    for signal in policy.signals.values():
        walk(signal.request)
        walk(signal.questions)
    for value in (policy.vars, policy.virtual_models, policy.commands, policy.tools):
        walk(value)
    for model in policy.virtual_models:
        if model.get("provider") and model.get("id"):
            found.add(f"{model['provider']}/{model['id']}")
    found.update(policy.prices)  # the models the policy prices, by ref
    return frozenset(found)


def event_names(event: Mapping[str, Any]) -> frozenset[str]:
    """The names an event carries from Pi, not from the conversation: its model refs and tools."""
    names: set[str] = set()
    model = event.get("model")
    if isinstance(model, Mapping) and isinstance(model.get("ref"), str):
        names.add(model["ref"])
    tools = event.get("tools")
    if isinstance(tools, Mapping):
        for listed in tools.values():
            if isinstance(listed, list):
                names.update(t for t in listed if isinstance(t, str))
    return frozenset(names)


@dataclass(frozen=True)
class Stubber:
    """Replaces the text of a decision that is not known to be safe by `<text:LEN:DIGEST>`."""

    key: bytes
    literals: frozenset[str]
    names: frozenset[str]
    models: Mapping[str, Any]

    def stub(self, text: str) -> str:
        digest = hmac.new(self.key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return f"<text:{len(text)}:{digest[:16]}>"

    def safe(self, text: str) -> bool:
        return text in self.literals or text in self.names or text in self.models

    def text(self, text: str) -> str:
        return text if self.safe(text) else self.stub(text)

    def value(self, value: Any, allowed: frozenset[str] = frozenset()) -> Any:
        """`value` with every string that is not safe (nor in `allowed`) stubbed, keys included."""
        if isinstance(value, str):
            return value if value in allowed else self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self.stub(str(value))

    def params(self, action: str, params: Any) -> Any:
        """An action's rendered parameters: enum values its parameter allows, the rest as `value`."""
        if not isinstance(params, Mapping):
            return self.value(params)
        return {self.text(str(k)): self.value(v, ENUMS.get((action, str(k)), frozenset()))
                for k, v in params.items()}

    def error(self, text: str) -> str:
        """`CODE message` with the message stubbed (it may quote a value: a regex, a number)."""
        code, _, message = text.partition(" ")
        if code.startswith("RT") and code[2:].isdigit():
            return f"{code} {self.text(message)}" if message else code
        return self.text(text)
