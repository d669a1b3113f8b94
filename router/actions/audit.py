"""The `audit` action."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from router.actions import action
from router.actions._base import Params
from router.actions._local import Failure, Local, target
from router.diagnostics.code_names import ACTION_FAILED
from router.lang.jsonout import dumps
from router.trust.capabilities import FS_WRITE


class AuditParams(Params):
    """Append one JSON record to a JSONL audit file (created private to the user, locked).

    With `stamp` (the default) the record starts with an ISO `timestamp` added by the executor.
    """

    file: str
    record: Any
    stamp: bool = True


@action("audit", runs="executor", capabilities={"file": FS_WRITE},
        example="- audit: {file: '{vars.audit_log}', record: {tool: '{tool_name}'}}")
def describe_audit(params: dict[str, Any]) -> str:
    return f"append an audit record to {params.get('file')}"


def run(params: dict[str, Any], local: Local) -> Failure | None:
    path = target(params, local)
    if path is None:
        return "no audit file", ACTION_FAILED
    record = params.get("record")
    if params.get("stamp", True) and isinstance(record, dict) and "timestamp" not in record:
        record = {"timestamp": _now_iso(), **record}
    return local.append(path, dumps(record), named=str(params.get("file") or ""))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
