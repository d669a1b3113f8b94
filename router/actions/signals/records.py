"""`records`: the last records of a JSON-lines file, those of the last `days` if given."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from router.actions._base import Field, Params
from router.actions._local import path_of
from router.actions.signals import Request, SignalLocal, SignalOutcome, as_int, kind
from router.trust.capabilities import FS_READ

KIND = kind("records", "executor", "the last records of a JSON-lines file", capabilities={"file": FS_READ})


class RecordsSignal(Params):
    """Read the records of a JSONL file written by `audit` (newest last), within `days`."""

    file: str = Field(description="template: the JSONL file")
    days: float | str | None = Field(None, description="only records whose timestamp is this recent")
    limit: int = Field(100000, ge=1, description="at most this many (the newest)")


def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    target = path_of(request.params.get("file"))
    nofollow = request.confinement is not None
    try:
        lines = local.read_text(target, nofollow=nofollow).splitlines() if target else []
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
