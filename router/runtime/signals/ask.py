"""`ask`: a question to the user, through Pi's dialogs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.signals import timeout

if TYPE_CHECKING:
    from router.runtime.executor import Executor


async def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    params = request.params
    reply = await executor.bridge("ask", {"select": params.get("select"), "title": params.get("title"),
                                          "placeholder": params.get("placeholder")},
                                  timeout(request) / 1000)
    return SignalOutcome(result=(reply or {}).get("value") if isinstance(reply, dict) else None)
