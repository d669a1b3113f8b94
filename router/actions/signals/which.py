"""`which`: the path of a program, a bare name looked up on PATH (as the child signal finds pi)."""

from __future__ import annotations

from pathlib import Path

from router.actions._base import Field, Params
from router.actions.signals import Request, SignalLocal, SignalOutcome, kind
from router.trust.capabilities import PROCESS_SPAWN

# where a program is on your PATH: not a project policy's business
KIND = kind("which", "executor", "the path of a program", capabilities={"name": PROCESS_SPAWN})


class WhichSignal(Params):
    """The path of a program, as the `child` signal finds `pi`: a name without a slash is looked
    up on PATH (the signal fails when it is not there); a path is returned as it is (`~` expanded)."""

    name: str = Field(description="template: a program name (e.g. pi) or a path")


def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    """A bare name from PATH; a path as it is."""
    name = str(request.params.get("name") or "")
    if not name:
        return SignalOutcome(error="which: no program name")
    if "/" in name:
        return SignalOutcome(result=str(Path(name).expanduser()))
    found = local.which(name)
    return SignalOutcome(result=found) if found else SignalOutcome(error=f"which: {name} is not on PATH")
