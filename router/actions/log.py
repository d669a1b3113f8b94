"""The `log` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show
from router.actions._local import Failure, Local, target
from router.trust.capabilities import FS_WRITE, ROUTER_LOG


class LogParams(Params):
    """Append one line to a log file.

    Without `file` (or with `file: "@router"`) the line goes to the router's own log,
    `<agent dir>/router/router.log`, with a timestamp. A `file` that renders empty or null skips the
    line, so an opt-in debug log reads `file: "{env.MY_DEBUG}"`.
    """

    text: str
    file: str | None = ROUTER_LOG


@action("log", runs="executor", capabilities={"file": FS_WRITE}, shorthand="text",
        example="- log: {text: 'route tier={state.tier}', file: '{env.MY_DEBUG}'}")
def describe_log(params: dict[str, Any]) -> str:
    target = params.get("file")
    if not target:
        return "skip a log line (no file)"
    return f"log to {'the router log' if target == ROUTER_LOG else target}: {show(params.get('text'))}"


def run(params: dict[str, Any], local: Local) -> Failure | None:
    target_file = params.get("file")
    if target_file == ROUTER_LOG:
        local.log(f"rule {local.rule_id}: {params.get('text', '')}")
    elif (path := target(params, local)) is not None:
        return local.append(path, local.escape(str(params.get("text", ""))), named=str(target_file))
    return None
