"""`ask`: a question to the user, through Pi's dialogs."""

from __future__ import annotations

from router.actions._base import Field, Params
from router.actions.signals import Request, SignalLocal, SignalOutcome, kind, timeout

KIND = kind("ask", "bridge", "a question to the user, through Pi's dialogs", 300000,
            timeout_field="timeout_ms")


class AskSignal(Params):
    """Ask the user through Pi's UI (select or input); null when cancelled or without a UI."""

    select: list[str] | str | None = Field(None, description="options to choose from (template)")
    title: str = ""
    placeholder: str | None = None
    timeout_ms: int | str = 300000


async def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    params = request.params
    reply = await local.bridge("ask", {"select": params.get("select"), "title": params.get("title"),
                                       "placeholder": params.get("placeholder")}, timeout(request) / 1000)
    return SignalOutcome(result=(reply or {}).get("value") if isinstance(reply, dict) else None)
