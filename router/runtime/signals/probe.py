"""`probe`: whether models (and a classifier) answer, through Pi: one small call each."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.signals import classify, complete, timeout

if TYPE_CHECKING:
    from router.runtime.executor import Executor


def budget_ms(request: SignalRequest) -> int:
    """One call's budget for each model and the classifier."""
    models = request.params.get("models") or []
    calls = (1 if isinstance(models, str) else len(models)) + (1 if request.params.get("classifier") else 0)
    return timeout(request) * max(calls, 1)


async def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    params = request.params
    timeout_ms = timeout(request)
    results = []
    if params.get("classifier"):
        started = time.perf_counter()
        reply = await _classifier(executor, params["classifier"], params.get("question"), timeout_ms)
        results.append({"ref": params["classifier"], "kind": "classifier", "ok": reply.error is None,
                        "error": reply.error, "ms": round((time.perf_counter() - started) * 1000)})
    models = params.get("models") or []
    for ref in [models] if isinstance(models, str) else models:
        started = time.perf_counter()
        reply = await _model(executor, ref, params.get("prompt"), timeout_ms)
        results.append({"ref": ref, "kind": "model", "ok": reply.error is None, "error": reply.error,
                        "ms": round((time.perf_counter() - started) * 1000)})
    return SignalOutcome(result=results)


async def _classifier(executor: Executor, ref: Any, question: Any, timeout_ms: int) -> SignalOutcome:
    """One classifier call with the question the policy words (`probe.question`)."""
    if not isinstance(question, dict) or not question.get("instructions"):
        return SignalOutcome(error="probe: the policy declares no classifier question")
    return await classify.compute(executor, SignalRequest("probe", "classify", {
        "model": ref, "timeout_ms": timeout_ms},
        {"probe": {"type": "choice", "instructions": str(question["instructions"]),
                   "criteria": question.get("criteria")}}))


async def _model(executor: Executor, ref: Any, prompt: Any, timeout_ms: int) -> SignalOutcome:
    """One tiny completion with the prompt the policy words (`probe.prompt`)."""
    if not prompt:
        return SignalOutcome(error="probe: the policy declares no prompt")
    return await complete.compute(executor, SignalRequest("probe", "complete", {
        "model": ref, "prompt": str(prompt), "timeout_ms": timeout_ms}))
