"""`complete`: a completion from a model, through Pi."""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.signals import timeout

if TYPE_CHECKING:
    from router.runtime.executor import Executor


async def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    params = request.params
    timeout_ms = timeout(request)
    reply = await executor.bridge("complete", {
        "model": params.get("model"), "systemPrompt": params.get("system_prompt"),
        "prompt": params.get("prompt"), "timeoutMs": timeout_ms}, timeout_ms / 1000 + 1.0)
    if not isinstance(reply, dict):
        return SignalOutcome(error="completion failed: no answer from Pi")
    if reply.get("error"):
        return SignalOutcome(error=str(reply["error"]))
    return SignalOutcome(result=str(reply.get("text") or ""))
