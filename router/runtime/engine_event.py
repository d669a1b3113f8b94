"""One event through the sidecar's `Engine` (router/runtime/server.py takes these methods from
`EventPath`): a reload first when a policy file changed, `/policy`, the event normalized, the
interpreter run with the signals it asks for, the executor's effects, the answer, and the record
of the decision after it is sent."""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from router.compile.cache import compiled_for
from router.compile.ir import CompiledPolicy
from router.compile.question_settings import policy_question_settings
from router.engine import rule_index
from router.engine.decision import Decision, SignalOutcome
from router.engine.interpreter import evaluate
from router.engine.vars_memo import VarsMemo
from router.events.normalize import model_catalog, normalize
from router.events.questions import DEFAULT_SETTINGS
from router.lang.budget import DEFAULT_BUDGET, EVENT_DEADLINE_MS, IO_MARGIN_MS, Budget, BudgetLimits
from router.runtime import policy_command, protocol
from router.runtime.executor import budget_ms
from router.runtime.loop_tasks import Cancelled

if TYPE_CHECKING:
    from router.runtime.connection import Connection
    from router.runtime.executor import Executor
    from router.runtime.observer import Observer
    from router.trust.store import TrustDecision

MAX_SIGNALS = 16
ABORTED = "aborted"  # the error of a signal whose event's run Pi aborted
DECIDED_WHEN_ABORTED = frozenset({"question"})  # event types decided even when their run is aborted
RELOAD_BUDGET_MS = 10000  # the bridge's wait for an event whose policy is being reloaded


class EventPath:
    """The event half of the `Engine` (its policy, trust and state half: router/runtime/server.py)."""

    if TYPE_CHECKING:
        connection: Connection
        policy: CompiledPolicy | None
        memo: VarsMemo | None
        trust: TrustDecision
        deadline_ms: int
        state: dict[str, Any]
        models: dict[str, Any]
        registry: dict[str, Any]
        env: dict[str, str]
        executor: Executor
        observer: Observer
        outcomes: dict[str, SignalOutcome]
        unrecorded: collections.deque[Callable[[], None]]

        def changed(self, event_type: str | None = None) -> bool: ...

        def reload(self) -> list[str]: ...

        def declarations(self) -> dict[str, Any]: ...

        def notices(self) -> list[str]: ...

        def store(self, state: dict[str, Any]) -> dict[str, Any] | None: ...

        def keep_trust_after_own_writes(self, decision: Decision) -> None: ...

    async def event(self, request_id: Any, params: dict[str, Any],
                    received: float | None = None) -> dict[str, Any]:
        """Decide one event within EVENT_DEADLINE_MS of `received` (when its line was read; now
        if not given). A reload, or the first compile of the event type's rules from the cache,
        is announced with a `progress` of RELOAD_BUDGET_MS first; the deadline starts after it."""
        received = time.perf_counter() if received is None else received
        self.after_answer()  # the earlier decisions are recorded before this one
        before = self.policy.event_types if self.policy else ()
        warnings: list[str] = []
        if self.changed(str(params.get("type"))):  # a reload may compile for seconds: the bridge waits
            self.connection.notify(protocol.PROGRESS, {"id": request_id, "budget_ms": RELOAD_BUDGET_MS})
            warnings = self.reload()
            received = time.perf_counter()
        policy = self.policy
        event_type = str(params.get("type"))
        payload = params.get("payload")
        if event_type == "command" and isinstance(payload, dict) and \
                payload.get("name") == policy_command.NAME:
            raw_ctx = params.get("ctx")
            session = str(raw_ctx.get("sessionId") or "") if isinstance(raw_ctx, dict) else ""
            return await policy_command.answer(self, request_id, str(payload.get("args") or ""), warnings,  # type: ignore[arg-type]
                                               session)
        if policy is None or event_type not in policy.by_event:
            unchanged = (policy.event_types if policy else ()) == before
            return {"actions": [], "warnings": warnings + self.notices(),
                    **({} if unchanged else {"declarations": self.declarations()})}
        if isinstance(params.get("models"), list):
            self.models = model_catalog(params["models"])
        if not compiled_for(policy, event_type):  # a policy from the cache: compiled per event type
            self.connection.notify(protocol.PROGRESS, {"id": request_id, "budget_ms": RELOAD_BUDGET_MS})
            prepare(policy, event_type)
            received = time.perf_counter()
        started_ns = time.perf_counter_ns()
        event = self._normalized(policy, event_type, params)
        state_before = self.state
        decision = await self._decide(request_id, policy, event, received)
        trusted = self.trust.state == "trusted"
        applied = self.executor.apply(decision)
        self.unrecorded.append(functools.partial(
            self.observe, policy, event, decision, state_before, dict(self.outcomes), started_ns,
            time.perf_counter_ns(), applied.refused))
        if trusted and event_type == "command":
            self.keep_trust_after_own_writes(decision)
        return self._answer(policy, decision, applied.actions, warnings + applied.warnings, before)

    def _normalized(self, policy: CompiledPolicy, event_type: str, params: dict[str, Any]) -> dict[str, Any]:
        """The event as rules see it (router/events/normalize.py); a payload the bridge cut is logged."""
        ctx = {**(params.get("ctx") or {}), "projectTrusted": self.trust.applies}  # the engine's decision
        event = normalize(event_type, params.get("payload") or {}, ctx,
                          env=self.env, models=self.models, registry=self.registry,
                          questions=policy_question_settings(policy, self.env) if event_type in
                          ("question", "dialog") else DEFAULT_SETTINGS, cut=bool(params.get("cut")))
        if params.get("cut"):
            self.executor.log(f"event {event_type}: payload cut to the protocol's limits "
                              f"({'; '.join(map(str, params['cut']))[:300]})")
        return event

    def _answer(self, policy: CompiledPolicy, decision: Decision, actions: list[Any], warnings: list[str],
                before: Any) -> dict[str, Any]:
        """The event's answer: the actions applied, the rules fired, the warnings, the state to
        store when it changed, and the declarations when the event types changed (`before`)."""
        result: dict[str, Any] = {"actions": actions, "fired": list(decision.fired),
                                  "warnings": [self.executor.redact(w) for w in warnings]}
        stored = self.store(decision.state)
        if stored is not None:
            result["state"] = stored
        for line in self.observer.error_lines(policy, decision):
            self.executor.log(line)
        result["warnings"] += self.notices()
        if (self.policy.event_types if self.policy else ()) != before:
            result["declarations"] = self.declarations()
        return result

    def after_answer(self) -> None:
        """Record the decisions answered since the last call (the connection calls this once an
        answer is sent, so the decision log and telemetry never delay one); a problem there is
        told with the next answer."""
        while self.unrecorded:
            self.unrecorded.popleft()()

    def observe(self, policy: CompiledPolicy, event: dict[str, Any], decision: Decision,
                state_before: dict[str, Any], outcomes: dict[str, SignalOutcome], started_ns: int,
                ended_ns: int, refused: frozenset[str]) -> None:
        """Log the decision and export its telemetry; a failure there never fails the event."""
        try:
            warnings = self.observer.observe(policy=policy, event=event, decision=decision,
                                             state_before=state_before, outcomes=outcomes,
                                             started_ns=started_ns, ended_ns=ended_ns,
                                             secrets=self.executor.secrets, refused=refused)
        except Exception as exc:  # a bug in recording must not take the decision with it
            text = f"decision log: internal error {type(exc).__name__}: {exc}"
            if text in self.observer.told:
                return
            self.observer.told.add(text)
            warnings = [text]
        for text in warnings:
            self.executor.log(text)
            self.executor.notices.append(text)

    async def _decide(self, request_id: Any, policy: CompiledPolicy, event: dict[str, Any],
                      received: float) -> Decision:
        """Evaluate, computing the signals the rules ask for one at a time. A question event whose
        run Pi aborts (the bridge's `cancel`) is still decided, every signal still to come failing
        "aborted": its rules' own effects (the decision pack's audit record) happen, and the bridge,
        which stopped waiting, drops the answer. Other events end at the cancel."""
        outcomes: dict[str, SignalOutcome] = {}
        self.outcomes = outcomes
        aborted = False
        # every evaluation of the event, while signals are computed
        budget = Budget(event_limits(received, self.deadline_ms))
        memo = self._vars_memo(policy)
        for _ in range(MAX_SIGNALS):
            decision = evaluate(policy, event, state=self.state, outcomes=outcomes, budget=budget,
                                vars_memo=memo)
            if decision.pending is None:
                return decision
            pending = decision.pending
            wait_ms = budget_ms(pending)
            self.connection.notify(protocol.PROGRESS, {
                "id": request_id, "budget_ms": wait_ms + 1000, "signal": pending.name})
            if aborted:
                outcomes[pending.name] = SignalOutcome(error=ABORTED)
                continue
            try:
                outcomes[pending.name] = await self.executor.compute(pending, wait_ms / 1000)
            except Cancelled:
                if event.get("type") not in DECIDED_WHEN_ABORTED:
                    raise
                aborted = True  # this signal and every later one fail: the decision is still taken
                outcomes[pending.name] = SignalOutcome(error=ABORTED)
        self.outcomes = {**outcomes, **{n: SignalOutcome(error="too many signals") for n in policy.signals}}
        return evaluate(policy, event, state=self.state, budget=budget, vars_memo=memo,
                        outcomes=self.outcomes)

    def _vars_memo(self, policy: CompiledPolicy) -> VarsMemo:
        """The resolved-vars memo of `policy` (a new one when the policy changed)."""
        if self.memo is None or self.memo.policy is not policy:
            self.memo = VarsMemo(policy)
        return self.memo


def event_limits(received: float, deadline_ms: int = EVENT_DEADLINE_MS) -> BudgetLimits:
    """The evaluation budget of an event whose line was read at `received` (perf_counter): the
    announced deadline less the I/O margin, less what has passed since (a line that waited behind
    another request has that much less); the per-rule limits as always (a longer deadline gives
    each rule a proportionally longer allowance)."""
    waited_ms = (time.perf_counter() - received) * 1000
    rule_ms = DEFAULT_BUDGET.rule_ms * deadline_ms // EVENT_DEADLINE_MS
    return BudgetLimits(time_ms=max(0, int(deadline_ms - IO_MARGIN_MS - waited_ms)), rule_ms=rule_ms)


def prepare(policy: CompiledPolicy, event_type: str) -> None:
    """Compile the event type's rules (a policy from the cache) and build their index."""
    policy.by_event.get(event_type, ())
    if rule_index.enabled:
        rule_index.index_for(policy, event_type)
