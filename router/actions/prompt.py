"""Actions on the system prompt and the messages of a request."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Params, show


class SectionParams(Params):
    """Add a named section to the system prompt (rendered by Pi as `<name>…</name>` at the end).

    Sections are rebuilt every run, so the rule must fire on each `before_agent_start`.
    """

    name: str
    text: str


@action("section", events={"before_agent_start"},
        example="- section: {name: policy_engine, text: 'Answer briefly.'}")
def describe_section(params: dict[str, Any]) -> str:
    return f"add system prompt section <{params.get('name')}>: {show(params.get('text'))}"


class SystemAppendParams(Params):
    """Append text to Pi's system prompt (never replacing it), after a blank line.

    With `marker`, nothing is appended when the prompt already contains the marker, so the text
    is never duplicated.
    """

    text: str
    marker: str | None = None


@action("system_append", events={"before_agent_start"}, shorthand="text",
        example="- system_append: {text: '[policy] be brief', marker: '[policy]'}")
def describe_system_append(params: dict[str, Any]) -> str:
    return f"append to the system prompt: {show(params.get('text'))}"


class ContextMessageParams(Params):
    """Add an ephemeral message to this provider request only (never stored in the session).

    `after_user` puts it right after the run's triggering user message (keeps the request prefix
    stable and never lands between a tool call and its result); `end` appends it last. Messages
    of the same `custom_type` already present are removed first, so there is exactly one.
    """

    text: str
    role: Literal["user", "custom"] = "user"
    custom_type: str = "router-guidance"
    position: Literal["after_user", "end"] = "after_user"


@action("context_message", events={"context"}, shorthand="text",
        example="- context_message: {text: 'Decide the task type first.', position: end}")
def describe_context_message(params: dict[str, Any]) -> str:
    return f"add ephemeral {params.get('role', 'user')} message ({params.get('position', 'after_user')}): " \
           f"{show(params.get('text'))}"


class InputParams(Params):
    """Reply to an `input` event: `transform` its text or mark it `handled` (no agent run)."""

    action: Literal["continue", "transform", "handled"]
    text: str | None = None


@action("input", events={"input"}, shorthand="action", example="- input: {action: handled}")
def describe_input(params: dict[str, Any]) -> str:
    if params.get("action") == "transform":
        return f"replace the input text with {show(params.get('text'))}"
    return f"input: {params.get('action')}"
