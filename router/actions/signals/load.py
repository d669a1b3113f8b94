"""`load`: a JSON file, whole or one key of it."""

from __future__ import annotations

from router.actions._base import Field, Params
from router.actions._local import path_of
from router.actions.signals import Request, SignalLocal, SignalOutcome, kind
from router.trust.capabilities import FS_READ

KIND = kind("load", "executor", "a JSON or YAML file", capabilities={"file": FS_READ})


class LoadSignal(Params):
    """Read a JSON file: the value under `key` (as `save` stores it), or the whole document.

    A missing file reads as null; a leading byte order mark is skipped. A file that is not JSON
    (comments and trailing commas included) fails the signal: `signal_errors.<name>` names
    file:line:col and what is wrong."""

    file: str = Field(description="template: the JSON file")
    key: str | None = Field(None, description="template: the key; none reads the whole document")


def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    target = path_of(request.params.get("file"))
    if target is None:
        return SignalOutcome(result=None)
    try:
        data = local.load_json(target, nofollow=request.confinement is not None)
    except ValueError as exc:
        return SignalOutcome(error=str(exc))
    key = request.params.get("key")
    if key is None:
        return SignalOutcome(result=data)
    return SignalOutcome(result=data.get(str(key)) if isinstance(data, dict) else None)
