"""`which`: the path of a program, a bare name looked up on PATH (as the child signal finds pi)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.signals import which_program

if TYPE_CHECKING:
    from router.runtime.executor import Executor


def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    """A bare name from PATH; a path as it is."""
    name = str(request.params.get("name") or "")
    if not name:
        return SignalOutcome(error="which: no program name")
    if "/" in name:
        return SignalOutcome(result=str(Path(name).expanduser()))
    found = which_program(name)
    return SignalOutcome(result=found) if found else SignalOutcome(error=f"which: {name} is not on PATH")
