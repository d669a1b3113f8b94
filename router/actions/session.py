"""Actions on the session: compaction, follow-up messages, notifications, logs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from router.actions import action
from router.actions._base import Params, show
from router.trust.capabilities import FS_WRITE, ROUTER_LOG


class CompactParams(Params):
    """Compact the context (`ctx.compact`).

    Pi aborts a running run when compaction starts, so by default the bridge waits until the
    agent is idle (`agent_settled`). `abort: true` compacts right away, interrupting the run.
    The outcome arrives as a `compaction_done` or `compaction_failed` event with `by_router`.
    """

    instructions: str | None = None
    abort: bool = False


@action("compact", example="- compact: {}")
def describe_compact(params: dict[str, Any]) -> str:
    return "compact the context" + (" now (aborting the run)" if params.get("abort") else " when idle")


class FollowUpParams(Params):
    """Send a message that makes Pi take another turn (`pi.sendMessage`, stored in the session).

    `hidden: true` keeps it out of the TUI transcript (display false).
    """

    text: str
    custom_type: str = "router-follow-up"
    hidden: bool = True
    deliver: Literal["followUp", "steer", "nextTurn"] = "followUp"
    details: Any = None


@action("follow_up", shorthand="text",
        example="- follow_up: {text: 'Continue the interrupted task.', hidden: true}")
def describe_follow_up(params: dict[str, Any]) -> str:
    return f"send a {'hidden ' if params.get('hidden', True) else ''}follow-up: {show(params.get('text'))}"


class NotifyParams(Params):
    """Show a notification to the user (`ctx.ui.notify`; stderr in print mode)."""

    text: str
    level: Literal["info", "warning", "error"] = "info"


@action("notify", shorthand="text", example="- notify: {text: 'Compacting…', level: warning}")
def describe_notify(params: dict[str, Any]) -> str:
    return f"notify ({params.get('level', 'info')}): {show(params.get('text'))}"


class StatusParams(Params):
    """Set (or clear, with `text: null`) a status-bar entry under `key`."""

    key: str
    text: str | None = None


@action("status", example="- status: {key: my-router, text: 'Router: [ON]'}")
def describe_status(params: dict[str, Any]) -> str:
    text = params.get("text")
    return f"status {params.get('key')}: {show(text)}" if text is not None else \
        f"clear status {params.get('key')}"


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


class AuditParams(Params):
    """Append one JSON record to a JSONL audit file (created private to the user, locked).

    With `stamp` (the default) the record starts with an ISO `timestamp` added by the executor.
    """

    file: str
    record: Any
    stamp: bool = True


class EntryParams(Params):
    """Store a custom entry in the Pi session (`pi.appendEntry`): kept, never sent to the model."""

    type: str
    data: Any = None


@action("entry", example="- entry: {type: my-router, data: {decided: '{state.band}'}}")
def describe_entry(params: dict[str, Any]) -> str:
    return f"append a session entry of type {params.get('type')}"


@action("audit", runs="executor", capabilities={"file": FS_WRITE},
        example="- audit: {file: '{vars.audit_log}', record: {tool: '{tool_name}'}}")
def describe_audit(params: dict[str, Any]) -> str:
    return f"append an audit record to {params.get('file')}"


class SaveParams(Params):
    """Store a value in a JSON file under `key` (per-project settings that survive restarts).

    `path` instead of `key` sets a nested value (`[policy, threshold]`), creating objects on the way;
    `values` sets several (`{autoSelect: true, policy.threshold: 0.6}`, dotted paths) in one write.
    The rest of the file is kept: unknown keys, key order, indentation. A file that is not a JSON
    object (a syntax error, a comment, a trailing comma) is never overwritten: the save fails with
    a warning naming file:line:col. `backup: true` keeps the previous content in `<file>.bak`; a
    save that changes nothing does not write.
    """

    file: str
    key: str | None = None
    path: list[str] | str | None = None
    values: dict[str, Any] | str | None = Field(None, description="dotted path: value, set in one write")
    value: Any = None
    backup: bool = Field(False, description="keep the previous content in <file>.bak")

    @model_validator(mode="after")
    def _one(self) -> SaveParams:
        if sum(x is not None for x in (self.key, self.path, self.values)) != 1:
            raise ValueError("give exactly one of key, path, values")
        if self.values is not None and "value" in self.model_fields_set:
            raise ValueError("values sets its own values; drop value")
        if self.values is None and "value" not in self.model_fields_set:
            raise ValueError("value is required with key or path")
        return self


class ReleaseParams(Params):
    """Give back a slot taken by a `slot` signal (by its `name`)."""

    name: str = "turn"


@action("release", runs="executor", shorthand="name", example="- release: turn")
def describe_release(params: dict[str, Any]) -> str:
    return f"release slot {params.get('name')}"


@action("save", runs="executor", capabilities={"file": FS_WRITE},
        example="- save: {file: '{vars.state_file}', key: '{session.cwd}', value: {enabled: false}}")
def describe_save(params: dict[str, Any]) -> str:
    what = params.get("key") or params.get("path") or ", ".join(params.get("values") or {})
    return f"save {show(what)} in {params.get('file')}"
