"""`read`: the last non-blank lines of a text file."""

from __future__ import annotations

from router.actions._base import Field, Params
from router.actions._local import path_of
from router.actions.signals import Request, SignalLocal, SignalOutcome, as_int, kind
from router.trust.capabilities import FS_READ

KIND = kind("read", "executor", "a text file", capabilities={"file": FS_READ})


class ReadSignal(Params):
    """Read the last non-empty lines of a text file (a list of strings; empty when missing)."""

    file: str = Field(description="template: the file")
    tail: int = Field(10, ge=1, le=10000, description="how many lines")


def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    target = path_of(request.params.get("file"))
    try:
        text = local.read_text(target, nofollow=request.confinement is not None) if target else ""
    except FileNotFoundError:
        text = ""
    lines = [line for line in text.splitlines() if line.strip()]
    return SignalOutcome(result=lines[-as_int(request.params.get("tail"), 10):])
