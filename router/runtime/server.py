"""`router serve`: the sidecar. JSON lines over stdio with requests both ways (docs/protocol.md).

The bridge spawns it in `session_start`, sends `hello` (which loads the layered policy), then
`event` requests; the sidecar may ask the bridge for classifier or completion calls while it
decides. Policy files are checked on every event and reloaded when they change; a broken edit
keeps the last good policy and says so.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from router.compile.capability_analysis import refusal_warnings
from router.compile.ir import CompiledPolicy
from router.compile.question_settings import policy_question_settings
from router.diagnostics.code_names import RELOAD_FAILED
from router.diagnostics.diagnostic import Diagnostic, has_errors
from router.engine.decision import Decision, SignalOutcome
from router.engine.vars_memo import VarsMemo
from router.events.normalize import model_catalog, registry_facts
from router.events.questions import DEFAULT_SETTINGS
from router.lang.budget import (
    event_deadline_ms,
)
from router.load.deadline import time_limit
from router.load.paths import project_policy_above
from router.runtime import declarations_cache, lean, loop, policy_command, protocol
from router.runtime.connection import Connection
from router.runtime.engine_event import RELOAD_BUDGET_MS, EventPath
from router.runtime.executor import Executor
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

RELOAD_PARSE_S = 3.0  # a reload mid-session parses for at most this long; past it the policy in force stays
RECHECK_MS = 5  # `router serve`: a burst event looks at the policy files at most this often (~12 µs a look)
BURST_EVENTS = frozenset({"tool_call", "tool_result"})  # one per tool call of an assistant message


class Engine(EventPath):
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
        if self.policy is not None:  # the exporters with this run's resource, before any decision
            self.observer.start_telemetry(self.policy, str(self.cwd))
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
        return SHUTDOWN_MS + (2 * TELEMETRY_FLUSH_MS if self.observer.exporting else 0)

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

SHUTDOWN_MS = 500  # what the bridge waits for `shutdown`'s answer without telemetry
TELEMETRY_FLUSH_MS = 2000  # the longest each of the span and metric exports may take at shutdown




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

