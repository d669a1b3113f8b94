"""`router serve`: the sidecar. JSON lines over stdio with requests both ways (docs/protocol.md).

The bridge spawns it in `session_start`, sends `hello` (which loads the layered policy), then
`event` requests; the sidecar may ask the bridge for classifier or completion calls while it
decides. Policy files are checked on every event and reloaded when they change; a broken edit
keeps the last good policy and says so.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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
from router.lang.budget import EVENT_DEADLINE_MS, IO_MARGIN_MS, Budget, BudgetLimits
from router.load.deadline import time_limit
from router.load.paths import agent_dir as default_agent_dir
from router.runtime import declarations_cache, lean, loop, policy_command, policy_why, protocol
from router.runtime.connection import Connection, LineSplitter, handle_line
from router.runtime.executor import Executor, budget_ms
from router.runtime.observer import Observer
from router.runtime.session_policy import (
    PROJECT_SECONDS,
    git_tree_file,
    load_session_policy,
    read_project_content,
)
from router.trust.store import (
    TrustDecision,
    TrustStore,
    TrustStoreError,
    bounded_sha256,
    decide,
    recorded_path,
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
        self.told_trust: set[tuple[str, str | None]] = set()
        self.policy: CompiledPolicy | None = None
        self.memo: VarsMemo | None = None
        self.fingerprint: tuple[Any, ...] = ()
        self.watched: list[str] = []
        self.state: dict[str, Any] = {}
        self.stored = _canonical({})  # the state last stored in the session (transient keys left out)
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
        self.approved = self._approved_digest(params)
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
            warnings += refusal_warnings(self.policy)
        if params.get("preload") is True:
            self.cache_declarations(params.get("declarationsKey"))
        return {"protocol": protocol.PROTOCOL_VERSION, "engine": _version(),
                "event_deadline_ms": EVENT_DEADLINE_MS, **self.declarations(),
                "warnings": warnings, "trust": self.trust_report(),
                "files": [path for path, _ in self.policy.file_refs] if self.policy else []}

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
        """A command the user typed saved into a project data file of a trusted project (say,
        `/cuttle config set` into .pi/pi-cuttle.json): the new content is the user's own change,
        so the trust record follows it instead of the project turning untrusted."""
        policy = self.policy
        if policy is None or not policy.project_data:
            return
        data = {(self.cwd / name).resolve() for name in policy.project_data}
        written = [e for e in decision.effects if e.action == "save" and isinstance(e.params, dict)
                   and _resolved(e.params.get("file")) in data]
        if not written:
            return
        names = {str(Path(name)) for name in policy.project_data}
        base = self.cwd.resolve()
        changed = [name for name, sha in self.trust.checked
                   if name not in names and bounded_sha256(recorded_path(base, name, git_tree_file)[0]
                                                           or base / name) != sha]
        if changed or not self.trust.checked:  # the policy's own files changed too: not yours to keep
            self.executor.log(f"trust not updated after a write to the project's data: "
                              f"{', '.join(changed) or 'no trusted file list'} changed as well")
            return
        content, _ = read_project_content(self.cwd, self.agent)
        if content is None:
            return
        try:
            TrustStore(self.agent).trust(content)
        except (OSError, TrustStoreError) as exc:
            self.executor.log(f"trust not updated after a write to the project's data: {exc}")
            return
        self.executor.log(f"trust kept for {self.cwd}: the project's data changed by your command")
        self.load()

    def restore(self, restored: dict[str, Any]) -> None:
        """The session's state from its last stored entry; transient keys (which describe a process
        that is gone) are dropped."""
        self.state = without_keys(restored, self.transient)
        self.stored = _canonical(self.state)

    def store(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Keep `state`; return what the session must store, None when that did not change.

        Only a change of the stored part counts (transient keys left out), compared as JSON: the
        bridge appends one entry per change, never one for a state that is the same again."""
        self.state = state
        stored = without_keys(state, self.transient)
        text = _canonical(stored)
        if text == self.stored:
            return None
        self.stored = text
        return stored

    @property
    def transient(self) -> frozenset[str]:
        return self.policy.transient_state if self.policy else frozenset()

    def _approved_digest(self, params: dict[str, Any]) -> str | None:
        """The project content Pi says to apply for this run unrecorded (`--approve`, or the user's
        `defaultProjectTrust: always`): the content of the run's first hello, never newer bytes."""
        if params.get("noApprove") is True:
            return None
        settings = params.get("settings")
        always = isinstance(settings, dict) and settings.get("defaultProjectTrust") == "always"
        if not (params.get("approve") is True or always):
            return None
        if params.get("firstHello") is False:  # a new session or sidecar: only what was approved
            earlier = params.get("approvedDigest")
            return earlier if isinstance(earlier, str) and earlier else None
        content, _ = read_project_content(self.cwd, self.agent, seconds=PROJECT_SECONDS)
        return content.digest if content is not None else None

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
            return await self.policy_command(request_id, str(payload.get("args") or ""), warnings, session)
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
        ctx = {**(params.get("ctx") or {}), "projectTrusted": self.trust.applies}  # the engine's decision
        event = normalize(event_type, params.get("payload") or {}, ctx,
                          env=self.env, models=self.models, registry=self.registry,
                          questions=policy_question_settings(policy, self.env) if event_type in
                          ("question", "dialog") else DEFAULT_SETTINGS, cut=bool(params.get("cut")))
        if params.get("cut"):
            self.executor.log(f"event {event_type}: payload cut to the protocol's limits "
                              f"({'; '.join(map(str, params['cut']))[:300]})")
        state_before = self.state
        decision = await self._decide(request_id, policy, event, received)
        trusted = self.trust.state == "trusted"
        applied = self.executor.apply(decision)
        self.unrecorded.append(functools.partial(
            self.observe, policy, event, decision, state_before, dict(self.outcomes), started_ns,
            time.perf_counter_ns(), applied.refused))
        if trusted and event_type == "command":
            self.keep_trust_after_own_writes(decision)
        result: dict[str, Any] = {"actions": applied.actions, "fired": list(decision.fired),
                                  "warnings": [self.executor.redact(w) for w in warnings + applied.warnings]}
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

    async def policy_command(self, request_id: Any, args: str, warnings: list[str],
                             session: str = "") -> dict[str, Any]:
        """`/policy [status|why|trust|untrust]`: the engine's own command."""
        word = (args.split() or ["status"])[0]
        if word == "trust":
            self.connection.notify(protocol.PROGRESS, {
                "id": request_id, "budget_ms": policy_command.CONFIRM_BUDGET_MS, "signal": "policy"})
            text = await policy_command.trust_project(
                self.cwd, self.agent, has_ui=self.has_ui,
                ask=lambda params, timeout: self.connection.request(protocol.ASK, params, timeout))
            self.load()
        elif word == "untrust":
            text = policy_command.untrust_project(self.cwd, self.agent)
            self.load(keep_trusted=False)
        elif word == "status":
            files = [path for path, _ in self.policy.file_refs] if self.policy else []
            text = policy_command.status_text(self.cwd, self.trust, files)
        elif word == "why":
            event_type = [*args.split(), ""][1] or None
            last = self.observer.last_decision(session, event_type)
            text = self.executor.redact(policy_why.why_text(last, event_type))
        else:
            text = policy_command.usage()
        notify = {"action": "notify", "params": {"text": text, "level": "info"}, "rule": "policy"}
        return {"actions": [notify], "fired": [], "warnings": warnings, "declarations": self.declarations(),
                "trust": self.trust_report()}

    async def _decide(self, request_id: Any, policy: CompiledPolicy, event: dict[str, Any],
                      received: float) -> Decision:
        outcomes: dict[str, SignalOutcome] = {}
        self.outcomes = outcomes
        budget = Budget(event_limits(received))  # every evaluation of the event, while signals are computed
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
            outcomes[pending.name] = await self.executor.compute(pending, wait_ms / 1000)
        self.outcomes = {**outcomes, **{n: SignalOutcome(error="too many signals") for n in policy.signals}}
        return evaluate(policy, event, state=self.state, budget=budget, vars_memo=memo,
                        outcomes=self.outcomes)

    def _vars_memo(self, policy: CompiledPolicy) -> VarsMemo:
        """The resolved-vars memo of `policy` (a new one when the policy changed)."""
        if self.memo is None or self.memo.policy is not policy:
            self.memo = VarsMemo(policy)
        return self.memo


def event_limits(received: float) -> BudgetLimits:
    """The evaluation budget of an event whose line was read at `received` (perf_counter): the
    announced deadline less the I/O margin, less what has passed since (a line that waited behind
    another request has that much less); the per-rule limits as always."""
    waited_ms = (time.perf_counter() - received) * 1000
    return BudgetLimits(time_ms=max(0, int(EVENT_DEADLINE_MS - IO_MARGIN_MS - waited_ms)))


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
    splitter = LineSplitter(protocol.MAX_LINE_BYTES)
    ended = threading.Event()
    waiting: list[tuple[bytes | int, float]] = []  # each line with when it was read
    at_end = [False]

    def take(chunk: bytes) -> None:
        idle = not waiting
        now = time.perf_counter()
        waiting.extend((line, now) for line in (splitter.feed(chunk) if chunk else splitter.end()))
        at_end[0] = at_end[0] or not chunk
        if idle:
            next_line()

    def next_line() -> None:  # one line per turn: its request's first step runs before the next line
        if connection.closing.is_set():  # `shutdown` answered: the rest is not read
            return
        if waiting:
            handle_line(connection, *waiting.pop(0))
        if waiting:
            events.call_soon(next_line)
        elif at_end[0]:
            ended.set()

    events.read_from(sys.stdin.fileno(), take)
    events.run_until(lambda: ended.is_set() or connection.closing.is_set())
    if connection.tasks:
        events.run_until(lambda: not connection.tasks, timeout=2)
    engine[0].after_answer()
    engine[0].observer.close()
    events.close()
    return 0


@dataclass(frozen=True)
class ServeArgs:
    cwd: str
    agent_dir: str
    policy: tuple[str, ...]
    warm: str | None
    forked_from: str | None


def parse_args(argv: list[str]) -> ServeArgs:
    """`router serve`'s options. A command line of these options with their values (what the
    bridge and the warm sidecar pass) is read here; anything else (`--help`, a mistake, a repeated
    option) goes to argparse for its usage, errors and rules. Importing argparse and building its
    parser cost a sidecar's start 4.5 ms."""
    values: dict[str, list[str]] = {}
    rest = list(argv)
    while rest:
        name, sep, value = rest.pop(0).partition("=")
        if name not in lean.SERVE_OPTIONS or not (sep or _plain_value_follows(rest)):
            return _argparse(argv)
        values.setdefault(name, []).append(value if sep else rest.pop(0))
    if any(len(found) > 1 for name, found in values.items() if name != "--policy"):
        return _argparse(argv)
    one = {name: found[0] for name, found in values.items()}
    return ServeArgs(cwd=one["--cwd"] if "--cwd" in one else os.getcwd(),
                     agent_dir=one["--agent-dir"] if "--agent-dir" in one else str(default_agent_dir()),
                     policy=tuple(values.get("--policy", [])), warm=one.get("--warm"),
                     forked_from=one.get("--forked-from"))


def _plain_value_follows(rest: list[str]) -> bool:
    """A value comes next that argparse would take as one (it refuses anything starting with `-`
    here: an option, or a negative number, which goes to argparse to decide)."""
    return bool(rest) and not rest[0].startswith("-")


def _argparse(argv: list[str]) -> ServeArgs:
    import argparse

    parser = argparse.ArgumentParser(prog="router serve", description="the router sidecar (stdio)")
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("--agent-dir", default=str(default_agent_dir()))
    parser.add_argument("--policy", action="append", default=[], help="an extra policy file, last")
    parser.add_argument("--warm", metavar="SOCKET", help="serve each connection to this Unix socket "
                        "with a forked sidecar (router/runtime/warm.py)")
    parser.add_argument("--forked-from", metavar="PID", help=argparse.SUPPRESS)  # by the warm sidecar
    args = parser.parse_args(argv)
    return ServeArgs(cwd=args.cwd, agent_dir=args.agent_dir, policy=tuple(args.policy), warm=args.warm,
                     forked_from=args.forked_from)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.warm:
        from router.runtime import warm
        return warm.main(args.warm)
    try:
        return _serve(args)
    except KeyboardInterrupt:
        return 130


def _resolved(value: Any) -> Path | None:
    if not isinstance(value, str) or not value:
        return None
    return Path(value).expanduser().resolve()


def without_keys(state: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """A copy of `state` without the dotted `keys`; a parent they leave empty goes too."""
    result = copy.deepcopy(state)
    for key in keys:
        _drop(result, key.split("."))
    return result


def _drop(target: dict[str, Any], parts: list[str]) -> None:
    head, rest = parts[0], parts[1:]
    if not rest:
        target.pop(head, None)
        return
    child = target.get(head)
    if isinstance(child, dict) and child:
        _drop(child, rest)
        if not child:
            del target[head]


def _canonical(value: Any) -> str:
    """One text per JSON value (key order and tuples vs lists do not matter)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


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

