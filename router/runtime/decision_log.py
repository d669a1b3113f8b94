"""The decision log: one JSON record per live decision, in `<agent dir>/router/log/`.

`build_record` turns one evaluated event into the record (pure: docs/observability.md has the
format); `DecisionLog` appends records as whole lines (0600 files in a 0700 directory) and rotates
by size to `decisions.1.jsonl`, `decisions.2.jsonl`, … Prompt and message text is left out unless
the user's own router.yaml says `decision_log: {prompts: true}`; environment values the policy
reads never appear.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.compile.compiled import CompiledPolicy, CompiledRule
from router.engine.choices import chosen_model, chosen_tier
from router.engine.decision import Decision, Effect
from router.load.paths import LOG_NAME, ROTATED_LOG, log_files
from router.runtime.filelock import append_line, read_text

VERSION = 1
LOCK_NAME = ".decisions.lock"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_KEEP = 5
SIGNAL_VALUE_LIMIT = 4096  # bytes of JSON: a larger signal value is left out (marked `truncated`)
TEXT_SIGNALS = frozenset({"complete", "child"})  # signals whose value is model-written text
MIN_TEXT = 8  # shorter event texts are not searched for in the record (too many false hits)
REDACTED = "<text>"


@dataclass(frozen=True)
class LogSettings:
    """What the user's own `decision_log:` says (defaults otherwise)."""

    enabled: bool = True
    prompts: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    keep: int = DEFAULT_KEEP

    @classmethod
    def of(cls, policy: CompiledPolicy | None) -> LogSettings:
        raw = dict(policy.decision_log) if policy is not None else {}
        known = {k: raw[k] for k in ("enabled", "prompts", "max_bytes", "keep") if k in raw}
        return cls(**known)


def logged_seqs(directory: Path, session: str) -> dict[str, int]:
    """The highest `seq` per event type the log holds for `session` (lines of other sessions are
    skipped before they are parsed)."""
    needle = json.dumps(session).encode()
    found: dict[str, int] = {}
    for path in log_files(directory):
        try:
            handle = path.open("rb")
        except OSError:
            continue
        with handle:
            for line in handle:
                if needle not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict) or record.get("session") != session:
                    continue
                kind, seq = record.get("event"), record.get("seq")
                if isinstance(kind, str) and isinstance(seq, int) and seq >= found.get(kind, -1):
                    found[kind] = seq
    return found


# --- the record -------------------------------------------------------------------------------


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def event_digest(event: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(event).encode("utf-8", "backslashreplace")).hexdigest()


def policy_digest(policy: CompiledPolicy) -> str:
    """The content hash of the policy in force: every file it was built from, by path and bytes."""
    digest = hashlib.sha256()
    for shown, source in sorted(policy.file_refs):
        digest.update(shown.encode() + b"\0")
        try:  # a regular file only: a FIFO planted as the policy must not block the sidecar
            digest.update(read_text(Path(source)).encode("utf-8", "surrogateescape"))
        except OSError:
            digest.update(b"<unreadable>")
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()


def now_iso(moment: datetime | None = None) -> str:
    """UTC with milliseconds: `2026-12-01T11:00:00.123Z`."""
    return (moment or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def evaluated_rules(rules: Sequence[CompiledRule], decision: Decision) -> list[CompiledRule]:
    """The rules the interpreter evaluated: those of the event type, less the ones skipped because
    their group was decided, and those after a rule that ran out of budget (RT404)."""
    fired = set(decision.fired)
    stopped = next((e.rule_id for e in decision.errors if e.code == "RT404"), None)
    decided: set[str] = set()
    evaluated = []
    for rule in rules:
        if rule.group in decided:
            continue
        evaluated.append(rule)
        if rule.id == stopped:
            break
        if rule.id in fired and not rule.shadow and not rule.continue_:
            decided.add(rule.group)
    return evaluated


def rule_origin(rule: CompiledRule) -> str:
    """Where the rule is defined: the compiled `origin` when there is one, else `file:line`."""
    origin = getattr(rule, "origin", None)
    if isinstance(origin, str) and origin:
        return origin
    return f"{rule.span.path or rule.file}:{rule.span.line}"


def action_dict(effect: Effect) -> dict[str, Any]:
    return {"action": effect.action, "params": effect.params, "rule": effect.rule_id}


def agrees(would: Sequence[Mapping[str, Any]], applied: Sequence[Mapping[str, Any]]) -> bool:
    """A shadow rule agrees when, for every action it would take, what was applied holds the same
    action with the same parameters (ignoring which rule asked for it)."""
    done = [(a.get("action"), canonical(a.get("params"))) for a in applied]
    return all((w.get("action"), canonical(w.get("params"))) in done for w in would)


def event_cost(event: Mapping[str, Any]) -> float | None:
    usage = event.get("message_usage")
    cost = usage.get("cost") if isinstance(usage, Mapping) else None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def prompt_text(event: Mapping[str, Any]) -> str | None:
    """The user's prompt the event carries, if any (recorded only when the user turns it on)."""
    for key in ("text", "prompt", "last_user_text"):
        value = event.get(key)
        if isinstance(value, str) and value and event.get("type") != "tool_result":
            return value
    return None


_TEXT_KEYS = frozenset({"text", "prompt", "system_prompt", "last_user_text", "first_user_text",
                        "context", "message", "instructions"})


def event_texts(event: Any) -> list[str]:
    """The prompt and message texts an event carries (strings under text-like keys, any depth)."""
    found: dict[str, None] = {}

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, str):
            if key in _TEXT_KEYS and len(value) >= MIN_TEXT:
                found[value] = None
        elif isinstance(value, Mapping):
            for k, v in value.items():
                if k not in ("env", "models", "registry"):
                    walk(v, str(k))
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, key)

    walk(event, None)
    return sorted(found, key=len, reverse=True)


def scrub(value: Any, texts: Sequence[str], secrets: Mapping[str, str]) -> Any:
    """`value` with environment values and (when `texts` is given) event texts replaced."""
    if isinstance(value, str):
        return _scrub_text(value, texts, secrets)
    if isinstance(value, Mapping):
        return {str(k): scrub(v, texts, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, texts, secrets) for v in value]
    return value


def _scrub_text(text: str, texts: Sequence[str], secrets: Mapping[str, str]) -> str:
    for name, secret in secrets.items():
        if len(secret) >= 4 and secret in text:
            text = text.replace(secret, f"<${name}>")
    for sensitive in texts:
        if len(text) >= MIN_TEXT * 2 and text in sensitive:
            return REDACTED  # a piece of a prompt (a prefix, a slice) is prompt text too
        if sensitive in text:
            text = text.replace(sensitive, REDACTED)
    return text


def signal_entries(policy: CompiledPolicy, decision: Decision, *, prompts: bool,
                   texts: Sequence[str], secrets: Mapping[str, str]) -> dict[str, Any]:
    """The external signals the decision used: value, source (live, fallback, error), error text."""
    entries: dict[str, Any] = {}
    for name, value in decision.signals.items():
        spec = policy.signals.get(name)
        if spec is None or not spec.external:
            continue
        error = decision.signal_errors.get(name)
        entry: dict[str, Any] = {"source": "live" if error is None else
                                 ("fallback" if spec.fallback is not None else "error")}
        if error is not None:
            entry["error"] = scrub(error, texts, secrets)
        if spec.kind in TEXT_SIGNALS and not prompts and error is None and isinstance(value, str):
            entry.update(value=None, redacted=True)
        else:
            shown = scrub(value, texts, secrets)
            size = len(canonical(shown).encode())
            entry.update({"value": shown} if size <= SIGNAL_VALUE_LIMIT else
                         {"value": None, "truncated": True, "bytes": size})
        entries[name] = entry
    return entries


def build_record(*, policy: CompiledPolicy, event: Mapping[str, Any], decision: Decision,
                 session: str, seq: int, latency_ms: float, policy_hash: str,
                 settings: LogSettings, secrets: Mapping[str, str], refused: frozenset[str] = frozenset(),
                 moment: datetime | None = None) -> dict[str, Any]:
    """The decision-log record of one evaluated event (docs/observability.md); `refused`: rules
    the executor did not carry out (a confined path out of bounds), not `fired`, no actions."""
    event_type = str(event.get("type") or decision.event_type)
    texts = [] if settings.prompts else event_texts(event)
    fired = set(decision.fired) - refused
    rules = [{"id": r.id, "origin": rule_origin(r), "fired": r.id in fired and not r.shadow}
             for r in evaluated_rules(policy.by_event.get(event_type, ()), decision)]
    actions = [scrub(action_dict(e), texts, secrets) for e in decision.effects if e.rule_id not in refused]
    shadow = []
    for rule_id in dict.fromkeys(e.rule_id for e in decision.shadowed):
        would = [scrub(action_dict(e), texts, secrets) for e in decision.shadowed if e.rule_id == rule_id]
        shadow.append({"id": rule_id, "would": would, "agrees": agrees(would, actions)})
    for rule in policy.by_event.get(event_type, ()):  # a shadow rule that fired with no action
        if rule.shadow and rule.id in fired and all(s["id"] != rule.id for s in shadow):
            shadow.append({"id": rule.id, "would": [], "agrees": True})
    record: dict[str, Any] = {
        "v": VERSION, "time": now_iso(moment), "session": session, "event": event_type, "seq": seq,
        "event_digest": event_digest(event), "policy": policy_hash, "rules": rules,
        "actions": actions,
        "signals": signal_entries(policy, decision, prompts=settings.prompts, texts=texts, secrets=secrets),
        "latency_ms": round(latency_ms, 3), "shadow": shadow,
        "model": chosen_model(event, decision.effects),
    }
    tier, cost = chosen_tier(decision.effects), event_cost(event)
    if tier is not None:
        record["tier"] = tier
    if cost is not None:
        record["cost"] = cost
    if refused:
        record["refused"] = sorted(refused)
    if decision.errors:
        record["errors"] = [scrub(f"{e.code} {e.message}", texts, secrets) for e in decision.errors]
    text = prompt_text(event) if settings.prompts else None
    if text is not None:
        record["text"] = scrub(text, (), secrets)
    return record


# --- the file ---------------------------------------------------------------------------------


class DecisionLog:
    """Appends records to `<directory>/decisions.jsonl`, rotating it by size.

    Several sidecars may share the directory: rotation happens under an exclusive lock on a
    lock file beside the log, and each record is one whole-line append. A failure is reported
    once (the return value of `write`) until a write succeeds again.
    """

    def __init__(self, directory: Path, settings: LogSettings) -> None:
        self.directory = directory
        self.settings = settings
        self.failing = False

    @property
    def path(self) -> Path:
        return self.directory / LOG_NAME

    def write(self, record: Mapping[str, Any]) -> str | None:
        """Append one record; a warning the first time writing fails, else None."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        try:
            self._prepare()
            with self._locked():
                self._rotate_if_full(len(line.encode("utf-8", "backslashreplace")) + 1)
                append_line(self.path, line)
        except OSError as exc:
            if self.failing:
                return None
            self.failing = True
            return (f"decision log: cannot write {self.path}: {exc.strerror or exc}; decisions are "
                    "not logged until it works again (they are still applied)")
        self.failing = False
        return None

    def _prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = self.directory.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.chmod(self.directory, 0o700)

    @contextlib.contextmanager
    def _locked(self) -> Any:
        fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _rotate_if_full(self, adding: int) -> None:
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size == 0 or size + adding <= self.settings.max_bytes:
            return
        keep = self.settings.keep
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.directory / f"decisions.{keep}.jsonl")
        for number in range(keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(self.directory / f"decisions.{number}.jsonl",
                           self.directory / f"decisions.{number + 1}.jsonl")
        os.replace(self.path, self.directory / "decisions.1.jsonl")
        for stale in log_files(self.directory):  # a smaller `keep` than before: drop the extra files
            match = ROTATED_LOG.match(stale.name)
            if match and match.group(1) and int(match.group(1)) > keep:
                with contextlib.suppress(OSError):
                    os.unlink(stale)
