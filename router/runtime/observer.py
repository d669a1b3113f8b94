"""What the sidecar records about each decision: the decision log, OpenTelemetry, `/policy why`.

The server owns one `Observer` and hands it every evaluated event after the executor applied it.
The observer is the only writer of the decision log and the only exporter of telemetry; whatever
goes wrong here never changes or delays a decision beyond a warning (given once).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.compile.ir import CompiledPolicy
from router.diagnostics.code_names import SIGNAL_FAILED
from router.engine.decision import Decision, SignalOutcome
from router.load.paths import log_dir, project_identity
from router.load.prices import Catalog, read_catalog
from router.runtime import loop
from router.runtime.decision_log import DecisionLog, LogSettings, logged_seqs
from router.runtime.decision_record import build_record, catalog_digest, policy_digest
from router.runtime.log_privacy import Stubber, literals_of

if TYPE_CHECKING:
    from router.runtime.otel import Telemetry


def resource_of(policy: CompiledPolicy, project: Mapping[str, str | None] | None,
                digest: str) -> dict[str, Any]:
    """The OpenTelemetry resource attributes of a run (docs/observability.md): the project, the
    policy's digest, and each built-in pack with its version (the router's, and the digest of the
    pack's file, which tells an edited checkout apart)."""
    from router import __version__
    from router.load.paths import packs_dir
    from router.trust.store import bounded_sha256

    found: dict[str, Any] = {"router.policy.digest": digest}
    if project is not None:
        found.update({f"router.project.{key}": value for key, value in project.items() if value})
    packs = packs_dir().resolve()
    names = []
    for _, source in policy.file_refs:
        path = Path(source)
        if path.parent == packs and path.suffix == ".yaml" and path.stem not in names:
            names.append(path.stem)
            sha = bounded_sha256(path)
            found[f"router.pack.{path.stem}.version"] = __version__ + (f"+{sha[:12]}" if sha else "")
    if names:
        found["router.packs"] = names
    return found


@dataclass
class LastDecision:
    """Enough to evaluate the session's last decision again, with a tracer (`/policy why`)."""

    policy: CompiledPolicy
    event: dict[str, Any]
    state: Mapping[str, Any]
    outcomes: dict[str, SignalOutcome]
    record: dict[str, Any]


@dataclass
class PolicyFacts:
    """Of one policy: its log settings, its content digest, which event types have shadow rules,
    the strings it spells out (the text a record may keep, router/runtime/log_privacy.py)."""

    policy: CompiledPolicy
    settings: LogSettings
    digest: str | None = None
    shadow: dict[str, bool] = field(default_factory=dict)
    _literals: frozenset[str] | None = None

    @property
    def literals(self) -> frozenset[str]:
        if self._literals is None:
            self._literals = literals_of(self.policy)
        return self._literals

    def has_shadow(self, event_type: str) -> bool:
        if event_type not in self.shadow:
            self.shadow[event_type] = any(r.shadow for r in self.policy.by_event.get(event_type, ()))
        return self.shadow[event_type]


@dataclass
class Observer:
    agent: Path
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    counters: dict[tuple[str, str], int] = field(default_factory=dict)
    seen_sessions: set[str] = field(default_factory=set)
    last: dict[str, LastDecision] = field(default_factory=dict)  # by session
    last_of_type: dict[tuple[str, str], LastDecision] = field(default_factory=dict)  # (session, event)
    telemetry: Telemetry | None = None
    told: set[str] = field(default_factory=set)
    projects: dict[str, dict[str, str | None] | None] = field(default_factory=dict)  # by cwd
    _log: DecisionLog | None = None
    _pending_warnings: list[str] = field(default_factory=list)  # told at the next decision
    _catalog: tuple[Any, str] | None = None  # the last model catalog and its digest
    _facts: PolicyFacts | None = None  # of the policy in force
    _key: bytes = field(default_factory=lambda: os.urandom(32))  # the stubs' key without a log
    _prices: tuple[Any, CompiledPolicy, Catalog] | None = None  # the catalog turns are priced with
    _local: frozenset[str] | None = None  # the providers models.json serves from loopback

    def __post_init__(self) -> None:
        from router.runtime import otel
        self.exporting = otel.wanted(self.environ)  # only then is OpenTelemetry imported; the
        # exporters start at the hello, when the resource's project and policy are known
        problem = otel.preload(self.environ) if self.exporting else None
        if problem:
            self.exporting = False
            self.told.add(problem)
            self._pending_warnings.append(problem)

    def start_telemetry(self, policy: CompiledPolicy, cwd: str) -> None:
        """Start the exporters, when wanted and not started yet, with the resource of a run in
        `cwd` under `policy` (the sidecar's hello; else the first decision)."""
        if self.exporting and self.telemetry is None:
            self._start_telemetry(policy, self.project(cwd, policy))

    def _start_telemetry(self, policy: CompiledPolicy, project: Mapping[str, str | None] | None) -> None:
        """Start the exporters with the resource of this run: its project, policy and packs."""
        from router.runtime import otel
        started = otel.start(self.environ, resource_of(policy, project, self.policy_hash(policy)))
        if isinstance(started, str):
            self.exporting = False
            self.told.add(started)
            self._pending_warnings.append(started)
        else:
            self.telemetry = started

    def facts(self, policy: CompiledPolicy) -> PolicyFacts:
        """What every record of `policy` shares, worked out once per policy in force."""
        if self._facts is None or self._facts.policy is not policy:
            self._facts = PolicyFacts(policy, LogSettings.of(policy))
        return self._facts

    def policy_hash(self, policy: CompiledPolicy) -> str:
        facts = self.facts(policy)
        if facts.digest is None:
            facts.digest = policy_digest(policy)
        return facts.digest

    def models_digest(self, models: Any) -> str | None:
        """The digest of the event's model catalog, computed once per catalog the sidecar holds."""
        if not models:
            return None
        if self._catalog is None or self._catalog[0] is not models:
            self._catalog = (models, catalog_digest(models))
        return self._catalog[1]

    def prices(self, policy: CompiledPolicy, models: Any) -> Catalog:
        """What a turn is priced with (as `router replay` prices it): the event's models, the
        policy's `provides.prices`, the loopback providers of models.json; made once per catalog
        and policy."""
        if self._prices is None or self._prices[0] is not models or self._prices[1] is not policy:
            if self._local is None:
                self._local = frozenset(read_catalog(self.agent / "models.json").local_providers)
            self._prices = (models, policy, Catalog.of_event(models, policy.prices, self._local))
        return self._prices[2]

    def log_for(self, settings: LogSettings) -> DecisionLog:
        if self._log is None or self._log.settings != settings:
            before = self._log
            if before is not None:
                before.close()
            running = loop.running()  # the sidecar's own loop: the log stays open during a burst
            self._log = DecisionLog(log_dir(self.agent), settings, root=self.agent,
                                    later=running.call_later if running is not None else None)
            if before is not None:  # a refusal (a link on the way) holds for the whole run
                self._log.failing, self._log.refused = before.failing, before.refused
        return self._log

    def project(self, cwd: str, policy: CompiledPolicy) -> dict[str, str | None] | None:
        """The `{name, digest}` of the project in `cwd` (worked out once per directory), its digest
        keyed with the decision log's key (made where the log keeps it even when the log is off,
        so the digest is the same in the log, in telemetry and in `router replay`)."""
        if cwd not in self.projects:
            self.projects[cwd] = project_identity(cwd, self.log_for(self.facts(policy).settings).digest_key())
        return self.projects[cwd]

    def next_seq(self, session: str, event_type: str) -> int:
        """The ordinal of this event type in the session; a session this sidecar has not seen yet
        (a resumed one, a restarted sidecar) continues from what the log already holds."""
        if session and session not in self.seen_sessions:
            self.seen_sessions.add(session)
            for kind, last in logged_seqs(log_dir(self.agent), session).items():
                self.counters[(session, kind)] = max(self.counters.get((session, kind), 0), last + 1)
        key = (session, event_type)
        seq = self.counters.get(key, 0)
        self.counters[key] = seq + 1
        return seq

    def observe(self, *, policy: CompiledPolicy, event: dict[str, Any], decision: Decision,
                state_before: Mapping[str, Any], outcomes: dict[str, SignalOutcome],
                started_ns: int, secrets: Mapping[str, str], refused: frozenset[str] = frozenset(),
                ended_ns: int | None = None) -> list[str]:
        """Record one decision (decided from `started_ns` to `ended_ns`, default now); the warnings
        for the user (each problem once)."""
        warnings, self._pending_warnings = self._pending_warnings, []
        ended_ns = time.perf_counter_ns() if ended_ns is None else ended_ns
        session_info = event.get("session")
        session = str(session_info.get("id") or "") if isinstance(session_info, Mapping) else ""
        cwd = session_info.get("cwd") if isinstance(session_info, Mapping) else None
        project = self.project(str(cwd or ""), policy)
        if self.exporting and self.telemetry is None:
            self._start_telemetry(policy, project)
        warnings += self._pending_warnings
        self._pending_warnings = []
        facts = self.facts(policy)
        settings = facts.settings
        log = self.log_for(settings) if settings.enabled else None
        record = build_record(
            policy=policy, event=event, decision=decision, session=session,
            seq=self.next_seq(session, str(event.get("type"))),
            latency_ms=(ended_ns - started_ns) / 1e6, policy_hash=self.policy_hash(policy),
            settings=settings, secrets=secrets, refused=refused,
            models_digest=self.models_digest(event.get("models")),
            has_shadow=facts.has_shadow(str(event.get("type"))), literals=facts.literals,
            key=log.digest_key() if log is not None and not log.refused else self._key, project=project,
            prices=self.prices(policy, event.get("models")) if event.get("message_usage") else None)
        last = LastDecision(policy, event, state_before, dict(outcomes), record)
        self.last[session] = self.last_of_type[(session, record["event"])] = last
        if log is not None:
            problem = log.write(record)
            if problem:
                warnings.append(problem)
        if self.telemetry is not None:
            problem = self.telemetry.decision(record, latency_ns=ended_ns - started_ns)
            if problem and problem not in self.told:
                self.told.add(problem)
                warnings.append(problem)
        return warnings

    def error_lines(self, policy: CompiledPolicy, decision: Decision) -> list[str]:
        """The router.log lines of a decision's errors and failed signals, their text stubbed as
        in the decision log unless the user keeps it (`keep_text: [errors]`): a message may quote
        a value of the conversation (a regex, a number that was not one)."""
        if not decision.errors and not decision.signal_errors:
            return []
        facts = self.facts(policy)
        keep = "errors" in facts.settings.kept
        key = self.log_for(facts.settings).digest_key() if facts.settings.enabled else self._key
        stubber = Stubber(key, facts.literals, frozenset(), {})
        lines = [f"{e.code} " + (e.message if keep else stubber.text(e.message)) + (
            f" (rule {e.rule_id})" if e.rule_id else "") for e in decision.errors]
        for name, text in decision.signal_errors.items():
            shown = text if keep else stubber.text(text)
            lines.append(f"{decision.signal_codes.get(name, SIGNAL_FAILED)} signal {name} failed: {shown}")
        return lines

    def last_decision(self, session: str, event_type: str | None = None) -> LastDecision | None:
        """The session's last decision, or its last one of `event_type`."""
        if event_type:
            return self.last_of_type.get((session, event_type))
        return self.last.get(session)

    def flush(self, timeout_ms: int) -> None:
        """Export pending telemetry now, within about `timeout_ms` per kind (spans, metrics)."""
        if self.telemetry is not None:
            self.telemetry.flush(timeout_ms)

    def close(self) -> None:
        """Close the decision log; flush and stop the telemetry exporters (at the sidecar's exit)."""
        if self._log is not None:
            self._log.close()
        if self.telemetry is not None:
            self.telemetry.shutdown()
            self.telemetry = None
