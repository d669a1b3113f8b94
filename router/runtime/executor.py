"""The executor: the only module with side effects.

It computes external signals (classifier and completion calls through the bridge, child `pi`
processes), writes logs, audit records and saved values, and turns the remaining effects into
actions the bridge applies inside Pi. Failures never raise: they become warnings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import time
import types
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.actions.signal_kinds import LOCAL_BUDGET_MS, SIGNAL_KINDS
from router.engine.decision import Decision, Effect, SignalOutcome, SignalRequest
from router.lang.functions import cap_level
from router.lang.jsonout import dumps
from router.runtime import loop
from router.runtime.filelock import (
    JsonFileError,
    append_line,
    is_symlink_error,
    load_json,
    read_text,
    update_json_values,
)
from router.runtime.log_line import escape_line
from router.trust.capabilities import (
    CAPABILITY_CODES,
    CODES,
    FS_READ,
    FS_WRITE,
    PROCESS_SPAWN,
    ROUTER_LOG,
    SYMLINK_CODE,
    Refused,
    check_rendered,
    confined_path,
    spawn_refusal,
)

BridgeCall = Callable[[str, dict[str, Any], float], Awaitable[Any]]
CHILD_FLAGS = ("--print", "--no-session", "--no-tools", "--no-extensions", "--no-skills",
               "--no-prompt-templates", "--no-themes", "--no-context-files", "--thinking", "off")
ORDER = {"model": 0, "thinking": 1}
SIGNAL_MARGIN_S = 0.5  # past a signal's announced budget before it is stopped (the bridge waits 1 s more)
ACTION_FAILED = "RT501"  # a local action the executor could not carry out
INTERPRETER_ACTIONS = frozenset({"set", "unset"})  # state changes, already applied by the interpreter


def budget_ms(request: SignalRequest) -> int:
    """The longest computing `request` may take (the bridge extends the event's deadline by it)."""
    params = request.params
    timeout = _timeout(request)
    if request.kind == "probe":
        models = params.get("models") or []
        calls = (1 if isinstance(models, str) else len(models)) + (1 if params.get("classifier") else 0)
        return timeout * max(calls, 1)
    return timeout


@dataclass
class Applied:
    """What the bridge must do for one decision, and what went wrong locally."""

    actions: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    refused: frozenset[str] = frozenset()  # rules none of whose effects were carried out


class Executor:
    """Carries decisions out. `bridge` sends a request to the Pi side and awaits the answer."""

    def __init__(self, bridge: BridgeCall, *, cwd: str, log_file: Path | None = None) -> None:
        self.bridge = bridge
        self.cwd = cwd
        self.log_file = log_file
        self.slots: dict[str, tuple[int, int]] = {}
        self.secrets: dict[str, str] = {}  # environment values the policy reads: never logged
        self.failing: set[str] = set()  # files whose last append failed (the user was told once)
        self.notices: list[str] = []  # refusals met while computing signals, router-log failures
        self.reported: set[tuple[str | None, str]] = set()  # (rule, code) of evaluation errors warned

    # --- signals ------------------------------------------------------------------------------

    async def compute(self, request: SignalRequest, within: float | None = None) -> SignalOutcome:
        """Compute one external signal; failures come back as an outcome with an error text.
        `within`: the seconds announced for it (`budget_ms`); past them and a half-second margin
        (the bridge was told a second more) the computation is stopped and fails."""
        started = time.perf_counter()
        try:
            request = self._confine(request)
        except (Refused, ValueError) as exc:
            refused = exc if isinstance(exc, Refused) else Refused(CODES[FS_READ], str(exc))
            self._notice(f"rule '{request.rule_id}': signal {request.name} refused: {refused.message} "
                         f"[{refused.code}]")
            return SignalOutcome(error=f"refused: {refused.message} [{refused.code}]")
        try:
            work = self._compute(request)
            outcome = await (work if within is None else loop.bounded(work, within + SIGNAL_MARGIN_S))
        except TimeoutError:
            outcome = SignalOutcome(error=f"no result within its budget of {round((within or 0) * 1000)} ms")
        except OSError as exc:
            outcome = SignalOutcome(error=_link_coded(*_os_problem(exc)))
        except Exception as exc:
            outcome = SignalOutcome(error=f"{type(exc).__name__}: {exc}")
        elapsed = (time.perf_counter() - started) * 1000
        return SignalOutcome(outcome.result, outcome.error, round(elapsed, 1))

    def signal_handlers(self) -> dict[str, Callable[[SignalRequest], Any]]:
        """The computation of each signal kind the executor runs or asks the bridge for."""
        return {"classify": self._classify, "complete": self._complete, "child": self._child,
                "load": self._load, "read": self._read, "records": self._records, "slot": self._slot,
                "probe": self._probe, "ask": self._ask, "which": self._which}

    async def _compute(self, request: SignalRequest) -> SignalOutcome:
        handler = self.signal_handlers().get(request.kind)
        if handler is None:
            return SignalOutcome(error=f"unknown signal kind {request.kind!r}")
        outcome = handler(request)
        return await outcome if isinstance(outcome, types.CoroutineType) else outcome  # type: ignore[no-any-return]

    def _confine(self, request: SignalRequest) -> SignalRequest:
        """Check a confined request's fields (paths resolved, links followed) before any I/O; the
        request with the checked paths. Refused when one is out of the project's bounds."""
        conf = request.confinement
        if conf is None or not request.confined:
            return request
        params = dict(request.params)
        for name, capability in sorted(request.confined.items()):
            value = params.get(name)
            label = f"{request.kind}.{name}"
            if value in (None, ""):
                continue
            if capability == PROCESS_SPAWN:
                raise Refused(CODES[PROCESS_SPAWN], spawn_refusal(label, value))
            if label == "child.system_prompt":  # Pi reads a system prompt that names a file
                candidate = Path(self.cwd or ".") / str(value)
                if os.path.exists(candidate):
                    confined_path(str(candidate), conf, FS_READ, label=label)
                continue
            params[name] = str(confined_path(str(value), conf, capability, label=label))
        return dataclasses.replace(request, params=params)

    def _notice(self, text: str) -> None:
        self.notices.append(text)
        self.log(text)

    async def _classify(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        timeout_ms = _timeout(request)
        reply = await self.bridge("classify", {
            "model": params.get("model"), "questions": request.questions,
            "state": params.get("state") or {}, "timeoutMs": timeout_ms,
            "maxRetries": _int(params.get("max_retries"), 0)}, timeout_ms / 1000 + 1.0)
        if not isinstance(reply, dict):
            return SignalOutcome(error="classifier returned no answer")
        if reply.get("stopReason") in ("error", "aborted") or reply.get("error"):
            return SignalOutcome(error=str(reply.get("errorMessage") or reply.get("error")
                                           or reply.get("stopReason")))
        answers = reply.get("answers") or {}
        missing = [name for name in request.questions if name not in answers]
        if missing:
            return SignalOutcome(error=f"classifier gave no answer for {', '.join(missing)}")
        return SignalOutcome(result=answers)

    async def _complete(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        timeout_ms = _timeout(request)
        reply = await self.bridge("complete", {
            "model": params.get("model"), "systemPrompt": params.get("system_prompt"),
            "prompt": params.get("prompt"), "timeoutMs": timeout_ms}, timeout_ms / 1000 + 1.0)
        if not isinstance(reply, dict):
            return SignalOutcome(error="completion failed: no answer from Pi")
        if reply.get("error"):
            return SignalOutcome(error=str(reply["error"]))
        return SignalOutcome(result=str(reply.get("text") or ""))

    async def _child(self, request: SignalRequest) -> SignalOutcome:
        """A tool-less `pi --print`: the prompt goes to its stdin, the system prompt to a private
        file (`--system-prompt` takes a path), so neither shows in the process table."""
        params = request.params
        pi_bin = str(params.get("pi_bin") or _which("pi") or "pi")
        if not _is_pi(pi_bin):
            return SignalOutcome(error=f"child: {pi_bin!r} is not a pi binary (its name must be pi, "
                                 "pi-… or pi.…); the rules run no other program")
        argv = [str(pi_bin), *CHILD_FLAGS]
        for flag in ("provider", "model"):
            if params.get(flag):
                argv += [f"--{flag}", str(params[flag])]
        prompt = str(params.get("prompt") or "").encode()
        with _private_file(str(params.get("system_prompt") or "")) as system_prompt:
            if system_prompt is not None:
                argv += ["--system-prompt", str(system_prompt)]
            return await self._run_child(argv, prompt, _timeout(request))

    async def _run_child(self, argv: list[str], stdin: bytes, timeout_ms: int) -> SignalOutcome:
        """Run `argv` with `stdin` written and closed; kill its process group at the deadline."""
        try:
            done = await loop.run_process(argv, stdin, cwd=self.cwd or None, timeout=timeout_ms / 1000)
        except OSError as exc:  # the name, not the path: the path may come from the environment
            return SignalOutcome(error=f"child failed to start: {Path(argv[0]).name}: {exc.strerror or exc}")
        if done is None:
            return SignalOutcome(error=f"timeout after {timeout_ms}ms")
        code, out, err = done
        if code != 0:
            detail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            return SignalOutcome(error=f"child exited with code {code}"
                                 + (f": {detail[0]}" if detail[0] else ""))
        return SignalOutcome(result=out.decode(errors="replace").strip())

    def _which(self, request: SignalRequest) -> SignalOutcome:
        """A program's path: a bare name from PATH (as the child signal finds pi), a path as it is."""
        name = str(request.params.get("name") or "")
        if not name:
            return SignalOutcome(error="which: no program name")
        if "/" in name:
            return SignalOutcome(result=str(Path(name).expanduser()))
        found = _which(name)
        return SignalOutcome(result=found) if found else SignalOutcome(error=f"which: {name} is not on PATH")

    def _load(self, request: SignalRequest) -> SignalOutcome:
        target = _path(request.params.get("file"))
        if target is None:
            return SignalOutcome(result=None)
        try:
            data = load_json(target, nofollow=request.confinement is not None)
        except JsonFileError as exc:
            return SignalOutcome(error=str(exc))
        key = request.params.get("key")
        if key is None:
            return SignalOutcome(result=data)
        return SignalOutcome(result=data.get(str(key)) if isinstance(data, dict) else None)

    def _records(self, request: SignalRequest) -> SignalOutcome:
        target = _path(request.params.get("file"))
        records = []
        try:
            lines = read_text(target, nofollow=request.confinement is not None).splitlines() if target else []
        except FileNotFoundError:
            lines = []
        days = request.params.get("days")
        since = None
        if days not in (None, ""):
            try:
                since = datetime.now(UTC).timestamp() - float(days) * 86400
            except (TypeError, ValueError):
                return SignalOutcome(error=f"days must be a number, got {days!r}")
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if since is not None and _timestamp(record) < since:
                continue
            records.append(record)
        return SignalOutcome(result=records[-_int(request.params.get("limit"), 100000):])

    async def _slot(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        name = str(params.get("name") or "turn")
        if name in self.slots:
            return SignalOutcome(result=self.slots[name][0])
        directory = _path(params.get("dir"))
        count = _int(params.get("max"), 1)
        if directory is None:
            return SignalOutcome(error="slot: no directory")
        directory.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + _timeout(request) / 1000
        while True:
            taken = _try_slots(directory, count)
            if taken is not None:
                self.slots[name] = taken
                return SignalOutcome(result=taken[0])
            if time.monotonic() >= deadline:
                return SignalOutcome(result=None)
            await loop.sleep(0.05)

    def release(self, name: str) -> None:
        """Give a slot back (closing its lock file releases the lock)."""
        held = self.slots.pop(name, None)
        if held is not None:
            os.close(held[1])

    async def _probe(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        timeout_ms = _timeout(request)
        results = []
        if params.get("classifier"):
            started = time.perf_counter()
            reply = await self._probe_classifier(params["classifier"], params.get("question"), timeout_ms)
            results.append({"ref": params["classifier"], "kind": "classifier", "ok": reply.error is None,
                            "error": reply.error, "ms": round((time.perf_counter() - started) * 1000)})
        models = params.get("models") or []
        for ref in [models] if isinstance(models, str) else models:
            started = time.perf_counter()
            reply = await self._probe_model(ref, params.get("prompt"), timeout_ms)
            results.append({"ref": ref, "kind": "model", "ok": reply.error is None, "error": reply.error,
                            "ms": round((time.perf_counter() - started) * 1000)})
        return SignalOutcome(result=results)

    async def _probe_classifier(self, ref: Any, question: Any, timeout_ms: int) -> SignalOutcome:
        """One classifier call with the question the policy words (`probe.question`)."""
        if not isinstance(question, dict) or not question.get("instructions"):
            return SignalOutcome(error="probe: the policy declares no classifier question")
        return await self._classify(SignalRequest("probe", "classify", {
            "model": ref, "timeout_ms": timeout_ms},
            {"probe": {"type": "choice", "instructions": str(question["instructions"]),
                       "criteria": question.get("criteria")}}))

    async def _probe_model(self, ref: Any, prompt: Any, timeout_ms: int) -> SignalOutcome:
        """One tiny completion with the prompt the policy words (`probe.prompt`)."""
        if not prompt:
            return SignalOutcome(error="probe: the policy declares no prompt")
        return await self._complete(SignalRequest("probe", "complete", {
            "model": ref, "prompt": str(prompt), "timeout_ms": timeout_ms}))

    def _read(self, request: SignalRequest) -> SignalOutcome:
        target = _path(request.params.get("file"))
        try:
            text = read_text(target, nofollow=request.confinement is not None) if target else ""
        except FileNotFoundError:
            text = ""
        lines = [line for line in text.splitlines() if line.strip()]
        return SignalOutcome(result=lines[-_int(request.params.get("tail"), 10):])

    async def _ask(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        timeout_ms = _timeout(request)
        reply = await self.bridge("ask", {"select": params.get("select"), "title": params.get("title"),
                                          "placeholder": params.get("placeholder")},
                                  timeout_ms / 1000)
        return SignalOutcome(result=(reply or {}).get("value") if isinstance(reply, dict) else None)

    # --- effects ------------------------------------------------------------------------------

    def apply(self, decision: Decision) -> Applied:
        """Do the local effects; return the ones the bridge applies, model before thinking.

        A rule with a confined path out of the project's bounds (links followed) is refused as a
        whole: none of its effects of this decision is carried out, and the user is told.
        """
        applied = Applied(warnings=self.notices)
        self.notices = []
        applied.warnings += [f"{e.message} [{e.code}]" for e in decision.errors if e.code in CAPABILITY_CODES]
        applied.warnings += self.evaluation_warnings(decision)
        targets, refused = self._check_confined(decision.effects)
        applied.refused = frozenset(refused)
        for rule_id, refusal in refused.items():
            text = f"rule '{rule_id}' refused: {refusal.message} [{refusal.code}]"
            applied.warnings.append(text)
            self.log(text)
        for effect in decision.effects:
            if effect.rule_id in refused:
                continue
            if effect.action in INTERPRETER_ACTIONS:
                continue
            if effect.action in self.effect_handlers():
                failure = self._local(effect, targets.get(id(effect), {}))
                if failure:
                    problem, code = failure
                    text = f"rule {effect.rule_id}: {effect.action} failed: {problem} [{code}]"
                    applied.warnings.append(text)
                    self.log(text)
            else:
                applied.actions.append(_for_bridge(effect))
        applied.actions.sort(key=lambda a: ORDER.get(a["action"], 2))
        return applied

    def evaluation_warnings(self, decision: Decision) -> list[str]:
        """The decision's evaluation errors (RT4xx) as warnings, once per rule and code until the
        policy is reloaded (the server logs every occurrence)."""
        fresh = []
        for error in decision.errors:
            key = (error.rule_id, error.code)
            if error.code.startswith("RT4") and key not in self.reported:
                self.reported.add(key)
                fresh.append(f"{error.message} [{error.code}]")
        return fresh

    def _check_confined(self, effects: tuple[Effect, ...]) -> tuple[dict[int, dict[str, Path]],
                                                                    dict[str, Refused]]:
        """The checked paths of confined effects (by effect), and the rules refused (by rule id)."""
        targets: dict[int, dict[str, Path]] = {}
        refused: dict[str, Refused] = {}
        for effect in effects:
            if effect.confinement is None or not effect.confined or effect.rule_id in refused:
                continue
            try:
                targets[id(effect)] = check_rendered(effect.action, effect.params, effect.confined,
                                                     effect.confinement, resolve=True)
            except Refused as exc:
                refused[effect.rule_id] = exc
            except ValueError as exc:  # a path the OS cannot name (a NUL byte)
                refused[effect.rule_id] = Refused(CODES[FS_WRITE], f"{effect.action}: {exc}")
        return targets, refused

    def effect_handlers(self) -> dict[str, Callable[[Effect, dict[str, Path]], tuple[str, str] | None]]:
        """The local effect of each action the executor carries out itself: on failure, what went
        wrong and its code (RT501, RT607)."""
        return {"log": self._log_effect, "audit": self._audit, "save": self._save, "release": self._release}

    def _local(self, effect: Effect, checked: dict[str, Path] | None = None) -> tuple[str, str] | None:
        """Carry out a local action; on failure, what went wrong and its code (RT501, RT607)."""
        params = effect.params
        try:
            return self.effect_handlers()[effect.action](effect, checked or {})
        except OSError as exc:  # the file as the rule names it: `$VAR` expanded is an environment value
            return _os_problem(exc, str(params.get('file') or ''))
        except (TypeError, ValueError) as exc:
            return str(exc), ACTION_FAILED

    def _log_effect(self, effect: Effect, checked: dict[str, Path]) -> tuple[str, str] | None:
        params = effect.params
        target = params.get("file")
        if target == ROUTER_LOG:
            self.log(f"rule {effect.rule_id}: {params.get('text', '')}")
        elif (path := checked.get("file") or _path(target)) is not None:
            return self._append(path, escape_line(str(params.get("text", ""))), named=str(target))
        return None

    def _audit(self, effect: Effect, checked: dict[str, Path]) -> tuple[str, str] | None:
        params = effect.params
        target = checked.get("file") or _path(params.get("file"))
        if target is None:
            return "no audit file", ACTION_FAILED
        record = params.get("record")
        if params.get("stamp", True) and isinstance(record, dict) and "timestamp" not in record:
            record = {"timestamp": _now_iso(), **record}
        return self._append(target, dumps(record), named=str(params.get("file") or ""))

    def _save(self, effect: Effect, checked: dict[str, Path]) -> tuple[str, str] | None:
        params = effect.params
        target = checked.get("file") or _path(params.get("file"))
        if target is None:
            return "no file", ACTION_FAILED
        updates = _save_updates(params)
        if isinstance(updates, str):
            return updates, ACTION_FAILED
        update_json_values(target, updates, backup=params.get("backup") is True)
        return None

    def _release(self, effect: Effect, checked: dict[str, Path]) -> tuple[str, str] | None:
        self.release(str(effect.params.get("name") or "turn"))
        return None

    def log(self, text: str) -> None:
        """A line in the router's own log (failures of the router itself); environment values the
        policy reads are never written, whatever message carries them, and the text is one line
        whatever it holds (`escape_line`)."""
        if self.log_file is not None:
            line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {escape_line(self.redact(text))}"
            problem = self.append(self.log_file, line)
            if problem:
                self.notices.append(f"router log: {problem}")

    def redact(self, text: str) -> str:
        """`text` with every value in `secrets` (the environment the policy reads) replaced."""
        for name, value in self.secrets.items():
            if len(value) >= 4 and value in text:
                text = text.replace(value, f"<${name}>")
        return text

    def append(self, path: Path, line: str, *, named: str = "") -> str | None:
        """Append a whole line (or nothing); a failure is reported once per file until one succeeds,
        naming the file as the rule does (`named`: `$VAR` expanded would be an environment value)."""
        failure = self._append(path, line, named=named)
        return _link_coded(*failure) if failure else None

    def _append(self, path: Path, line: str, *, named: str = "") -> tuple[str, str] | None:
        """`append`, the failure with its code: RT607 for a link, else RT501."""
        key = str(path)
        try:
            append_line(path, line)
        except OSError as exc:
            if is_symlink_error(exc):
                return _os_problem(exc, named or str(path))
            if key in self.failing:
                return None
            self.failing.add(key)
            return (f"cannot write {named or path}: {exc.strerror or exc}; lines are dropped whole "
                    "until it works again", ACTION_FAILED)
        self.failing.discard(key)
        return None


def _for_bridge(effect: Effect) -> dict[str, Any]:
    params = effect.params
    if effect.action == "thinking" and isinstance(params, dict):
        level = params.get("level")
        with contextlib.suppress(Exception):
            level = cap_level(level, params.get("ceiling"))
        params = {"level": level}
    return {"action": effect.action, "params": params, "rule": effect.rule_id}


def _link_coded(problem: str, code: str) -> str:
    """A file problem as text, with its code when it is a refused link (RT607)."""
    return f"{problem} [{code}]" if code == SYMLINK_CODE else problem


def _os_problem(exc: OSError, named: str = "") -> tuple[str, str]:
    """What went wrong with a file, naming it as the rule does (`$VAR` expanded is an environment
    value), and its code: RT607 for a link the router does not follow, else RT501."""
    filename = named or getattr(exc, "filename", "") or ""
    if is_symlink_error(exc):
        return f"{filename} is a symbolic link, which the router does not follow here", SYMLINK_CODE
    return f"{exc.strerror or exc} ({filename})", ACTION_FAILED


def _save_updates(params: dict[str, Any]) -> list[tuple[list[str], Any]] | str:
    """The (key path, value) pairs of a `save`: key, path, or values (dotted paths); or a problem."""
    values = params.get("values")
    if isinstance(values, dict):
        pairs = [(str(name).split("."), value) for name, value in values.items()]
    else:
        path, key = params.get("path"), params.get("key")
        keys = [str(k) for k in path] if isinstance(path, list) else \
            (str(path).split(".") if path else ([str(key)] if key not in (None, "") else []))
        pairs = [(keys, params.get("value"))]
    if not pairs or any(not keys or "" in keys for keys, _ in pairs):
        return "no key to save under (key, path or values rendered empty)"
    return pairs


def _is_pi(path: str) -> bool:
    name = Path(path).name
    return name == "pi" or name.startswith(("pi-", "pi.", "pi_"))


def _try_slots(directory: Path, count: int) -> tuple[int, int] | None:
    for number in range(count):
        fd = os.open(directory / f"slot-{number}.lock",
                     os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return number, fd
    return None


def _timestamp(record: Any) -> float:
    stamp = record.get("timestamp") if isinstance(record, dict) else None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _path(value: Any) -> Path | None:
    if not value or not isinstance(value, str):
        return None
    return Path(os.path.expandvars(value)).expanduser()


def _timeout(request: SignalRequest) -> int:
    """The request's time budget: its kind's timeout field when valid, else the kind's default."""
    kind = SIGNAL_KINDS.get(request.kind)
    if kind is None:
        return LOCAL_BUDGET_MS
    given = request.params.get(kind.timeout_field) if kind.timeout_field else None
    return _int(given, kind.timeout_ms, allow_zero=kind.zero_timeout)


def _int(value: Any, default: int, *, allow_zero: bool = False) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number > 0 or (allow_zero and number == 0) else default


def _which(name: str) -> str | None:
    """`shutil.which`, imported on first use (a sidecar's start does without shutil)."""
    import shutil

    return shutil.which(name)


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[Path | None]:
    """`text` in a file only this user can read (0600, in a 0700 directory), removed afterwards;
    None for an empty text."""
    if not text:
        yield None
        return
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="router-child-"))
    try:
        path = directory / "system-prompt.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)
