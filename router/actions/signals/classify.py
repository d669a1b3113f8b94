"""`classify`: questions answered by a classifier model, through Pi (the bridge makes the call)."""

from __future__ import annotations

from typing import Any, Literal

from router.actions._base import Field, Params
from router.actions.signals import Request, SignalLocal, SignalOutcome, as_int, kind, timeout

KIND = kind("classify", "bridge", "questions answered by a classifier model, through Pi", 4000,
            timeout_field="timeout_ms")


class ClassifyQuestion(Params):
    """One classifier question, asked in the same call as the others."""

    type: Literal["choice", "bool", "score"] = "choice"
    instructions: str
    criteria: dict[str, str] | str | None = None
    when: str | None = Field(None, description="expression: ask only when true")


class ClassifySignal(Params):
    """Ask a classifier model of Pi's registry (one call, several questions)."""

    model: str = Field(description="template: classifier model ref, e.g. llama.cpp/Kev-9B")
    questions: dict[str, ClassifyQuestion]
    state: dict[str, Any] = Field({}, description="templates: the state shown")
    timeout_ms: int | str = 4000
    max_retries: int = 0


async def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    return await ask(local, request.params, request.questions, timeout(request))


async def ask(local: SignalLocal, params: dict[str, Any], questions: dict[str, Any],
              timeout_ms: int) -> SignalOutcome:
    """One classifier call: `questions` asked of `params["model"]` (the probe asks one too)."""
    reply = await local.bridge("classify", {
        "model": params.get("model"), "questions": questions,
        "state": params.get("state") or {}, "timeoutMs": timeout_ms,
        "maxRetries": as_int(params.get("max_retries"), 0)}, timeout_ms / 1000 + 1.0)
    if not isinstance(reply, dict):
        return SignalOutcome(error="classifier returned no answer")
    if reply.get("stopReason") in ("error", "aborted") or reply.get("error"):
        return SignalOutcome(error=str(reply.get("errorMessage") or reply.get("error")
                                       or reply.get("stopReason")))
    answers = reply.get("answers") or {}
    missing = [name for name in questions if name not in answers]
    if missing:
        return SignalOutcome(error=f"classifier gave no answer for {', '.join(missing)}")
    return SignalOutcome(result=answers)
