"""The executor: the only module with side effects.

It computes external signals (classifier and completion calls through the bridge, child `pi`
processes), writes logs, audit records and saved values, and turns the remaining effects into
actions the bridge applies inside Pi. Failures never raise: they become warnings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal as signals
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from router.decision import Decision, Effect, SignalOutcome, SignalRequest
from router.filelock import append_line, read_json, update_json
from router.functions import cap_level

BridgeCall = Callable[[str, dict[str, Any], float], Awaitable[Any]]
CHILD_FLAGS = ("--print", "--no-session", "--no-tools", "--no-extensions", "--no-skills",
               "--no-prompt-templates", "--no-themes", "--no-context-files", "--thinking", "off")
LOCAL_ACTIONS = frozenset({"log", "audit", "save", "set", "unset"})
ORDER = {"model": 0, "thinking": 1}


@dataclass
class Applied:
    """What the bridge must do for one decision, and what went wrong locally."""

    actions: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Executor:
    """Carries decisions out. `bridge` sends a request to the Pi side and awaits the answer."""

    def __init__(self, bridge: BridgeCall, *, cwd: str, log_file: Path | None = None) -> None:
        self.bridge = bridge
        self.cwd = cwd
        self.log_file = log_file

    # --- signals ------------------------------------------------------------------------------

    async def compute(self, request: SignalRequest) -> SignalOutcome:
        """Compute one external signal; failures come back as an outcome with an error text."""
        started = time.perf_counter()
        try:
            if request.kind == "classify":
                outcome = await self._classify(request)
            elif request.kind == "complete":
                outcome = await self._complete(request)
            elif request.kind == "child":
                outcome = await self._child(request)
            elif request.kind == "load":
                outcome = self._load(request)
            elif request.kind == "read":
                outcome = self._read(request)
            elif request.kind == "ask":
                outcome = await self._ask(request)
            else:
                outcome = SignalOutcome(error=f"unknown signal kind {request.kind!r}")
        except Exception as exc:
            outcome = SignalOutcome(error=f"{type(exc).__name__}: {exc}")
        elapsed = (time.perf_counter() - started) * 1000
        return SignalOutcome(outcome.result, outcome.error, round(elapsed, 1))

    async def _classify(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        timeout_ms = _int(params.get("timeout_ms"), 4000)
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
        timeout_ms = _int(params.get("timeout_ms"), 45000)
        reply = await self.bridge("complete", {
            "model": params.get("model"), "systemPrompt": params.get("system_prompt"),
            "prompt": params.get("prompt"), "timeoutMs": timeout_ms}, timeout_ms / 1000 + 1.0)
        if not isinstance(reply, dict) or reply.get("error"):
            return SignalOutcome(error=str((reply or {}).get("error") or "completion failed"))
        return SignalOutcome(result=str(reply.get("text") or ""))

    async def _child(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        timeout_ms = _int(params.get("timeout_ms"), 45000)
        pi_bin = params.get("pi_bin") or shutil.which("pi") or "pi"
        argv = [str(pi_bin), *CHILD_FLAGS]
        for flag in ("provider", "model"):
            if params.get(flag):
                argv += [f"--{flag}", str(params[flag])]
        if params.get("system_prompt"):
            argv += ["--system-prompt", str(params["system_prompt"])]
        argv.append(str(params.get("prompt") or ""))
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, cwd=self.cwd or None, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            return SignalOutcome(error=f"child failed to start: {exc}")
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_ms / 1000)
        except TimeoutError:
            _kill_group(process)
            await process.wait()
            return SignalOutcome(error=f"timeout after {timeout_ms}ms")
        except asyncio.CancelledError:
            _kill_group(process)
            raise
        if process.returncode != 0:
            detail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            return SignalOutcome(error=f"child exited with code {process.returncode}"
                                 + (f": {detail[0]}" if detail[0] else ""))
        return SignalOutcome(result=out.decode(errors="replace").strip())

    def _load(self, request: SignalRequest) -> SignalOutcome:
        target = _path(request.params.get("file"))
        if target is None:
            return SignalOutcome(result=None)
        data = read_json(target)
        return SignalOutcome(result=data.get(str(request.params.get("key"))) if isinstance(data, dict)
                             else None)

    def _read(self, request: SignalRequest) -> SignalOutcome:
        target = _path(request.params.get("file"))
        try:
            text = target.read_text(encoding="utf-8", errors="replace") if target else ""
        except FileNotFoundError:
            text = ""
        lines = [line for line in text.splitlines() if line.strip()]
        return SignalOutcome(result=lines[-_int(request.params.get("tail"), 10):])

    async def _ask(self, request: SignalRequest) -> SignalOutcome:
        params = request.params
        timeout_ms = _int(params.get("timeout_ms"), 300000)
        reply = await self.bridge("ask", {"select": params.get("select"), "title": params.get("title"),
                                          "placeholder": params.get("placeholder")},
                                  timeout_ms / 1000)
        return SignalOutcome(result=(reply or {}).get("value") if isinstance(reply, dict) else None)

    # --- effects ------------------------------------------------------------------------------

    def apply(self, decision: Decision) -> Applied:
        """Do the local effects; return the ones the bridge applies, model before thinking."""
        applied = Applied()
        for effect in decision.effects:
            if effect.action in LOCAL_ACTIONS:
                problem = self._local(effect)
                if problem:
                    applied.warnings.append(f"rule {effect.rule_id}: {effect.action} failed: {problem}")
            else:
                applied.actions.append(_for_bridge(effect))
        applied.actions.sort(key=lambda a: ORDER.get(a["action"], 2))
        return applied

    def _local(self, effect: Effect) -> str | None:
        params = effect.params
        try:
            if effect.action == "log":
                target = _path(params.get("file")) or self.log_file
                if target is not None:
                    append_line(target, str(params.get("text", "")))
            elif effect.action == "audit":
                target = _path(params.get("file"))
                if target is None:
                    return "no audit file"
                record = params.get("record")
                if params.get("stamp", True) and isinstance(record, dict) and "timestamp" not in record:
                    record = {"timestamp": _now_iso(), **record}
                append_line(target, json.dumps(record, ensure_ascii=False, default=str))
            elif effect.action == "save":
                target = _path(params.get("file"))
                if target is None:
                    return "no file"
                update_json(target, str(params.get("key")), params.get("value"))
        except OSError as exc:
            return f"{exc.strerror or exc} ({getattr(exc, 'filename', '') or ''})"
        return None

    def log(self, text: str) -> None:
        """A line in the router's own log (failures of the router itself)."""
        if self.log_file is not None:
            with contextlib.suppress(OSError):
                append_line(self.log_file, f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}")


def _for_bridge(effect: Effect) -> dict[str, Any]:
    params = effect.params
    if effect.action == "thinking" and isinstance(params, dict):
        level = params.get("level")
        with contextlib.suppress(Exception):
            level = cap_level(level, params.get("ceiling"))
        params = {"level": level}
    return {"action": effect.action, "params": params, "rule": effect.rule_id}


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _path(value: Any) -> Path | None:
    if not value or not isinstance(value, str):
        return None
    return Path(os.path.expandvars(value)).expanduser()


def _int(value: Any, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number > 0 else default


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signals.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            process.kill()
