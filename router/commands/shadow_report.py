"""`router shadow-report`: how the rules marked `shadow: true` would have done, from the decision log.

It compares outcomes, not actions: the model a shadow rule would have led to against the model the
session actually ran the next turn on, the tools it would have set against the tools set, a block
against what was blocked. A shadow rule that chose the model the session already used agrees,
whichever rule put it there; a shadow rule whose actions change no outcome (a log, a notify, a
`set`) has nothing to compare. For a different model, the cost of the turn on the shadow's model
against its cost as run, both priced as `router replay` prices them (the record's tokens at the
catalog's prices; a local model free), with how each side was priced. One example per
disagreement: the session, the turn and the prompt when the log keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from router.commands.log import SessionIds
from router.load.prices import Catalog, usd
from router.replay.log_files import actions_of
from router.replay.report_data import TURN_EVENT, TurnRow, log_turns
from router.replay.report_html import cut_field
from router.replay.summary import Money

PROMPT_CHARS = 80
MAX_EXAMPLES = 5  # per rule
NO_PROMPT = "prompt not kept (the log holds digests only; `keep_text: [prompt]` keeps it)"
ASPECTS = ("model", "tools", "block")


@dataclass
class Example:
    """One disagreement: where, and what would have been against what was."""

    aspect: str
    would: str
    actual: str
    session: str
    turn: int | None
    prompt: str | None

    def to_dict(self, ids: SessionIds) -> dict[str, Any]:
        return {"aspect": self.aspect, "would": self.would, "actual": self.actual,
                "session": ids.short(self.session), "turn": self.turn, "prompt": self.prompt}


@dataclass
class ShadowStats:
    id: str
    evaluated: int = 0  # decisions that evaluated the rule
    would_fire: int = 0
    agreed: int = 0  # every outcome it decides is the one the session had
    disagreed: int = 0
    no_outcome: int = 0  # it would change no model, tools or block: nothing to compare
    actual_cost: Money = field(default_factory=Money)  # the turns it would have changed, as run
    shadow_cost: Money = field(default_factory=Money)  # the same turns on the shadow's model
    no_tokens: int = 0  # turns whose record has no tokens: not priced
    would_model: int = 0  # decisions where it would have chosen a model
    examples: list[Example] = field(default_factory=list)
    _priced: set[tuple[str, int]] = field(default_factory=set)

    @property
    def agreement(self) -> float | None:
        compared = self.agreed + self.disagreed
        return self.agreed / compared if compared else None

    @property
    def cost_delta(self) -> float | None:
        """Shadow minus actual, over the turns priced on both sides."""
        if not self.shadow_cost.known or self.shadow_cost.unknown or self.actual_cost.unknown:
            return None
        return self.shadow_cost.usd - self.actual_cost.usd

    def to_dict(self, ids: SessionIds) -> dict[str, Any]:
        return {"id": self.id, "evaluated": self.evaluated, "would_fire": self.would_fire,
                "agreed": self.agreed, "disagreed": self.disagreed, "no_outcome": self.no_outcome,
                "agreement": self.agreement,
                "cost": {"actual": self.actual_cost.to_dict(), "shadow": self.shadow_cost.to_dict(),
                         "delta_usd": None if self.cost_delta is None else round(self.cost_delta, 6),
                         "turns_without_tokens": self.no_tokens},
                "examples": [e.to_dict(ids) for e in self.examples]}


def outcome(actions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What actions change in the session: the model, the tool set, a block (only those named)."""
    found: dict[str, Any] = {}
    for action in actions:
        raw = action.get("params")
        params: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        name = action.get("action")
        if name == "model" and params.get("ref"):
            found["model"] = str(params["ref"])
        elif name == "route" and params.get("model"):
            found["model"] = str(params["model"])
        elif name == "tools":
            found["tools"] = json.dumps(dict(params), sort_keys=True, default=str)
        elif name == "block":
            found["block"] = "blocked"
    return found


def shadow_stats(records: Sequence[dict[str, Any]], catalog: Catalog | None = None) -> list[ShadowStats]:
    """Per shadow rule (ids in first-seen order)."""
    catalog = catalog or Catalog()
    stats: dict[str, ShadowStats] = {}
    nexts = _next_turns(records, catalog)
    prompts: dict[str, str] = {}
    for index, record in enumerate(records):
        session = str(record.get("session") or "")
        text = record.get("text")
        if isinstance(text, str) and text:
            prompts[session] = text
        elif record.get("event") == "input":
            prompts.pop(session, None)  # a new prompt the log did not keep
        for entry in record.get("shadow") or []:
            if isinstance(entry, dict) and entry.get("id"):
                item = stats.setdefault(str(entry["id"]), ShadowStats(str(entry["id"])))
                item.would_fire += 1
                _compare(item, entry, record, nexts.get(index), catalog, prompts.get(session))
    for record in records:  # evaluated: listed in `rules` (a shadow rule is never `fired` there)
        for rule in record.get("rules") or []:
            if isinstance(rule, dict) and rule.get("id") in stats:
                stats[str(rule["id"])].evaluated += 1
    return list(stats.values())


def _next_turns(records: Sequence[dict[str, Any]], catalog: Catalog) -> dict[int, TurnRow]:
    """Record index -> the turn of its session that came next (at or after it)."""
    turns = iter(log_turns(records, catalog, None))
    waiting: dict[str, list[int]] = {}
    found: dict[int, TurnRow] = {}
    for index, record in enumerate(records):
        session = str(record.get("session") or "")
        waiting.setdefault(session, []).append(index)
        if record.get("event") == TURN_EVENT:
            turn = next(turns)
            for earlier in waiting.pop(session):
                found[earlier] = turn
    return found


def _compare(item: ShadowStats, entry: Mapping[str, Any], record: Mapping[str, Any], turn: TurnRow | None,
             catalog: Catalog, prompt: str | None) -> None:
    would = outcome([a for a in entry.get("would") or [] if isinstance(a, Mapping)])
    if not would:
        item.no_outcome += 1
        return
    applied = outcome(actions_of(dict(record)))
    actual = {**applied, "model": turn.model if turn is not None else
              applied.get("model") or _str(record.get("model"))}
    differing = [aspect for aspect in ASPECTS if aspect in would and would[aspect] != actual.get(aspect)]
    if not differing:
        item.agreed += 1
    else:
        item.disagreed += 1
        for aspect in differing:
            _example(item, aspect, would[aspect], actual.get(aspect), record, turn, prompt)
    if "model" in would:
        item.would_model += 1
        if turn is not None:
            _price(item, would["model"], turn, catalog)


def _price(item: ShadowStats, model: str, turn: TurnRow, catalog: Catalog) -> None:
    """The turn once per rule: as run and on the shadow's model, from the turn's recorded tokens."""
    key = (turn.session, turn.number)
    if key in item._priced:
        return
    item._priced.add(key)
    tokens = turn.usage
    if tokens is None:
        item.no_tokens += 1
        return
    item.actual_cost.add(catalog.cost(turn.model, tokens), catalog.price_source(turn.model))
    item.shadow_cost.add(catalog.cost(model, tokens), catalog.price_source(model))


def _example(item: ShadowStats, aspect: str, would: str, actual: str | None, record: Mapping[str, Any],
             turn: TurnRow | None, prompt: str | None) -> None:
    if len(item.examples) >= MAX_EXAMPLES or any(e.aspect == aspect and e.would == would
                                                  and e.actual == (actual or "none") for e in item.examples):
        return
    item.examples.append(Example(aspect, would, actual or "none", str(record.get("session") or ""),
                                 turn.number if turn is not None else None,
                                 cut_field(prompt, PROMPT_CHARS) if prompt else None))


def _str(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def _ids(stats: list[ShadowStats]) -> SessionIds:
    ids = SessionIds()
    for s in stats:
        for example in s.examples:
            ids.add(example.session)
    return ids


def render_text(stats: list[ShadowStats], *, decisions: int) -> str:
    if not stats:
        return (f"no shadow rule fired in {decisions} decision(s) (mark a rule `shadow: true` to try it "
                "without applying it)")
    width = max(len(s.id) for s in stats)
    lines = [f"shadow rules, {decisions} decision(s); outcomes compared (model, tools, block):",
             f"  {'rule'.ljust(width)}  evaluated  would fire  agreed  disagreed  no outcome  agreement"]
    for s in stats:
        share = f"{s.agreement:.0%}" if s.agreement is not None else "-"
        lines.append(f"  {s.id.ljust(width)}  {s.evaluated:>9}  {s.would_fire:>10}  {s.agreed:>6}  "
                     f"{s.disagreed:>9}  {s.no_outcome:>10}  {share:>9}")
    ids = _ids(stats)
    for s in stats:
        lines += _details(s, ids)
    return "\n".join(lines)


def _details(s: ShadowStats, ids: SessionIds) -> list[str]:
    lines = []
    if s.actual_cost.known or s.shadow_cost.known or s.no_tokens:
        delta = s.cost_delta
        shown = "unknown" if delta is None else f"{'+' if delta >= 0 else '-'}{usd(abs(delta))}"
        missing = f"; {s.no_tokens} turn(s) without tokens in the log, not priced" if s.no_tokens else ""
        lines.append(f"{s.id}: cost of its turns {s.actual_cost.text()} as run, {s.shadow_cost.text()} on "
                     f"the shadow's model: delta {shown}{missing}")
    elif s.would_model:
        lines.append(f"{s.id}: cost n/a (no turn_end record follows its decisions)")
    for e in s.examples:
        where = f"session {ids.short(e.session)}" + (f" turn {e.turn}" if e.turn is not None else "")
        prompt = json.dumps(e.prompt, ensure_ascii=False) if e.prompt else NO_PROMPT
        lines.append(f"{s.id}: {e.aspect} {e.would} (would) vs {e.actual} (was), {where}: {prompt}")
    return lines


def render_json(stats: list[ShadowStats], *, decisions: int) -> str:
    ids = _ids(stats)
    return json.dumps({"decisions": decisions, "rules": [s.to_dict(ids) for s in stats]}, indent=2,
                      ensure_ascii=False)
