"""`read`: the last non-blank lines of a text file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.actions._local import path_of
from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.filelock import read_text
from router.runtime.signals import as_int

if TYPE_CHECKING:
    from router.runtime.executor import Executor


def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    target = path_of(request.params.get("file"))
    try:
        text = read_text(target, nofollow=request.confinement is not None) if target else ""
    except FileNotFoundError:
        text = ""
    lines = [line for line in text.splitlines() if line.strip()]
    return SignalOutcome(result=lines[-as_int(request.params.get("tail"), 10):])
