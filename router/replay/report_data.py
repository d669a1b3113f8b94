"""The figures of a report, from either source: decision-log records (`router report --html`) or
replayed sessions (`router replay --html`, `router diff --html`). report_html.py draws them.

Everything a report counts per turn is a `TurnRow`: one assistant answer (a `turn_end` record,
or an answered turn of a replay), never a decision (a `context` event is not a turn). A turn's
model is the model that answered it (a virtual model's answer goes to the model its last `route`
chose), its tier the tier the policy recorded for that model (`provides.model_choice.tier`),
else the catalog's (`cloud` when priced, `local` when served locally), else `unknown`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePath
from typing import Any

from router.load.prices import Catalog, Tokens
from router.replay.log_files import actions_of, record_time
from router.replay.runner import SessionRun
from router.replay.session_file import SessionFile

TURN_EVENT = "turn_end"
REPLAY_SIGNALS = {"fallback": ("signal fallback", "not recorded in the decision log"),
                  "recorded_failure": ("signal fallback", "failed when recorded")}


@dataclass(frozen=True)
class TurnRow:
    """One answered turn, as a report counts it."""

    session: str
    number: int  # 1-based within its session
    project: str | None
    time: datetime | None
    model: str
    tier: str
    tokens: int | None  # None: the source does not say
    cost: float | None  # None: no price (never counted as 0)
    source: str | None  # where the cost comes from: registry, local, recorded
    baseline: float | None  # the same tokens on the baseline model
    prompt: str | None = None  # only when the record keeps it (keep_text: [prompt])
    usage: Tokens | None = None  # the tokens by kind, what another model's price applies to


@dataclass(frozen=True)
class Blocked:
    """A tool call a rule blocked."""

    session: str
    where: str  # a time, or `turn N`
    tool: str | None
    rule: str | None
    reason: str | None


@dataclass
class Figures:
    """What one report shows."""

    title: str
    origin: str  # "decision log" or "replay"
    records: list[dict[str, Any]]
    turns: list[TurnRow]
    baseline_model: str | None = None
    policy: list[tuple[str, str]] = field(default_factory=list)  # (what, value): digest, git commits
    blocked: list[Blocked] = field(default_factory=list)
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, what) -> count
    changes: list[dict[str, Any]] | None = None  # router diff: one row per changed turn
    notes: list[str] = field(default_factory=list)


# --- helpers both sources share --------------------------------------------------------------


def project_name(value: Any) -> str | None:
    """A record's `project` (a name, or `{name, digest}`), or a session's working directory."""
    if isinstance(value, Mapping):
        value = value.get("name") or value.get("root")
    if isinstance(value, str) and value:
        return PurePath(value).name or value
    return None


def learned_tiers(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Model -> the tier the policy last recorded for a decision that chose that model."""
    tiers: dict[str, str] = {}
    for record in records:
        model, tier = record.get("model"), record.get("tier")
        if isinstance(model, str) and model and isinstance(tier, str) and tier:
            tiers[model] = tier
    return tiers


def tier_of(model: str | None, tiers: Mapping[str, str], catalog: Catalog) -> str:
    if model and model in tiers:
        return tiers[model]
    return catalog.tier(model) if catalog.raw or (model and catalog.is_local(model)) else "unknown"


def _tokens(value: Any) -> Tokens | None:
    return Tokens.of({"input": value.get("input"), "output": value.get("output"),
                      "cacheRead": value.get("cache_read"), "cacheWrite": value.get("cache_write")}) \
        if isinstance(value, Mapping) else None


def _failures(records: Iterable[Mapping[str, Any]], into: Counter[tuple[str, str]]) -> None:
    """Signals that fell back or failed, evaluation errors and refused rules, from the records."""
    for record in records:
        signals = record.get("signals")
        for name, entry in (signals.items() if isinstance(signals, Mapping) else ()):
            source = entry.get("source") if isinstance(entry, Mapping) else None
            if source in ("fallback", "error"):
                into[(f"signal {source}", str(name))] += 1
        for error in record.get("errors") or []:
            into[("evaluation error", str(error).split(" ", 1)[0])] += 1
        for rule in record.get("refused") or []:
            into[("refused by the executor", str(rule))] += 1


# --- the decision log -------------------------------------------------------------------------


def from_log(records: Sequence[dict[str, Any]], catalog: Catalog, baseline: str | None,
             title: str) -> Figures:
    """The figures of decision-log records: turns are the `turn_end` records."""
    figures = Figures(title, "decision log", list(records), log_turns(records, catalog, baseline),
                      baseline_model=baseline)
    figures.blocked = [Blocked(str(r.get("session") or ""), str(r.get("time") or ""),
                               _str(r.get("tool")), _str(a.get("rule")), _reason(a))
                       for r in records if r.get("event") == "tool_call"
                       for a in actions_of(r) if a.get("action") == "block"]
    _failures(records, figures.failures)
    return figures


def log_turns(records: Iterable[Mapping[str, Any]], catalog: Catalog, baseline: str | None) -> list[TurnRow]:
    """One row per `turn_end` record, in order; a turn on a virtual model is the last routed model's."""
    items = list(records)
    tiers = learned_tiers(items)
    routed: dict[str, tuple[str, str | None]] = {}  # session -> (model, tier) of its last route
    numbers: Counter[str] = Counter()
    prompts: dict[str, str] = {}
    rows = []
    for record in items:
        session = str(record.get("session") or "")
        event, model = record.get("event"), record.get("model")
        if isinstance(record.get("text"), str):
            prompts[session] = str(record["text"])
        if event == "route" and isinstance(model, str) and model:
            routed[session] = (model, _str(record.get("tier")))
            continue
        if event != TURN_EVENT:
            continue
        route = routed.pop(session, None)
        answered = _str(record.get("answered_by")) or (route[0] if route else None) or _str(model)
        numbers[session] += 1
        rows.append(_log_row(record, session, numbers[session], answered or "unknown",
                             (route[1] if route and route[0] == answered else None)
                             or tier_of(answered, tiers, catalog), catalog, baseline, prompts.get(session)))
    return rows


def _log_row(record: Mapping[str, Any], session: str, number: int, model: str, tier: str, catalog: Catalog,
             baseline: str | None, prompt: str | None) -> TurnRow:
    tokens = _tokens(record.get("tokens"))
    cost = record.get("cost")
    recorded = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
    if recorded is not None and not math.isfinite(recorded):  # `NaN`/`Infinity` in a log line
        recorded = None
    given = record.get("price_source")
    local = catalog.is_local(model)
    if recorded is None and local and given is None:  # a record of before the source was recorded
        recorded = 0.0
    source = None if recorded is None else str(given) if isinstance(given, str) and given else (
        "local" if local and not recorded else "recorded")
    return TurnRow(session, number, project_name(record.get("project")), record_time(dict(record)), model,
                   tier, tokens.total if tokens else None, recorded, source,
                   catalog.cost(baseline, tokens) if baseline and tokens else None, prompt, tokens)


# --- replays ----------------------------------------------------------------------------------


def from_runs(runs: Sequence[SessionRun], sessions: Sequence[SessionFile], catalog: Catalog,
              baseline: str | None, title: str) -> Figures:
    """The figures of replayed sessions: the turns as the replayed policy makes them."""
    files = {s.id: s for s in sessions}
    records = [record for run in runs for record in run.records]
    figures = Figures(title, "replay", records, [], baseline_model=baseline)
    tiers = learned_tiers(records)
    for run in runs:
        session = files.get(run.id)
        times = _entry_times(session)
        stamped = next((r["project"] for r in run.records if isinstance(r.get("project"), Mapping)), None)
        project = project_name(stamped if stamped is not None else session.cwd if session else None)
        for turn in sorted(run.turns.values(), key=lambda t: t.number):
            for tool in turn.blocked:
                figures.blocked.append(Blocked(run.id, f"turn {turn.number}", tool, None, None))
            if not turn.answered:
                continue
            tokens = turn.tokens or Tokens()
            figures.turns.append(TurnRow(
                run.id, turn.number, project, times.get(turn.line), turn.model or "unknown",
                tier_of(turn.model, tiers, catalog), turn.tokens.total if turn.tokens else None,
                turn.estimated_cost, turn.price_source,
                catalog.cost(baseline, tokens) if baseline else None, usage=turn.tokens))
        for source, count in run.signals.items():
            if source in REPLAY_SIGNALS:
                figures.failures[REPLAY_SIGNALS[source]] += count
        for code, count in run.errors.items():
            figures.failures[("evaluation error", code)] += count
    _blocked_rules(records, figures)
    return figures


def _blocked_rules(records: Sequence[Mapping[str, Any]], figures: Figures) -> None:
    """Name the rule and reason of each replayed block, in order, from the replay's records."""
    blocks = [(a.get("rule"), _reason(a)) for r in records if r.get("event") == "tool_call"
              for a in actions_of(dict(r)) if a.get("action") == "block"]
    for index, (rule, reason) in enumerate(blocks[:len(figures.blocked)]):
        row = figures.blocked[index]
        figures.blocked[index] = Blocked(row.session, row.where, row.tool, _str(rule), reason)


def _entry_times(session: SessionFile | None) -> dict[int, datetime]:
    """Line -> the entry's timestamp, for the lines of a session file that carry one."""
    found: dict[int, datetime] = {}
    for entry in session.entries if session else ():
        moment = record_time({"time": entry.data.get("timestamp")})
        if moment is not None:
            found[entry.line] = moment
    return found


def _str(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def _reason(action: Mapping[str, Any]) -> str | None:
    params = action.get("params")
    return _str(params.get("reason")) if isinstance(params, Mapping) else None
