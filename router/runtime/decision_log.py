"""The decision log: one JSON record per live decision, in `<agent dir>/router/log/`.

`build_record` turns one evaluated event into the record (pure: docs/observability.md has the
format); `DecisionLog` appends records as whole lines (0600 files in a 0700 directory) and rotates
by size to `decisions.1.jsonl`, `decisions.2.jsonl`, … Prompt and message text is left out unless
the user's own router.yaml says `decision_log: {prompts: true}`; environment values the policy
reads never appear.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.compile.compiled import CompiledPolicy, CompiledRule
from router.engine.choices import chosen_model, chosen_tier
from router.engine.decision import Decision, Effect
from router.load.paths import LOG_NAME, ROTATED_LOG, log_files
from router.runtime.filelock import read_text, write_whole
from router.runtime.log_privacy import KEEP_FIELDS, Stubber, event_names, literals_of
from router.trust.capabilities import SYMLINK_CODE

VERSION = 2  # 2: text not known to be safe is stubbed (router/runtime/log_privacy.py)
LOCK_NAME = ".decisions.lock"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_KEEP = 5
SIGNAL_VALUE_LIMIT = 4096  # bytes of JSON: a larger signal value is left out (marked `truncated`)
TEXT_SIGNALS = frozenset({"complete", "child"})  # signals whose value is model-written text


@dataclass(frozen=True)
class LogSettings:
    """What the user's own `decision_log:` says (defaults otherwise)."""

    enabled: bool = True
    prompts: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    keep: int = DEFAULT_KEEP
    keep_text: tuple[str, ...] = ()

    @classmethod
    def of(cls, policy: CompiledPolicy | None) -> LogSettings:
        raw = dict(policy.decision_log) if policy is not None else {}
        known = {k: raw[k] for k in ("enabled", "prompts", "max_bytes", "keep") if k in raw}
        fields = raw.get("keep_text") or ()
        return cls(**known, keep_text=tuple(f for f in fields if f in KEEP_FIELDS))

    @property
    def kept(self) -> frozenset[str]:
        """The record fields whose text the user opted in to keep (`prompts: true`: all of them)."""
        return frozenset(KEEP_FIELDS) if self.prompts else frozenset(self.keep_text)


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


def _sha256(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8", "backslashreplace")).hexdigest()


def catalog_digest(models: Any) -> str:
    """The SHA-256 of a model catalog's canonical JSON (it stands in for the catalog in the
    event digest, so a sidecar hashes its catalog once, not once per event)."""
    return _sha256(models)


def event_digest(event: Mapping[str, Any], models_digest: str | None = None) -> str:
    """`sha256:` of the event as canonical JSON, its model catalog (`models`, when not empty)
    replaced by `catalog_digest` of it (`models_digest` when the caller has it already)."""
    models = event.get("models")
    if not models:
        return "sha256:" + _sha256(event)
    return "sha256:" + _sha256({**event, "models": models_digest or catalog_digest(models)})


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
    stopped = next((e.rule_id for e in decision.errors if e.code == "RT404"), None)
    if not decision.fired and stopped is None:
        return list(rules)  # nothing fired, nothing stopped: every rule of the type was evaluated
    fired = set(decision.fired)
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
    """The user's prompt the event carries, if any (recorded only when the user opts in)."""
    for key in ("text", "prompt", "last_user_text"):
        value = event.get(key)
        if isinstance(value, str) and value and event.get("type") != "tool_result":
            return value
    return None


def scrub(value: Any, secrets: Mapping[str, str]) -> Any:
    """`value` with the environment values the policy reads replaced by `<$NAME>` (for the text a
    user opted in to keep: the rest is stubbed whole)."""
    if isinstance(value, str):
        for name, secret in secrets.items():
            if len(secret) >= 4 and secret in value:
                value = value.replace(secret, f"<${name}>")
        return value
    if isinstance(value, Mapping):
        return {str(k): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    return value


@dataclass(frozen=True)
class Shown:
    """How one record shows text: kept (with env values replaced) where the user opted in, else
    stubbed (router/runtime/log_privacy.py)."""

    stubber: Stubber
    keep: frozenset[str]
    secrets: Mapping[str, str]

    def action(self, effect: Effect) -> dict[str, Any]:
        params = (scrub(effect.params, self.secrets) if "actions" in self.keep
                  else self.stubber.params(effect.action, effect.params))
        return {"action": effect.action, "params": params, "rule": effect.rule_id}

    def signal(self, value: Any) -> Any:
        return scrub(value, self.secrets) if "signals" in self.keep else self.stubber.value(value)

    def error(self, text: str) -> str:
        return scrub(text, self.secrets) if "errors" in self.keep else self.stubber.error(text)

    def name(self, text: str) -> str:
        """A model ref or a tier: kept when known to be safe (or opted in with the actions)."""
        return scrub(text, self.secrets) if "actions" in self.keep else self.stubber.text(text)


def signal_entries(policy: CompiledPolicy, decision: Decision, shown: Shown) -> dict[str, Any]:
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
            entry["error"] = shown.error(error)
        if spec.kind in TEXT_SIGNALS and "signals" not in shown.keep and error is None \
                and isinstance(value, str):
            entry.update(value=None, redacted=True)  # a model's answer: not even its digest
            entries[name] = entry
            continue
        value_shown = shown.signal(value)
        if value_shown != value:
            entry["redacted"] = True  # a replay does not take a stubbed value for the real one
        size = len(canonical(value_shown).encode())
        entry.update({"value": value_shown} if size <= SIGNAL_VALUE_LIMIT else
                     {"value": None, "truncated": True, "bytes": size})
        entries[name] = entry
    return entries


def build_record(*, policy: CompiledPolicy, event: Mapping[str, Any], decision: Decision,
                 session: str, seq: int, latency_ms: float, policy_hash: str,
                 settings: LogSettings, secrets: Mapping[str, str], refused: frozenset[str] = frozenset(),
                 moment: datetime | None = None, models_digest: str | None = None,
                 has_shadow: bool | None = None, key: bytes = b"",
                 literals: frozenset[str] | None = None) -> dict[str, Any]:
    """The decision-log record of one evaluated event (docs/observability.md); `refused`: rules
    the executor did not carry out (a confined path out of bounds), not `fired`, no actions.
    `models_digest`, `has_shadow` (whether the event type has shadow rules) and `literals` (of
    `literals_of(policy)`) are what a caller that keeps them per catalog and policy passes, so they
    are not computed per event; `key` is the digest key of the stubs of text."""
    event_type = str(event.get("type") or decision.event_type)
    models = event.get("models")
    stubber = Stubber(key, literals_of(policy) if literals is None else literals, event_names(event),
                      models if isinstance(models, Mapping) else {})
    shown = Shown(stubber, settings.kept, secrets)
    fired = set(decision.fired) - refused
    evaluated = evaluated_rules(policy.by_event.get(event_type, ()), decision)
    listed = fired | refused  # and the shadow rules evaluated (`router shadow-report` counts them)
    if has_shadow is None:
        has_shadow = any(r.shadow for r in evaluated)
    rules = [{"id": r.id, "origin": rule_origin(r), "fired": r.id in fired and not r.shadow}
             for r in evaluated if r.shadow or r.id in listed] if listed or has_shadow else []
    applied = [e for e in decision.effects if e.rule_id not in refused]
    raw_applied = [action_dict(e) for e in applied]
    shadow = []
    for rule_id in dict.fromkeys(e.rule_id for e in decision.shadowed):
        would = [e for e in decision.shadowed if e.rule_id == rule_id]
        shadow.append({"id": rule_id, "would": [shown.action(e) for e in would],
                       "agrees": agrees([action_dict(e) for e in would], raw_applied)})
    for rule in evaluated if fired and has_shadow else ():  # a shadow rule that fired, no action
        if rule.shadow and rule.id in fired and all(s["id"] != rule.id for s in shadow):
            shadow.append({"id": rule.id, "would": [], "agrees": True})
    model = chosen_model(event, decision.effects)
    record: dict[str, Any] = {
        "v": VERSION, "time": now_iso(moment), "session": session, "event": event_type, "seq": seq,
        "event_digest": event_digest(event, models_digest), "policy": policy_hash, "rules": rules,
        "evaluated": len(evaluated), "actions": [shown.action(e) for e in applied],
        "signals": signal_entries(policy, decision, shown),
        "latency_ms": round(latency_ms, 3), "shadow": shadow,
        "model": shown.name(model) if model is not None else None,
    }
    tier, cost = chosen_tier(decision.effects, policy.model_choice), event_cost(event)
    if tier is not None:
        record["tier"] = shown.name(tier)
    if cost is not None:
        record["cost"] = cost
    if refused:
        record["refused"] = sorted(refused)
    if decision.errors:
        record["errors"] = [shown.error(f"{e.code} {e.message}") for e in decision.errors]
    text = prompt_text(event) if "prompt" in settings.kept else None
    if text is not None:
        record["text"] = scrub(text, secrets)
    return record


# --- the file ---------------------------------------------------------------------------------


HOLD_S = 0.25  # a log kept open is closed after this long without a record
KEY_NAME = ".digest-key"  # the key of the stubs' digests (router/runtime/log_privacy.py), 0600
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LinkedDirectory(OSError):
    """A directory of the log's path the engine creates is a symbolic link: never followed."""


class DecisionLog:
    """Appends records to `<directory>/decisions.jsonl`, rotating it by size.

    Several sidecars may share the directory: each append, and the rotation it may cause, happens
    under an exclusive lock on a lock file beside the log, as one whole-line write. With `later`
    (the sidecar's loop's `call_later`) the log stays open while records come, and is closed
    HOLD_S after the last one (a file open for writing keeps its file system from being remounted
    read-only, so it is not held between turns); a log another sidecar rotated, or somebody
    removed, is noticed by its inode and opened again. Without `later` nothing stays open. A
    failure is reported once (the return value of `write`) until a write succeeds again.

    The directories from `root` (the agent dir, the user's own) down to `directory` are the
    engine's: each is created 0700 and opened without following a link (O_NOFOLLOW), and every
    file is opened relative to the last one, so nothing is ever written through a link planted
    on the way. A link there turns the log off for the rest of the run, with one warning.
    """

    def __init__(self, directory: Path, settings: LogSettings,
                 later: Callable[[float, Callable[[], None]], Any] | None = None,
                 root: Path | None = None) -> None:
        self.directory = directory
        self.settings = settings
        self.failing = False
        self.refused = False  # a link on the way: nothing is written in this run
        self.later = later
        self.root = root if root is not None and directory.is_relative_to(root) else directory.parent
        self._dir: int | None = None  # the open log directory (every file is opened relative to it)
        self._log: int | None = None  # the open log (O_APPEND)
        self._lock: int | None = None  # the open lock file (read-only: flock needs no more)
        self._key: bytes | None = None
        self._end = -1  # the log's size after our last append (its last byte is then a newline)
        self._last = 0.0  # when the last record was written
        self._closing = False  # a close is scheduled

    @property
    def path(self) -> Path:
        return self.directory / LOG_NAME

    def write(self, record: Mapping[str, Any]) -> str | None:
        """Append one record; a warning the first time writing fails, else None."""
        if self.refused:
            return None
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        data = (line + "\n").encode("utf-8", "backslashreplace")
        try:
            lock = self._lock_fd()
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._append(data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        except LinkedDirectory as exc:
            self.close()
            self.refused = True
            return (f"decision log: {exc.filename} is a symbolic link; it is not followed and "
                    f"decisions are not logged in this run (they are still applied) [{SYMLINK_CODE}]")
        except OSError as exc:
            self.close()
            if self.failing:
                return None
            self.failing = True
            return (f"decision log: cannot write {self.path}: {exc.strerror or exc}; decisions are "
                    "not logged until it works again (they are still applied)")
        finally:
            self._hold()
        self.failing = False
        return None

    def digest_key(self) -> bytes:
        """The key of the stubs' digests, kept in the log's directory (0600) so that stubs of the
        same text are equal across sidecars; a key of this process when it cannot be read."""
        if self._key is None:
            try:
                self._key = self._read_key()
            except OSError:
                self._key = os.urandom(32)
            finally:
                self._hold()
        return self._key

    def close(self) -> None:
        for fd in (self._log, self._lock, self._dir):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._log = self._lock = self._dir = None

    def _hold(self) -> None:
        """Keep the files open until HOLD_S pass without a record (close now without `later`)."""
        if self.later is None:
            self.close()
            return
        self._last = time.monotonic()
        if not self._closing:
            self._closing = True
            self.later(HOLD_S, self._close_if_idle)

    def _close_if_idle(self) -> None:
        idle = time.monotonic() - self._last
        if idle < HOLD_S and self.later is not None:
            self.later(HOLD_S - idle, self._close_if_idle)
            return
        self._closing = False
        self.close()

    def _dir_fd(self) -> int:
        """The log's directory, each directory below `root` created 0700 and opened without
        following a link (LinkedDirectory when one is a link)."""
        if self._dir is not None:
            return self._dir
        try:  # the user's own directory (a link there is theirs), made when missing
            fd = os.open(self.root, _DIR_FLAGS)
        except FileNotFoundError:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.root, _DIR_FLAGS)
        shown = self.root
        try:
            for part in self.directory.relative_to(self.root).parts:
                shown = shown / part
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                try:
                    child = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(
                            os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                        raise LinkedDirectory(errno.ELOOP, "is a symbolic link", str(shown)) from None
                    raise
                os.close(fd)
                fd = child
                info = os.fstat(fd)
                if info.st_uid == os.getuid() and info.st_mode & 0o077:
                    os.fchmod(fd, 0o700)
        except BaseException:
            os.close(fd)
            raise
        self._dir = fd
        return fd

    def _open(self, name: str, flags: int) -> int:
        """A regular file of the log's directory (0600), never through a link."""
        fd = os.open(name, flags | _FILE_FLAGS, 0o600, dir_fd=self._dir_fd())
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", str(self.directory / name))
            if info.st_uid == os.getuid() and info.st_mode & 0o077:
                os.fchmod(fd, 0o600)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _read_key(self) -> bytes:
        for _ in range(3):
            try:
                fd = self._open(KEY_NAME, os.O_RDONLY)
            except FileNotFoundError:
                self._make_key()
                continue
            with os.fdopen(fd, "rb") as handle:
                key = handle.read(64)
            if len(key) >= 32:
                return key
            raise OSError(errno.EINVAL, "the digest key is too short", str(self.directory / KEY_NAME))
        raise OSError(errno.ENOENT, "the digest key could not be made", str(self.directory / KEY_NAME))

    def _make_key(self) -> None:
        """A new key, written whole under a temporary name, then linked into place (another
        sidecar making one at the same time wins or loses whole)."""
        directory = self._dir_fd()
        temp = f"{KEY_NAME}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=directory)
        fd = self._open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            write_whole(fd, os.urandom(32), 0, self.directory / temp)
        finally:
            os.close(fd)
        try:
            os.link(temp, KEY_NAME, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
        except FileExistsError:
            pass
        finally:
            os.unlink(temp, dir_fd=directory)

    def _lock_fd(self) -> int:
        """The lock file, opened again when it is not the one at its path any more."""
        if self._lock is not None and not self._same_file(self._lock, LOCK_NAME):
            self.close()
        if self._lock is None:
            self._lock = self._open(LOCK_NAME, os.O_RDONLY | os.O_CREAT)
        return self._lock

    def _append(self, data: bytes) -> None:
        fd = self._log_fd()
        size = os.fstat(fd).st_size
        if size > 0 and size + len(data) > self.settings.max_bytes:
            self._rotate()
            fd, size = self._log_fd(), 0
        if size > 0 and size != self._end and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # another program left the last line without its newline
        self._end = size + write_whole(fd, data, size, self.path)

    def _log_fd(self) -> int:
        """The log, opened again when another sidecar rotated it or it was removed."""
        if self._log is not None and not self._same_file(self._log, LOG_NAME):
            os.close(self._log)
            self._log = None
        if self._log is None:
            self._log = self._open(LOG_NAME, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            self._end = -1
        return self._log

    def _rotate(self) -> None:
        if self._log is not None:
            os.close(self._log)
            self._log = None
        keep, directory = self.settings.keep, self._dir_fd()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"decisions.{keep}.jsonl", dir_fd=directory)
        for number in range(keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"decisions.{number}.jsonl", f"decisions.{number + 1}.jsonl",
                           src_dir_fd=directory, dst_dir_fd=directory)
        os.replace(LOG_NAME, "decisions.1.jsonl", src_dir_fd=directory, dst_dir_fd=directory)
        for name in os.listdir(directory):  # a smaller `keep` than before: drop the extra files
            match = ROTATED_LOG.match(name)
            if match and match.group(1) and int(match.group(1)) > keep:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=directory)

    def _same_file(self, fd: int, name: str) -> bool:
        try:
            at_path = os.stat(name, dir_fd=self._dir_fd(), follow_symlinks=False)
        except OSError:
            return False
        mine = os.fstat(fd)
        return (at_path.st_ino, at_path.st_dev) == (mine.st_ino, mine.st_dev)
