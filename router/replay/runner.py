"""Run rebuilt sessions through a compiled policy, offline and deterministically.

The runner keeps what a live session keeps (the state, the model, the thinking level, the
active tools) and changes it as the replayed decisions say, so each event sees the world the
policy itself made. External signals take the value recorded in the decision log for the same
(session, event type, seq, signal), else fail as in a dry run, which makes the signal's own
`fallback` apply. An event without a record is decided once per distinct input: its decision is
remembered by everything its type's rules can read (router/engine/decision_memo.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from router.compile.ir import CompiledPolicy
from router.engine.decision import Decision, Effect, SignalOutcome
from router.engine.decision_memo import DecisionMemo
from router.engine.interpreter import evaluate
from router.engine.signal_memo import SignalMemo
from router.engine.vars_memo import VarsMemo
from router.events.normalize import normalize, registry_facts
from router.load.prices import Catalog, Tokens
from router.replay.answers import Answers, give
from router.replay.failed_compactions import with_failed_compactions
from router.replay.log_reader import DecisionLog, Record
from router.replay.rebuild import ANSWER, MODEL, THINKING, Step, declared_tools, rebuild
from router.replay.records import replay_record
from router.replay.session_file import Problem, SessionFile

MAX_SIGNALS = 16
MODEL_ACTIONS = frozenset({"model", "set_model"})


@dataclass
class Turn:
    """One assistant answer of a session, as recorded and as the replayed policy makes it."""

    session: str
    number: int  # 1-based within the session
    line: int = 0
    model: str | None = None  # the replay's model for this answer
    recorded_model: str | None = None
    tools: tuple[str, ...] = ()  # active tools when the request was made (the replay's)
    compactions: list[str] = field(default_factory=list)  # "compact" / "cancel" decisions
    answers: list[Any] = field(default_factory=list)  # answer values given to questions/dialogs
    blocked: list[str] = field(default_factory=list)  # tool calls the replay blocks
    fired: list[str] = field(default_factory=list)
    tokens: Tokens | None = None
    recorded_cost: float | None = None
    estimated_cost: float | None = None
    price_source: str | None = None  # where estimated_cost's price came from (prices.PRICE_SOURCES)
    answered: bool = False  # False for a turn with no assistant answer (an aborted prompt)

    def outcome(self) -> dict[str, Any]:
        """What `router diff` compares."""
        return {"model": self.model, "tools": list(self.tools), "compaction": list(self.compactions),
                "answers": list(self.answers), "blocked": list(self.blocked)}


@dataclass
class SessionRun:
    """The replay of one session."""

    id: str
    path: str
    turns: dict[int, Turn] = field(default_factory=dict)
    events: int = 0  # events rebuilt
    decisions: int = 0  # events the policy has rules for (evaluated)
    rules: Counter[str] = field(default_factory=Counter)
    shadow: Counter[str] = field(default_factory=Counter)
    signals: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # evaluation error codes
    recorded_rules: Counter[str] = field(default_factory=Counter)  # from the decision log
    problems: list[Problem] = field(default_factory=list)
    logged: bool = False  # the decision log has records of this session
    records: list[dict[str, Any]] = field(default_factory=list)  # one per decision, as the log writes them
    error: str | None = None  # why the session could not be replayed (its totals are empty)

    def turn(self, number: int) -> Turn:
        found = self.turns.get(number)
        if found is None:
            found = self.turns[number] = Turn(self.id, number)
        return found


@dataclass
class World:
    """What the live session would hold under the replayed policy."""

    model: str | None = None
    thinking: str | None = None
    active: list[str] = field(default_factory=list)
    all: list[str] = field(default_factory=list)
    tokens: int | None = None
    route_state: Any = None
    previous: str | None = None  # the physical model of the last answer
    state: dict[str, Any] = field(default_factory=dict)
    route_choice: str | None = None
    router_compaction: bool = False


class Replayer:
    """Replays sessions against one policy; one instance per policy."""

    def __init__(self, policy: CompiledPolicy, catalog: Catalog, log: DecisionLog | None = None, *,
                 memo: bool = True, decision_memo: bool | None = None) -> None:
        self.policy, self.catalog, self.log = policy, catalog, log or DecisionLog()
        catalog.declare(policy.prices)
        self.virtual = {f"{m.get('provider')}/{m.get('id')}": m for m in policy.virtual_models}
        for ref, model in self.virtual.items():
            catalog.raw.setdefault(ref, {"provider": model.get("provider"), "id": model.get("id"),
                                         "name": model.get("name") or ref, "api": "pi-virtual",
                                         "contextWindow": model.get("context_window"),
                                         "maxTokens": model.get("max_tokens")})
        self.models = catalog.normalized
        self.registry = registry_facts({"providers": sorted({r.partition("/")[0] for r in catalog.raw})})
        self.question_tools = frozenset(str(t.get("name")) for t in policy.tools if t.get("kind", "question")
                                        == "question")
        self.shadow_ids = frozenset(r.id for r in policy.rules if r.shadow)
        self.trusted = any(f.layer == "project" for f in policy.files)
        self.vars_memo = VarsMemo(policy)  # vars resolved once: every replayed event has the same env
        # expression signals computed once per distinct input (router/engine/signal_memo.py)
        self.signal_memo = SignalMemo(policy) if memo else None
        if self.signal_memo is not None:  # the catalog: in every event, never changed, frozen once
            self.signal_memo.constant(self.models)
        # whole decisions, by everything the event type's rules read (router/engine/decision_memo.py)
        self.decision_memo = DecisionMemo(policy, self.signal_memo) \
            if (memo if decision_memo is None else decision_memo) else None
        if self.decision_memo is not None:
            self.decision_memo.constant(self.models)

    def run(self, session: SessionFile) -> SessionRun:
        result = SessionRun(session.id, session.path, problems=list(session.problems),
                            logged=session.id in self.log.sessions())
        steps = rebuild(session, question_tools=self.question_tools)
        if result.logged:
            steps = with_failed_compactions(steps, session, self._records(session.id))
        _Session(self, session, result).play(steps)
        if result.logged:
            result.recorded_rules.update(r for rec in self._records(session.id) for r in rec.rules)
        return result

    def _records(self, session: str) -> Iterable[Record]:
        return self.log.of_session(session)


class _Session:
    """The replay of one session in progress."""

    def __init__(self, replayer: Replayer, session: SessionFile, result: SessionRun) -> None:
        self.r, self.session, self.result = replayer, session, result
        tools = declared_tools(session)
        self.world = World(active=list(tools), all=tools)
        self.seq: Counter[str] = Counter()
        self.router_models = self._router_models() if result.logged else None

    def play(self, steps: list[Step]) -> None:
        for step in steps:
            handler = _PSEUDO.get(step.type)
            if handler is not None:
                handler(self, step)
            elif step.type == "route":
                if self._is_virtual(self.world.model):
                    self._event(step)
            else:
                self._event(step)

    def _known(self, ref: str) -> bool:
        """Whether Pi could use `ref`: in the catalog (any model when the catalog is empty)."""
        raw = self.r.catalog.raw
        return not raw or ref in raw

    def _is_virtual(self, ref: str | None) -> bool:
        return _is_virtual_ref(self.r, ref)

    # --- pseudo steps -------------------------------------------------------------------------

    def _answer(self, step: Step) -> None:
        turn = self.result.turn(step.turn)
        world = self.world
        turn.answered, turn.line, turn.recorded_model = True, step.line, step.ref
        chosen = world.route_choice if self._is_virtual(world.model) else world.model
        turn.model = chosen if chosen is not None and self._known(chosen) else step.ref
        turn.tokens, turn.recorded_cost = step.tokens, step.recorded_cost
        turn.estimated_cost = self.r.catalog.cost(turn.model, step.tokens or Tokens())
        turn.price_source = self.r.catalog.price_source(turn.model)
        world.previous, world.route_choice = turn.model, None
        world.tokens = step.tokens.total if step.tokens else None

    def _model(self, step: Step) -> None:
        world = self.world
        if step.payload.get("initial"):
            world.model = step.ref
            return
        if self._router_caused(step):
            return
        self._select_model(step.ref, step, source="set")

    def _thinking(self, step: Step) -> None:
        level = str(step.payload.get("level"))
        if step.payload.get("initial"):
            self.world.thinking = level
            return
        if self.router_models is None and step.quick:
            return
        previous, self.world.thinking = self.world.thinking, level
        self._event(Step("thinking_level_select", {"level": level, "previousLevel": previous},
                         step.line, step.turn))

    def _router_caused(self, step: Step) -> bool:
        """Whether a recorded model change was a rule's doing: the decision log says so when it has
        the session, else a change written right before a prompt is taken as a rule's."""
        if self.router_models is not None:
            return step.ref in self.router_models
        return step.quick

    def _router_models(self) -> set[str]:
        refs = set()
        for record in self.r._records(self.session.id):
            for action in record.actions:
                params = action.get("params")
                if action.get("action") in MODEL_ACTIONS and isinstance(params, Mapping):
                    refs.add(str(params.get("ref") or params.get("model")))
        return refs

    def _select_model(self, ref: str | None, step: Step, *, source: str) -> None:
        world = self.world
        if ref == world.model or ref is None:
            return
        previous, world.model = world.model, ref
        payload = {"source": source, "previousModel": self.r.catalog.model(previous) if previous else None}
        self._event(Step("model_select", payload, step.line, step.turn), follow=False)

    # --- events -------------------------------------------------------------------------------

    def _event(self, step: Step, *, follow: bool = True) -> None:
        result, world = self.result, self.world
        result.events += 1
        seq = self.seq[step.type]
        self.seq[step.type] += 1
        turn = result.turn(step.turn)
        if step.type == "context":
            turn.tools = tuple(world.active)
        if step.type not in self.r.policy.by_event:
            return
        result.decisions += 1
        event = normalize(step.type, self._payload(step), self._ctx(), env={}, models=self.r.models,
                          registry=self.r.registry)
        started = time.perf_counter()
        decision = self._decide(event, self.r.log.get(self.session.id, step.type, seq))
        result.records.append(replay_record(result.id, step, seq, event, decision,
                                            time.perf_counter() - started, self.r.policy.model_choice,
                                            self.r.shadow_ids))
        world.state = decision.state
        for rule_id in decision.fired:
            (result.shadow if rule_id in self.r.shadow_ids else result.rules)[rule_id] += 1
            turn.fired.append(rule_id)
        for error in decision.errors:
            result.errors[error.code] += 1
        for effect in decision.effects:
            self._apply(effect, step, turn, follow=follow)

    def _payload(self, step: Step) -> dict[str, Any]:
        world = self.world
        if step.type == "route":
            virtual = self.r.catalog.model(world.model or "")
            previous = self.r.catalog.model(world.previous) if world.previous else None
            return {**step.payload, "virtual": {"provider": virtual.get("provider"), "id": virtual.get("id")},
                    "thinkingLevel": world.thinking, "state": world.route_state,
                    "previous": {"provider": previous.get("provider"), "id": previous.get("id"),
                                 "thinkingLevel": world.thinking} if previous else None}
        if step.type == "turn_end":
            turn = self.result.turns.get(step.turn)
            return {**step.payload, "answeredBy": turn.model if turn else None}
        if step.type in ("compaction_before", "compaction_done") and world.router_compaction:
            if step.type == "compaction_done":
                world.router_compaction = False
            return {**step.payload, "reason": "manual", "byRouter": True}
        return step.payload

    def _ctx(self) -> dict[str, Any]:
        world, catalog = self.world, self.r.catalog
        model = catalog.model(world.model) if world.model else None
        window = model.get("contextWindow") if model else None
        usage = None
        if world.tokens is not None:
            percent = world.tokens / window * 100 if isinstance(window, (int, float)) and window > 0 else None
            usage = {"tokens": world.tokens, "contextWindow": window, "percent": percent}
        return {"cwd": self.session.cwd, "mode": "tui", "hasUI": True, "sessionId": self.session.id,
                "sessionFile": self.session.path, "model": model, "thinkingLevel": world.thinking,
                "activeTools": list(world.active), "allTools": list(world.all), "usage": usage,
                "projectTrusted": self.r.trusted}

    def _decide(self, event: dict[str, Any], record: Record | None) -> Decision:
        """`_answered`'s decision; an event without a record (its external signals then always get
        the same answers: their fallbacks apply) from the decision memo when it holds it."""
        memo = self.r.decision_memo
        if memo is not None and record is None:
            decision, sources = memo.decide(event, self.world.state, lambda: self._answered(event, None))
        else:
            decision, sources = self._answered(event, record)
        self.result.signals.update(sources or ())
        return decision

    def _answered(self, event: dict[str, Any],
                  record: Record | None) -> tuple[Decision, tuple[str, ...] | None]:
        """`_decide_stepwise`'s decision, each external signal answered where it is read
        (router/replay/answers.py); one recorded with its value still asked for, as a value. With it
        the sources of the signals read, in order (None: decided stepwise)."""
        answers = Answers(self.r.policy, record)
        values: dict[str, Any] = {}
        sources: list[str] = []
        policy, state = self.r.policy, self.world.state
        for _ in range(MAX_SIGNALS):
            decision = evaluate(policy, event, state=state, outcomes=answers, signal_values=values,
                                vars_memo=self.r.vars_memo, signal_memo=self.r.signal_memo)
            sources += answers.take()
            if decision.pending is None:
                if len(sources) >= MAX_SIGNALS:
                    break
                return decision, tuple(sources)
            sources.append(give(record, decision.pending.name, values, answers.given))
        return self._decide_stepwise(event, record), None

    def _decide_stepwise(self, event: dict[str, Any], record: Record | None) -> Decision:
        """The decision of `event`, evaluated again after each external signal it asks for."""
        outcomes: dict[str, SignalOutcome] = {}
        values: dict[str, Any] = {}
        policy, state = self.r.policy, self.world.state
        for _ in range(MAX_SIGNALS):
            decision = evaluate(policy, event, state=state, outcomes=outcomes, signal_values=values,
                                vars_memo=self.r.vars_memo, signal_memo=self.r.signal_memo)
            if decision.pending is None:
                return decision
            self.result.signals[give(record, decision.pending.name, values, outcomes)] += 1
        exhausted = {n: SignalOutcome(error="too many signals") for n in policy.signals}
        return evaluate(policy, event, state=state, signal_values=values, vars_memo=self.r.vars_memo,
                        signal_memo=self.r.signal_memo, outcomes={**outcomes, **exhausted})

    def _apply(self, effect: Effect, step: Step, turn: Turn, *, follow: bool) -> None:
        world, params = self.world, effect.params
        action = effect.action
        if action == "tools" and isinstance(params, Mapping):
            world.active = _tools(world.active, world.all, params)
        elif action == "model" and isinstance(params, Mapping):
            if not self._known(str(params.get("ref"))):  # Pi keeps its model ("not available")
                self.result.errors["model not available"] += 1
            elif follow:
                self._select_model(str(params.get("ref")), step, source="set")
            else:
                world.model = str(params.get("ref"))
        elif action == "thinking" and isinstance(params, Mapping) and params.get("level"):
            world.thinking = str(params["level"])
        elif action == "route" and isinstance(params, Mapping) and step.type == "route":
            world.route_choice = str(params.get("model")) if params.get("model") else None
            world.route_state = params.get("state", world.route_state)
        elif action == "compact":
            turn.compactions.append("compact")
            world.router_compaction = True
        elif action == "cancel" and step.type == "compaction_before":
            turn.compactions.append("cancel")
        elif action == "answer" and isinstance(params, Mapping):
            value = params.get("value")
            turn.answers.append(value if value is not None else params.get("text"))
        elif action == "block" and step.type == "tool_call":
            turn.blocked.append(str(step.payload.get("toolName")))


def _tools(active: list[str], known: list[str], params: Mapping[str, Any]) -> list[str]:
    """The active tools after a `tools` action, as the bridge computes them."""
    def names(value: Any) -> list[str]:
        return [str(v) for v in (value if isinstance(value, list) else [value])]

    if params.get("only") is not None:
        return [n for n in names(params["only"]) if n in known]
    if params.get("add") is not None:
        return [*active, *(n for n in names(params["add"]) if n in known and n not in active)]
    removed = set(names(params.get("remove")))
    return [n for n in active if n not in removed]


def _is_virtual_ref(replayer: Replayer, ref: str | None) -> bool:
    if ref is None:
        return False
    return ref in replayer.virtual or replayer.catalog.raw.get(ref, {}).get("api") == "pi-virtual"


_PSEUDO: dict[str, Callable[[_Session, Step], None]] = {
    ANSWER: _Session._answer, MODEL: _Session._model, THINKING: _Session._thinking,
}
