"""Two replays of the same sessions compared turn by turn (`router diff`)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from router.compile.policy_changes import PolicyChanges, render_lines
from router.compile.policy_changes import render_markdown as policy_markdown
from router.load.prices import usd
from router.replay.runner import SessionRun, Turn
from router.replay.summary import Money

ASPECTS = ("model", "tools", "compaction", "answers", "blocked")


@dataclass(frozen=True)
class Change:
    """One turn whose outcome differs: aspect -> (old, new)."""

    session: str
    path: str
    turn: int
    line: int
    changes: dict[str, tuple[Any, Any]]
    cost_delta: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session, "path": self.path, "turn": self.turn, "line": self.line,
                "changes": {k: {"old": old, "new": new} for k, (old, new) in self.changes.items()},
                "cost_delta": self.cost_delta}


@dataclass
class Comparison:
    old: str
    new: str
    sessions: int = 0
    turns: int = 0
    changes: list[Change] = field(default_factory=list)
    old_cost: Money = field(default_factory=Money)
    new_cost: Money = field(default_factory=Money)
    rules: dict[str, tuple[int, int]] = field(default_factory=dict)  # rule -> (old, new) when different
    delta_usd: float = 0.0  # over the turns priced on both sides
    priced_both: int = 0
    unpriced: int = 0  # turns with an unknown price on either side
    policy: PolicyChanges | None = None  # what the two policies' files differ in, when compared

    @property
    def changed(self) -> bool:
        return bool(self.changes) or bool(self.rules)

    @property
    def delta(self) -> float | None:
        return self.delta_usd if self.priced_both else None


def compare(old_label: str, new_label: str, old: list[SessionRun], new: list[SessionRun]) -> Comparison:
    """Pair the runs by session and compare every answered turn."""
    result = Comparison(old_label, new_label)
    old_rules: Counter[str] = Counter()
    new_rules: Counter[str] = Counter()
    for before, after in zip(old, new, strict=True):
        result.sessions += 1
        old_rules.update(before.rules)
        new_rules.update(after.rules)
        for number in sorted(set(before.turns) | set(after.turns)):
            a = before.turns.get(number) or Turn(before.id, number)
            b = after.turns.get(number) or Turn(after.id, number)
            if a.answered or b.answered:
                result.turns += 1
                result.old_cost.add(a.estimated_cost, a.price_source)
                result.new_cost.add(b.estimated_cost, b.price_source)
                if a.estimated_cost is not None and b.estimated_cost is not None:
                    result.delta_usd += b.estimated_cost - a.estimated_cost
                    result.priced_both += 1
                else:
                    result.unpriced += 1
            change = _change(before, a, b)
            if change is not None:
                result.changes.append(change)
    result.rules = {rule: (old_rules[rule], new_rules[rule])
                    for rule in sorted(set(old_rules) | set(new_rules))
                    if old_rules[rule] != new_rules[rule]}
    return result


def _change(run: SessionRun, a: Turn, b: Turn) -> Change | None:
    old, new = a.outcome(), b.outcome()
    changes = {k: (old[k], new[k]) for k in ASPECTS if old[k] != new[k]}
    if not changes:
        return None
    delta = (b.estimated_cost - a.estimated_cost
             if a.estimated_cost is not None and b.estimated_cost is not None else None)
    return Change(run.id, run.path, a.number, a.line or b.line, changes, delta)


# --- rendering --------------------------------------------------------------------------------

def render_text(result: Comparison) -> str:
    lines = [f"old: {result.old}", f"new: {result.new}"]
    if result.policy is not None:
        lines += [f"policy: {result.policy.counts()}", *render_lines(result.policy)]
    lines += [f"{result.sessions} sessions, {result.turns} turns, {len(result.changes)} changed", ""]
    for change in result.changes:
        lines.append(f"session {change.session} turn {change.turn} ({change.path}:{change.line}):")
        for aspect, (old, new) in change.changes.items():
            lines.append(f"  {aspect}: {_show(aspect, old)} -> {_show(aspect, new)}")
        if change.cost_delta is not None:
            lines.append(f"  cost: {_signed(change.cost_delta)}")
    if result.rules:
        lines.append("rules fired (old -> new): "
                     + ", ".join(f"{r} {a} -> {b}" for r, (a, b) in result.rules.items()))
    lines.append(_cost_line(result))
    if not result.changed:
        lines.append("no turn changes")
    return "\n".join(lines)


def render_markdown(result: Comparison) -> str:
    """A pull-request comment: the summary line, the rules, vars and settings that changed, the
    turns that change (per session, with its cost delta), the rules that fire differently."""
    policy = f" {result.policy.counts()}." if result.policy is not None else ""
    delta = "" if result.delta is None else f" Cost delta {_signed(result.delta)}."
    lines = [f"### Policy diff: `{result.old}` → `{result.new}`", "",
             f"{result.sessions} sessions, {result.turns} turns replayed, "
             f"**{len(result.changes)} changed**.{policy}{delta}", ""]
    if result.policy is not None:
        lines += policy_markdown(result.policy)
    if result.changes:
        lines += ["| session | turn | what | old | new | cost Δ |", "|---|---|---|---|---|---|"]
        for change in result.changes:
            for index, (aspect, (old, new)) in enumerate(change.changes.items()):
                cost = _signed(change.cost_delta) if index == 0 and change.cost_delta is not None else ""
                lines.append(f"| `{change.session[:13]}` | {change.turn} | {aspect} | {_cell(aspect, old)} | "
                             f"{_cell(aspect, new)} | {cost} |")
        lines.append("")
        lines += ["| session | turns changed | cost Δ |", "|---|---|---|"]
        lines += [f"| `{session[:13]}` | {count} | {cost} |" for session, count, cost in _per_session(result)]
        lines.append("")
    if result.rules:
        lines += ["| rule | fired (old) | fired (new) |", "|---|---|---|",
                  *(f"| `{r}` | {a} | {b} |" for r, (a, b) in result.rules.items()), ""]
    lines.append(_cost_line(result).replace("cost:", "**Cost:**", 1))
    return "\n".join(lines)


def _per_session(result: Comparison) -> list[tuple[str, int, str]]:
    """(session, turns changed, the cost delta of those turns) in the order the changes come."""
    counts: dict[str, list[Any]] = {}
    for change in result.changes:
        entry = counts.setdefault(change.session, [0, 0.0, False])
        entry[0] += 1
        if change.cost_delta is not None:
            entry[1] += change.cost_delta
            entry[2] = True
    return [(s, n, _signed(d) if priced else "unknown") for s, (n, d, priced) in counts.items()]


def render_json(result: Comparison) -> str:
    body = {"old": result.old, "new": result.new, "sessions": result.sessions, "turns": result.turns,
            "changed": len(result.changes), "changes": [c.to_dict() for c in result.changes],
            "rules": {r: {"old": a, "new": b} for r, (a, b) in result.rules.items()},
            "cost": {"old": result.old_cost.to_dict(), "new": result.new_cost.to_dict(),
                     "delta_usd": None if result.delta is None else round(result.delta, 6),
                     "delta_turns": result.priced_both, "unpriced_turns": result.unpriced}}
    if result.policy is not None:
        body["policy"] = policy_json(result.policy)
    return json.dumps(body, indent=2, ensure_ascii=False, default=str)


def policy_json(changes: PolicyChanges) -> dict[str, Any]:
    """The rules, vars and settings that changed, as JSON."""
    rules = {"added": changes.added, "removed": changes.removed, "changed": changes.changed}
    body: dict[str, Any] = {kind: [{"id": r, "where": w} for r, w in found] for kind, found in rules.items()}
    body["vars"] = [{"name": v.name, "old": v.old, "new": v.new, "read_by": list(v.readers)}
                    for v in changes.vars]
    body["settings"] = [{"name": s.name, "old": s.old, "new": s.new} for s in changes.settings]
    return body


def _cost_line(result: Comparison) -> str:
    delta = "unknown" if result.delta is None else f"{_signed(result.delta)} over {result.priced_both} turns"
    unpriced = f" ({result.unpriced} turns without a price on one side)" if result.unpriced else ""
    return f"cost: old {result.old_cost.text()}, new {result.new_cost.text()}, delta {delta}{unpriced}"


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}{usd(abs(value))}"


def _show(aspect: str, value: Any) -> str:
    if aspect == "tools":
        return ",".join(value) or "(none)"
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False, default=str) if value else "(none)"
    return str(value) if value is not None else "(none)"


def _cell(aspect: str, value: Any) -> str:
    return _show(aspect, value).replace("|", "\\|")
