"""What a decision chose, read from its effects: the model of the turn and the tier it records
(a field the policy declares, `provides.model_choice`).

Shared by the decision log (router/runtime/decision_log.py) and the replay's report, so a live
record and a replayed one say the same thing about the same decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from router.engine.decision import Effect


def chosen_model(event: Mapping[str, Any], effects: Iterable[Effect]) -> str | None:
    """The model of the turn: the one the decision switches or routes to, else the one that answered
    (`turn_end`'s `answered_by`: the physical model behind a virtual one), else the event's."""
    chosen = None
    for effect in effects:
        params = effect.params if isinstance(effect.params, Mapping) else {}
        if effect.action == "model" and params.get("ref"):
            chosen = str(params["ref"])
        elif effect.action == "route" and params.get("model"):
            chosen = str(params["model"])
    return chosen if chosen is not None else answering_model(event)


def answering_model(event: Mapping[str, Any]) -> str | None:
    """The model that made the event's turn: `turn_end`'s `answered_by` (the physical model behind
    a virtual one), else the event's model (what a turn is priced on)."""
    answered = event.get("answered_by")
    if isinstance(answered, str) and answered:
        return answered
    model = event.get("model")
    return str(model["ref"]) if isinstance(model, Mapping) and model.get("ref") else None


def chosen_tier(effects: Iterable[Effect], choice: Mapping[str, str]) -> str | None:
    """The tier the decision records: the text its last `set` writes to the state key the
    policy declares as the model choice's tier (`provides.model_choice: {tier: cu.tier}`);
    None when the policy declares none."""
    key = choice.get("tier")
    tier = None
    for effect in effects:
        if key and effect.action == "set" and isinstance(effect.params, Mapping):
            value = effect.params.get(key)
            if isinstance(value, str):
                tier = value
    return tier
