"""A replayed decision as the decision log writes one (docs/observability.md), for the report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.engine.choices import chosen_model, chosen_tier
from router.engine.decision import Decision
from router.replay.rebuild import Step


def replay_record(session: str, step: Step, seq: int, event: Mapping[str, Any], decision: Decision,
                  seconds: float, choice: Mapping[str, str], shadow: frozenset[str]) -> dict[str, Any]:
    """The replayed decision in the decision log's shape: a shadow rule is listed under `shadow`,
    never as fired."""
    return {"session": session, "event": step.type, "seq": seq, "turn": step.turn,
            "rules": [{"id": rule_id, "fired": rule_id not in shadow} for rule_id in decision.fired],
            "shadow": [{"id": rule_id, "would": [{"action": e.action, "params": e.params}
                                                 for e in decision.shadowed if e.rule_id == rule_id]}
                       for rule_id in decision.fired if rule_id in shadow],
            "actions": [{"action": e.action, "params": e.params, "rule": e.rule_id}
                        for e in decision.effects],
            "model": chosen_model(event, decision.effects), "tier": chosen_tier(decision.effects, choice),
            "latency_ms": round(seconds * 1000, 3)}
