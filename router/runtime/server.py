"""`router serve`: the sidecar. JSON lines over stdio with requests both ways (docs/protocol.md).

The bridge spawns it in `session_start`, sends `hello` (which loads the layered policy), then
`event` requests; the sidecar may ask the bridge for classifier or completion calls while it
decides. Policy files are checked on every event and reloaded when they change; a broken edit
keeps the last good policy and says so.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from router.compile.cache import compiled_for
from router.compile.capability_analysis import refusal_warnings
from router.compile.ir import CompiledPolicy
from router.compile.question_settings import policy_question_settings
from router.diagnostics.code_names import RELOAD_FAILED
from router.diagnostics.diagnostic import Diagnostic, has_errors
from router.engine import rule_index
from router.engine.decision import Decision, SignalOutcome
from router.engine.interpreter import evaluate
from router.engine.vars_memo import VarsMemo
from router.events.normalize import model_catalog, normalize, registry_facts
from router.events.questions import DEFAULT_SETTINGS
from router.lang.budget import (
    DEFAULT_BUDGET,
    EVENT_DEADLINE_MS,
    IO_MARGIN_MS,
    Budget,
    BudgetLimits,
    event_deadline_ms,
)
from router.load.deadline import time_limit
from router.load.paths import project_policy_above
from router.runtime import declarations_cache, lean, loop, policy_command, protocol
from router.runtime.connection import Connection
from router.runtime.executor import Executor, budget_ms
from router.runtime.loop_tasks import Cancelled
from router.runtime.observer import Observer
from router.runtime.serve_args import ServeArgs, parse_args
from router.runtime.session_policy import (
    load_session_policy,
)
from router.runtime.session_state import canonical_json, without_keys
from router.runtime.session_trust import approved_digest, trust_after_own_writes
from router.runtime.stdio_lines import read_lines
from router.trust.store import (
    TrustDecision,
    TrustStore,
    decide,
)

MAX_SIGNALS = 16
RELOAD_BUDGET_MS = 10000  # the bridge's wait for an event whose policy is being reloaded
RELOAD_PARSE_S = 3.0  # a reload mid-session parses for at most this long; past it the policy in force stays
RECHECK_MS = 5  # `router serve`: a burst event looks at the policy files at most this often (~12 µs a look)
BURST_EVENTS = frozenset({"tool_call", "tool_result"})  # one per tool call of an assistant message


class Engine:
    """One session's policy, state and executor."""

    def __init__(self, connection: Connection, *, cwd: Path, agent: Path, extra: list[Path]) -> None:
        self.connection = connection
        self.cwd, self.agent, self.extra = cwd, agent, extra
        self.trust: TrustDecision = decide(None, cwd, {})
        self.approved: str | None = None
        self.has_ui = False
        self.deadline_ms = event_deadline_ms(os.environ)  # announced in hello, kept per event
        self.told_trust: set[tuple[str, str | None]] = set()
        self.told_above: set[Path] = set()
        self.policy: CompiledPolicy | None = None
        self.memo: VarsMemo | None = None
        self.fingerprint: tuple[Any, ...] = ()
        self.watched: list[str] = []
        self.state: dict[str, Any] = {}
        self.stored = canonical_json({})  # the state last stored in the session (transient keys left out)
        self.models: dict[str, Any] = {}
        self.registry: dict[str, Any] = registry_facts(None)
        self.env: dict[str, str] = {}
        self.log_file = agent / "router" / "router.log"
        self.executor = Executor(connection.request, cwd=str(cwd), log_file=self.log_file)
        self.observer = Observer(agent)
        self.outcomes: dict[str, SignalOutcome] = {}  # the signals of the last decision
        self.unrecorded: collections.deque[Callable[[], None]] = collections.deque()
        self.recheck_ns = 0  # policy files are looked at again at most this often
        self.checked_ns = 0

    # --- policy -------------------------------------------------------------------------------

    def load(self, *, keep_trusted: bool = True) -> list[Diagnostic]:
        """Load the layered policy (project layer only when its content is trusted).

        With `keep_trusted`, a trusted project policy in force stays when its files change to
        content nobody trusted (a reload never swaps in untrusted rules, nor drops trusted ones).
        Whatever goes wrong (errors in the files, a limit, a bug), the policy in force stays; a
        sidecar that starts with broken files of its own layers takes the last policy that compiled
        for them from the cache and says so.
        """
        bounded = time_limit(RELOAD_PARSE_S) if self.policy is not None else contextlib.nullcontext()
        try:
            with bounded:  # mid-session: a huge edit must not hold the prompt
                loaded = load_session_policy(self.cwd, self.agent, extra=self.extra,
                                             records=TrustStore(self.agent).records(),
                                             approved=self.approved)
        except Exception as exc:  # a bug must not take the policy in force with it
            self.executor.log(f"internal error while loading the policy: {type(exc).__name__}: {exc}")
            return [Diagnostic(RELOAD_FAILED, f"the policy could not be loaded (internal error "
                               f"{type(exc).__name__}: {exc})")]
        keep = keep_trusted and self._keeps_trusted_project(loaded.trust)
        self.trust = loaded.trust
        usable = loaded.policy is not None and (not has_errors(loaded.diagnostics)
                                                or (loaded.last_good and self.policy is None))
        if usable and not keep and loaded.policy is not None:
            self.policy = loaded.policy
            self.observer.policy_hash(loaded.policy)  # the content now, as it was compiled
            self.env = {n: os.environ[n] for n in loaded.policy.env_names if n in os.environ}
            self.executor.secrets = dict(self.env)
            self.executor.reported.clear()  # a new policy: warn of its evaluation errors afresh
            for text in refusal_warnings(loaded.policy, limit=len(loaded.policy.refused)):
                self.executor.log(text)
        self.watched = [str(p) for p in loaded.watched]
        self.fingerprint = tuple(_stat(p) for p in self.watched)
        return loaded.diagnostics

    def _keeps_trusted_project(self, trust: TrustDecision) -> bool:
        """A project policy in force stays when its files change to content nobody trusted, or
        when `.pi/router.yaml` is deleted (state `none`): until the session ends, with a notice."""
        return self.policy is not None and self.policy_has_project and not trust.applies and \
            trust.state in ("untrusted", "changed", "none")

    @property
    def policy_has_project(self) -> bool:
        return self.policy is not None and any(
            Path(source).absolute() == (self.cwd / ".pi" / "router.yaml").absolute()
            for _, source in self.policy.file_refs)

    def trust_warnings(self) -> list[str]:
        """The trust message, once per session and content."""
        text = self.trust.message()
        kept = self.policy_has_project and not self.trust.applies
        if text is None and kept and self.trust.state == "none":
            text = (f"{self.cwd / '.pi' / 'router.yaml'} was removed (or is no longer a file); the "
                    "project policy you trusted stays in force until this session ends")
        elif text is not None and kept:
            text += "; the project policy you trusted earlier stays in force"
        if text is None or (self.trust.state, self.trust.digest) in self.told_trust:
            return []
        self.told_trust.add((self.trust.state, self.trust.digest))
        self.executor.log(text)
        return [text]

    def location_warnings(self) -> list[str]:
        """Once per process: Pi started below a project whose `.pi/router.yaml` it does not load."""
        above = project_policy_above(self.cwd)
        if above is None or above in self.told_above:
            return []
        self.told_above.add(above)
        text = (f"the project's router policy is {above}; Pi started in {self.cwd} reads .pi/ only in its "
                f"working directory, so it is not loaded: start pi in {above.parent.parent}")
        self.executor.log(text)
        return [text]

    def changed(self, event_type: str | None = None) -> bool:
        """Whether a watched policy file changed since the last load. An event of a type Pi emits
        in bursts within one assistant message (BURST_EVENTS) skips the look when the last one
        was less than `recheck_ns` ago (`router serve`: RECHECK_MS); every other event looks."""
        now = time.monotonic_ns()
        if event_type in BURST_EVENTS and now - self.checked_ns < self.recheck_ns:
            return False
        self.checked_ns = now
        return tuple(_stat(p) for p in self.watched) != self.fingerprint

    def reload(self) -> list[str]:
        """Reload after a policy file changed; return warnings for the user (once per change)."""
        previous = self.policy
        diagnostics = self.load()
        if has_errors(diagnostics) or (self.policy is previous and self.trust.applies):
            first = next((d for d in diagnostics if d.severity == "error" and d.code != RELOAD_FAILED),
                         next((d for d in diagnostics if d.severity == "error"), None))
            reason = _render(first) if first else f"unknown error [{RELOAD_FAILED}]"
            text = f"policy reload failed: {reason}; keeping the last good policy"
            self.executor.log(text)
            return [text]
        self.executor.log("policy reloaded")
        return self.trust_warnings()

    def declarations(self) -> dict[str, Any]:
        policy = self.policy
        engine_commands = [policy_command.DECLARATION]
        if policy is None:
            return {"events": ["command"], "commands": engine_commands, "tools": [], "virtual_models": [],
                    "skills": [], "bus_events": [], "excerpt_entries": DEFAULT_SETTINGS.excerpt_entries,
                    "failure": {}}
        return {
            "events": sorted({*policy.event_types, "command"}),
            "commands": [*policy.commands, *engine_commands],
            "tools": list(policy.tools),
            "virtual_models": list(policy.virtual_models),
            "skills": list(policy.skills),
            "bus_events": list(policy.bus_events),
            "excerpt_entries": policy_question_settings(policy, self.env).excerpt_entries,
            "failure": dict(policy.failure),
        }

    # --- requests -----------------------------------------------------------------------------

    async def hello(self, params: dict[str, Any], request_id: Any = None) -> dict[str, Any]:
        if request_id is not None:  # alive: the bridge waits for loading (it waits ~2 s for this)
            self.connection.notify(protocol.PROGRESS, {"id": request_id, "budget_ms": RELOAD_BUDGET_MS})
        if params.get("cwd"):
            self.cwd = Path(str(params["cwd"]))
            self.executor.cwd = str(self.cwd)
        self.approved = approved_digest(params, self.cwd, self.agent)
        self.has_ui = params.get("hasUI") is True
        self.models = model_catalog(params.get("models"))
        self.registry = registry_facts(params.get("registry"))
        restored = params.get("state")
        diagnostics = self.load()
        lean.settle()
        self.restore(restored if isinstance(restored, dict) else {})
        warnings = [_render(d) for d in diagnostics if d.severity == "error"][:5] + self.notices()
        if self.policy is None:
            warnings.insert(0, "the router policy has errors; Pi runs without it (run `router lint`)")
        if params.get("preload") is not True:  # the factory's hello shows nothing: tell at session_start
            warnings += self.trust_warnings()
            warnings += self.location_warnings()
            warnings += refusal_warnings(self.policy)
        if params.get("preload") is True:
            self.cache_declarations(params.get("declarationsKey"))
        return {"protocol": protocol.PROTOCOL_VERSION, "engine": _version(),
                "event_deadline_ms": self.deadline_ms, "shutdown_ms": self.shutdown_ms(),
                **self.declarations(),
                "warnings": warnings, "trust": self.trust_report(),
                "files": [path for path, _ in self.policy.file_refs] if self.policy else []}

    def shutdown_ms(self) -> int:
        """How long the bridge waits for `shutdown`'s answer: enough for the telemetry flush."""
        return SHUTDOWN_MS + (2 * TELEMETRY_FLUSH_MS if self.observer.telemetry is not None else 0)

    def shutdown(self) -> dict[str, Any]:
        """`shutdown`: the last decision recorded and the telemetry exported, then the answer (the
        bridge may kill the sidecar right after it, as Pi exits)."""
        self.after_answer()
        self.observer.flush(TELEMETRY_FLUSH_MS)
        return {}

    def cache_declarations(self, key: Any) -> None:
        """Store the declarations for the bridge's next start under its `key` (the bridge sends one
        at its startup hello), with the digests of the files they depend on and the trust store."""
        if declarations_cache.entry_path(self.agent, key) is None:
            return
        files = [Path(p) for p in self.watched] + [TrustStore(self.agent).path]
        value = declarations_cache.entry(key, _version(), self.declarations(), files)
        if not declarations_cache.write(self.agent, key, value):
            self.executor.log("the declarations cache could not be written (the next start waits)")

    def keep_trust_after_own_writes(self, decision: Decision) -> None:
        """A command the user typed saved into a project data file of a trusted project: the trust
        record follows the new content (router/runtime/session_trust.py), and the policy reloads."""
        if self.policy is not None and trust_after_own_writes(self.policy, decision, self.cwd, self.agent,
                                                              self.trust.checked, self.executor.log):
            self.load()

    def restore(self, restored: dict[str, Any]) -> None:
        """The session's state from its last stored entry; transient keys (which describe a process
        that is gone) are dropped."""
        self.state = without_keys(restored, self.transient)
        self.stored = canonical_json(self.state)

    def store(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Keep `state`; return what the session must store, None when that did not change.

        Only a change of the stored part counts (transient keys left out), compared as JSON: the
        bridge appends one entry per change, never one for a state that is the same again."""
        self.state = state
        stored = without_keys(state, self.transient)
        text = canonical_json(stored)
        if text == self.stored:
            return None
        self.stored = text
        return stored

    @property
    def transient(self) -> frozenset[str]:
        return self.policy.transient_state if self.policy else frozenset()

    def trust_report(self) -> dict[str, Any]:
        """What the bridge shows: the state, the one-line message and a status-line text."""
        return {"state": self.trust.state, "message": self.trust.message(), "status": self.trust.status,
                "digest": self.trust.digest}

    def log(self, text: str) -> None:
        """A line in the router's log (the connection's protocol errors go here too)."""
        self.executor.log(text)

    def notices(self) -> list[str]:
        """Warnings the executor collected outside a decision (once each), taken once."""
        taken, self.executor.notices[:] = list(self.executor.notices), []
        return taken

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
            return await policy_command.answer(self, request_id, str(payload.get("args") or ""), warnings,
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


ABORTED = "aborted"  # the error of a signal whose event's run Pi aborted
DECIDED_WHEN_ABORTED = frozenset({"question"})  # event types decided even when their run is aborted
SHUTDOWN_MS = 500  # what the bridge waits for `shutdown`'s answer without telemetry
TELEMETRY_FLUSH_MS = 2000  # the longest each of the span and metric exports may take at shutdown


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


def _serve(args: ServeArgs) -> int:
    """The sidecar's loop: it reads stdin and answers line by line (router.runtime.loop)."""
    events = loop.Loop()
    engine: list[Engine] = []

    def make_engine(connection: Connection) -> Engine:
        engine.append(Engine(connection, cwd=Path(args.cwd), agent=Path(args.agent_dir),
                             extra=[Path(p) for p in args.policy]))
        engine[0].recheck_ns = RECHECK_MS * 1_000_000
        return engine[0]

    connection = Connection(sys.stdout.buffer, engine=make_engine)
    if args.forked_from:
        connection.log(f"sidecar {os.getpid()} forked by the warm sidecar {args.forked_from}")
    read_lines(connection, events)
    engine[0].after_answer()
    engine[0].observer.close()
    events.close()
    return 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.warm:
        from router.runtime import warm
        return warm.main(args.warm)
    try:
        return _serve(args)
    except KeyboardInterrupt:
        return 130


def _stat(path: str) -> tuple[int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return (-1, -1)
    return (info.st_mtime_ns, info.st_size)


def _render(diagnostic: Diagnostic) -> str:
    where = f"{diagnostic.span}: " if diagnostic.span else ""
    return f"{where}{diagnostic.message} [{diagnostic.code}]"


def _version() -> str:
    from router import __version__
    return __version__

