"""The `audit` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params
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
