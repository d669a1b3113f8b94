"""Totals of replayed sessions: decisions per rule, model and tier share, tools, costs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from router.load.prices import Catalog, Tokens, usd
from router.replay.answers import SOURCES
from router.replay.runner import SessionRun, Turn


@dataclass
class Money:
    """A sum of costs that keeps the turns whose price is unknown apart (never counted as 0), and
    counts the priced turns by where their price came from (prices.PRICE_SOURCES)."""

    usd: float = 0.0
    known: int = 0
    unknown: int = 0
    sources: Counter[str] = field(default_factory=Counter)

    def add(self, value: float | None, source: str | None = "registry") -> None:
        if value is None:
            self.unknown += 1
        else:
            self.usd += value
            self.known += 1
            self.sources[source or "registry"] += 1

    def to_dict(self) -> dict[str, Any]:
        return {"usd": round(self.usd, 6) if self.known else None, "turns": self.known,
                "unknown_turns": self.unknown, "priced_by": dict(sorted(self.sources.items()))}

    def text(self) -> str:
        turns = f"{self.unknown} turn{'s' if self.unknown != 1 else ''}"
        if not self.known:
            return "unknown" + (f" ({turns} without a price)" if self.unknown else "")
        unknown = f" (+ {turns} at unknown prices)" if self.unknown else ""
        return usd(self.usd) + self.sources_text() + unknown

    def sources_text(self) -> str:
        """` [3 local (free), 2 registry]`: how the priced turns were priced, when any is local."""
        if set(self.sources) <= {"registry"}:
            return ""
        parts = [f"{n} {'local (free)' if source == 'local' else source}"
                 for source, n in sorted(self.sources.items())]
        return f" [{', '.join(parts)}]"


@dataclass
class Summary:
    """Counts over one or more sessions."""

    sessions: int = 0
    events: int = 0
    decisions: int = 0
    turns: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    shadow: Counter[str] = field(default_factory=Counter)
    recorded_rules: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    recorded_models: Counter[str] = field(default_factory=Counter)
    tiers: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)
    signals: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    compactions: int = 0
    cancelled_compactions: int = 0
    answers: int = 0
    blocked: int = 0
    estimated: Money = field(default_factory=Money)
    recorded: Money = field(default_factory=Money)
    baseline: Money = field(default_factory=Money)
    baseline_model: str | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions, "events": self.events, "decisions": self.decisions,
            "turns": self.turns, "rules": dict(self.rules.most_common()),
            "shadow_rules": dict(self.shadow.most_common()), "models": dict(self.models.most_common()),
            "recorded_models": dict(self.recorded_models.most_common()),
            "tiers": dict(self.tiers.most_common()), "tools": dict(self.tools.most_common()),
            "compactions": self.compactions, "cancelled_compactions": self.cancelled_compactions,
            "answers": self.answers, "blocked_tool_calls": self.blocked,
            "signals": {source: self.signals.get(source, 0) for source in SOURCES},
            "errors": dict(self.errors), "recorded_rules": dict(self.recorded_rules.most_common()),
            "cost": {"estimated": self.estimated.to_dict(), "recorded": self.recorded.to_dict(),
                     "baseline": {"model": self.baseline_model, **self.baseline.to_dict()}},
            "problems": self.problems,
        }


def summarize(runs: Iterable[SessionRun], catalog: Catalog, baseline: str | None) -> Summary:
    """The totals of `runs`; `baseline` is the model every turn is priced at for the all-cloud
    comparison (None: no baseline)."""
    total = Summary(baseline_model=baseline)
    for run in runs:
        add_run(total, run, catalog)
    return total


def add_run(total: Summary, run: SessionRun, catalog: Catalog) -> None:
    total.sessions += 1
    total.events += run.events
    total.decisions += run.decisions
    total.rules.update(run.rules)
    total.shadow.update(run.shadow)
    total.recorded_rules.update(run.recorded_rules)
    total.signals.update(run.signals)
    total.errors.update(run.errors)
    total.problems += [str(p) for p in run.problems]
    for turn in run.turns.values():
        _add_turn(total, turn, catalog)


def _add_turn(total: Summary, turn: Turn, catalog: Catalog) -> None:
    total.compactions += turn.compactions.count("compact")
    total.cancelled_compactions += turn.compactions.count("cancel")
    total.answers += len(turn.answers)
    total.blocked += len(turn.blocked)
    if not turn.answered:
        return
    total.turns += 1
    total.models[turn.model or "unknown"] += 1
    total.recorded_models[turn.recorded_model or "unknown"] += 1
    total.tiers[catalog.tier(turn.model)] += 1
    total.tools[",".join(turn.tools) or "(none)"] += 1
    total.estimated.add(turn.estimated_cost, turn.price_source)
    recorded = turn.recorded_cost
    if recorded is None and turn.recorded_model and catalog.is_local(turn.recorded_model):
        recorded = 0.0  # Pi records 0 for a model it has no price for: on a local one, that is the cost
    total.recorded.add(recorded, "registry" if turn.recorded_cost is not None else "local")
    if total.baseline_model is not None:
        total.baseline.add(catalog.cost(total.baseline_model, turn.tokens or Tokens()))
