"""`classify`: questions answered by a classifier model, through Pi (the bridge makes the call)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.signals import as_int, timeout

if TYPE_CHECKING:
    from router.runtime.executor import Executor


async def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    params = request.params
    timeout_ms = timeout(request)
    reply = await executor.bridge("classify", {
        "model": params.get("model"), "questions": request.questions,
        "state": params.get("state") or {}, "timeoutMs": timeout_ms,
        "maxRetries": as_int(params.get("max_retries"), 0)}, timeout_ms / 1000 + 1.0)
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
