"""`probe`: whether models (and a classifier) answer, through Pi: one small call each."""

from __future__ import annotations

import time
from typing import Any

from router.actions._base import Field, Params
from router.actions.signals import Request, SignalLocal, SignalOutcome, kind, timeout
from router.actions.signals.classify import ask
from router.actions.signals.complete import complete

KIND = kind("probe", "bridge", "whether models answer, through Pi", 10000, timeout_field="timeout_ms")


class ProbeQuestion(Params):
    """The one question a probe asks a classifier (any answer proves it works)."""

    instructions: str = Field(description="template: what the classifier is asked")
    criteria: dict[str, str] | str = Field(description="the answers it may give, each with its "
                                           "meaning (or a template that gives that object)")


class ProbeSignal(Params):
    """Check models live: a classifier call or a tiny completion each; a list of results.

    The policy words both calls: `prompt` is what each chat model is sent, `question` what the
    classifier is asked (each required when the signal names models, or a classifier)."""

    classifier: str | None = Field(None, description="template: a classifier model ref")
    models: list[str] | str = Field([], description="template: chat model refs")
    prompt: str | None = Field(None, description="template: the completion each chat model gets")
    question: ProbeQuestion | None = Field(None, description="the classifier's question")
    timeout_ms: int | str = 10000

    def check(self) -> None:
        if self.models and self.prompt is None:
            raise ValueError("a probe of chat models needs `prompt` (what each model is sent), "
                             "e.g. prompt: Reply with the single word OK.")
        if self.classifier is not None and self.question is None:
            raise ValueError("a probe of a classifier needs `question: {instructions, criteria}`")


def budget_ms(request: Request) -> int:
    """One call's budget for each model and the classifier."""
    models = request.params.get("models") or []
    calls = (1 if isinstance(models, str) else len(models)) + (1 if request.params.get("classifier") else 0)
    return timeout(request) * max(calls, 1)


async def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    params = request.params
    timeout_ms = timeout(request)
    results = []
    if params.get("classifier"):
        started = time.perf_counter()
        reply = await _classifier(local, params["classifier"], params.get("question"), timeout_ms)
        results.append({"ref": params["classifier"], "kind": "classifier", "ok": reply.error is None,
                        "error": reply.error, "ms": round((time.perf_counter() - started) * 1000)})
    models = params.get("models") or []
    for ref in [models] if isinstance(models, str) else models:
        started = time.perf_counter()
        reply = await _model(local, ref, params.get("prompt"), timeout_ms)
        results.append({"ref": ref, "kind": "model", "ok": reply.error is None, "error": reply.error,
                        "ms": round((time.perf_counter() - started) * 1000)})
    return SignalOutcome(result=results)


async def _classifier(local: SignalLocal, ref: Any, question: Any, timeout_ms: int) -> SignalOutcome:
    """One classifier call with the question the policy words (`probe.question`)."""
    if not isinstance(question, dict) or not question.get("instructions"):
        return SignalOutcome(error="probe: the policy declares no classifier question")
    return await ask(local, {"model": ref}, {"probe": {
        "type": "choice", "instructions": str(question["instructions"]),
        "criteria": question.get("criteria")}}, timeout_ms)


async def _model(local: SignalLocal, ref: Any, prompt: Any, timeout_ms: int) -> SignalOutcome:
    """One tiny completion with the prompt the policy words (`probe.prompt`)."""
    if not prompt:
        return SignalOutcome(error="probe: the policy declares no prompt")
    return await complete(local, {"model": ref, "prompt": str(prompt)}, timeout_ms)
