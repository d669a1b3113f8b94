"""`records`: the last records of a JSON-lines file, those of the last `days` if given."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from router.actions._local import path_of
from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime.filelock import read_text
from router.runtime.signals import as_int

if TYPE_CHECKING:
    from router.runtime.executor import Executor


def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    target = path_of(request.params.get("file"))
    try:
        lines = read_text(target, nofollow=request.confinement is not None).splitlines() if target else []
    except FileNotFoundError:
        lines = []
    days = request.params.get("days")
    since = None
    if days not in (None, ""):
        try:
            since = datetime.now(UTC).timestamp() - float(days) * 86400
        except (TypeError, ValueError):
            return SignalOutcome(error=f"days must be a number, got {days!r}")
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if since is not None and _timestamp(record) < since:
            continue
        records.append(record)
    return SignalOutcome(result=records[-as_int(request.params.get("limit"), 100000):])


def _timestamp(record: Any) -> float:
    stamp = record.get("timestamp") if isinstance(record, dict) else None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
