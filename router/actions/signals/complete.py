"""`complete`: a completion from a model, through Pi."""

from __future__ import annotations

from typing import Any

from router.actions._base import Field, Params
from router.actions.signals import Request, SignalLocal, SignalOutcome, kind, timeout

KIND = kind("complete", "bridge", "a completion from a model, through Pi", 45000, timeout_field="timeout_ms")


class CompleteSignal(Params):
    """Ask a chat model of Pi's registry in-process (faster than a child process)."""

    prompt: str
    system_prompt: str | None = None
    model: str | None = Field(None, description="template: model ref (default: the session model)")
    timeout_ms: int | str = 45000


async def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    return await complete(local, request.params, timeout(request))


async def complete(local: SignalLocal, params: dict[str, Any], timeout_ms: int) -> SignalOutcome:
    """One completion of `params["prompt"]` (the probe asks one too)."""
    reply = await local.bridge("complete", {
        "model": params.get("model"), "systemPrompt": params.get("system_prompt"),
        "prompt": params.get("prompt"), "timeoutMs": timeout_ms}, timeout_ms / 1000 + 1.0)
    if not isinstance(reply, dict):
        return SignalOutcome(error="completion failed: no answer from Pi")
    if reply.get("error"):
        return SignalOutcome(error=str(reply["error"]))
    return SignalOutcome(result=str(reply.get("text") or ""))
