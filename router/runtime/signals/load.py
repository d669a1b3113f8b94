"""`load`: a JSON or YAML file, whole or one key of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.actions._local import path_of
from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.filelock import JsonFileError, load_json

if TYPE_CHECKING:
    from router.runtime.executor import Executor


def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    target = path_of(request.params.get("file"))
    if target is None:
        return SignalOutcome(result=None)
    try:
        data = load_json(target, nofollow=request.confinement is not None)
    except JsonFileError as exc:
        return SignalOutcome(error=str(exc))
    key = request.params.get("key")
    if key is None:
        return SignalOutcome(result=data)
    return SignalOutcome(result=data.get(str(key)) if isinstance(data, dict) else None)
