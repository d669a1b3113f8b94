"""`router shadow-report`: how the rules marked `shadow: true` would have done, from the decision log.

For each shadow rule: the decisions where it was evaluated, how often it would have fired, and
how often what it would have done agreed with what was applied (every action it would take was
applied with the same parameters).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class ShadowStats:
    id: str
    evaluated: int = 0  # decisions that evaluated the rule
    would_fire: int = 0
    agreed: int = 0
    disagreed: int = 0

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.would_fire if self.would_fire else None


def shadow_stats(records: Iterable[dict[str, Any]]) -> list[ShadowStats]:
    """Per shadow rule (ids in first-seen order)."""
    stats: dict[str, ShadowStats] = {}
    shadow_rules: set[str] = set()
    seen: list[dict[str, Any]] = []
    for record in records:
        seen.append(record)
        for entry in record.get("shadow") or []:
            if isinstance(entry, dict) and entry.get("id"):
                rule_id = str(entry["id"])
                shadow_rules.add(rule_id)
                item = stats.setdefault(rule_id, ShadowStats(rule_id))
                item.would_fire += 1
                if entry.get("agrees") is True:
                    item.agreed += 1
                else:
                    item.disagreed += 1
    for record in seen:  # evaluated: listed in `rules` (a shadow rule is never `fired` there)
        for rule in record.get("rules") or []:
            if isinstance(rule, dict) and rule.get("id") in shadow_rules:
                stats[str(rule["id"])].evaluated += 1
    return list(stats.values())


def render_text(stats: list[ShadowStats], *, decisions: int) -> str:
    if not stats:
        return (f"no shadow rule fired in {decisions} decision(s) (mark a rule `shadow: true` to try it "
                "without applying it)")
    width = max(len(s.id) for s in stats)
    lines = [f"shadow rules, {decisions} decision(s):",
             f"  {'rule'.ljust(width)}  evaluated  would fire  agreed  disagreed  agreement"]
    for s in stats:
        share = f"{s.agreement:.0%}" if s.agreement is not None else "-"
        lines.append(f"  {s.id.ljust(width)}  {s.evaluated:>9}  {s.would_fire:>10}  {s.agreed:>6}  "
                     f"{s.disagreed:>9}  {share:>9}")
    return "\n".join(lines)


def render_json(stats: list[ShadowStats], *, decisions: int) -> str:
    rules = [{**asdict(s), "agreement": s.agreement} for s in stats]
    return json.dumps({"decisions": decisions, "rules": rules}, indent=2)
