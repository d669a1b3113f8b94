"""The executor: where the side effects of a decision are carried out.

It computes external signals (each kind's file in router/actions/signals/ computes it, with the
means router/runtime/signal_local.py offers: calls through the bridge, child `pi` processes,
files, slots), carries
out the actions that run here with their file's handler (router/actions/<name>.py: logs, audit
records, saved values), after checking a project rule's paths, and turns the remaining effects
into actions the bridge applies inside Pi. Failures never raise: they become warnings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
import types
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.actions import runner, signals
from router.actions._local import Failure, Local
from router.actions._registry import declarations
from router.diagnostics.code_names import ACTION_FAILED
from router.engine.decision import Decision, Effect, SignalOutcome, SignalRequest
from router.lang.functions import cap_level
from router.runtime import loop
from router.runtime.filelock import REMOVE, append_line, is_symlink_error, update_json_values
from router.runtime.log_line import escape_line
from router.runtime.signal_local import ExecutorLocal
from router.trust.capabilities import (
    CAPABILITY_CODES,
    CODES,
    FS_READ,
    FS_WRITE,
    PROCESS_SPAWN,
    SYMLINK_CODE,
    Refused,
    check_rendered,
    confined_path,
    spawn_refusal,
)

BridgeCall = Callable[[str, dict[str, Any], float], Awaitable[Any]]
ORDER = {"model": 0, "thinking": 1}
SIGNAL_MARGIN_S = 0.5  # past a signal's announced budget before it is stopped (the bridge waits 1 s more)


def budget_ms(request: SignalRequest) -> int:
    """The longest computing `request` may take (the bridge extends the event's deadline by it)."""
    return signals.budget_ms(request)


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
        """The computation of each signal kind the executor runs or asks the bridge for (each
        kind's file in router/actions/signals/)."""
        found = {kind: signals.computation(kind) for kind in signals.registry()}
        local = ExecutorLocal(self)
        return {kind: functools.partial(compute, local) for kind, compute in found.items() if compute}

    async def _compute(self, request: SignalRequest) -> SignalOutcome:
        compute = signals.computation(request.kind)
        if compute is None:
            return SignalOutcome(error=f"unknown signal kind {request.kind!r}")
        outcome = compute(ExecutorLocal(self), request)
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
            if effect.rule_id not in refused:
                self._carry_out(effect, targets.get(id(effect), {}), applied)
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

    def _carry_out(self, effect: Effect, checked: dict[str, Path], applied: Applied) -> None:
        """One effect where its action runs (its file's declaration): the interpreter's are done,
        the executor's are carried out here (a failure is a warning), the rest go to the bridge."""
        runs, handler = runner(effect.action)
        if runs == "interpreter":
            return
        if runs == "bridge":
            applied.actions.append(_for_bridge(effect))
            return
        failure = self._local(effect, handler, checked)
        if failure:
            problem, code = failure
            text = f"rule {effect.rule_id}: {effect.action} failed: {problem} [{code}]"
            applied.warnings.append(text)
            self.log(text)

    def effect_handlers(self) -> dict[str, Callable[[dict[str, Any], Local], Failure | None]]:
        """The handler of each action the executor carries out itself (its file's `run`)."""
        return {name: found.handler() for name, found in declarations().items()
                if found.spec.runs == "executor"}

    def _local(self, effect: Effect, handler: Callable[[dict[str, Any], Local], Failure | None],
               checked: dict[str, Path]) -> Failure | None:
        """Carry out a local action; on failure, what went wrong and its code (RT501, RT607)."""
        params = effect.params
        try:
            return handler(params, _Local(self, effect.rule_id, checked))
        except OSError as exc:  # the file as the rule names it: `$VAR` expanded is an environment value
            return _os_problem(exc, str(params.get('file') or ''))
        except (TypeError, ValueError) as exc:
            return str(exc), ACTION_FAILED

    def release(self, name: str) -> None:
        """Give a slot back (closing its lock file releases the lock)."""
        held = self.slots.pop(name, None)
        if held is not None:
            os.close(held[1])

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


@dataclass(frozen=True)
class _Local:
    """The executor as one effect's handler sees it (router/actions/_local.py)."""

    executor: Executor
    rule_id: str
    checked: Mapping[str, Path]

    def log(self, text: str) -> None:
        self.executor.log(text)

    def append(self, path: Path, line: str, *, named: str) -> Failure | None:
        return self.executor._append(path, line, named=named)

    def escape(self, text: str) -> str:
        return escape_line(text)

    def update_json(self, path: Path, updates: list[tuple[list[str], Any]], *, backup: bool) -> None:
        update_json_values(path, updates, backup=backup)

    def remove_json(self, path: Path, keys: list[str], *, backup: bool) -> None:
        if path.exists():
            update_json_values(path, [(keys, REMOVE)], backup=backup)

    def release(self, name: str) -> None:
        self.executor.release(name)
