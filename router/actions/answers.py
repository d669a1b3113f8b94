"""Actions that answer: questions, dialogs, tool calls and results, trust prompts."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Params, show
from router.trust.capabilities import PI_TRUST


class AnswerParams(Params):
    """Answer a `question` or `dialog` event instead of a human.

    For a dialog, `value` is what `ctx.ui.select/confirm/input/editor` returns (a string, or a
    boolean for confirm). For a question tool, `text` becomes the tool result the model reads and
    `details` its structured details. With no answer rule firing, the dialog goes to Pi's native
    UI (or the RPC client).
    """

    value: Any = None
    text: str | None = None
    details: Any = None


@action("answer", events={"question", "dialog"}, shorthand="value",
        example="- answer: {value: '{signals.answer.value}'}")
def describe_answer(params: dict[str, Any]) -> str:
    if params.get("text") is not None:
        return f"answer with tool result: {show(params['text'])}"
    return f"answer: {show(params.get('value'))}"


class BlockParams(Params):
    """Block a tool call; the model reads `reason` as the tool result."""

    reason: str = "Blocked by policy."


@action("block", events={"tool_call"}, shorthand="reason", refuses=True,
        example="- block: 'rm -rf is not allowed here'")
def describe_block(params: dict[str, Any]) -> str:
    return f"block the tool call: {show(params.get('reason'))}"


class RewriteResultParams(Params):
    """Replace a tool's result text (and error flag) before the model sees it."""

    text: str
    is_error: bool | None = None


@action("rewrite_result", events={"tool_result"}, shorthand="text", refuses=True,
        example="- rewrite_result: {text: 'The user answered: yes', is_error: false}")
def describe_rewrite_result(params: dict[str, Any]) -> str:
    return f"rewrite the tool result: {show(params.get('text'))}"


class TrustParams(Params):
    """Answer Pi's project trust prompt (`yes`, `no` or `undecided`), optionally remembered."""

    trusted: Literal["yes", "no", "undecided"]
    remember: bool = False


@action("trust", capabilities={"trusted": PI_TRUST},  # Pi then runs the folder's .pi/extensions
        events={"project_trust"}, shorthand="trusted",
        example="- trust: {trusted: 'yes', remember: true}")
def describe_trust(params: dict[str, Any]) -> str:
    return f"project trust: {params.get('trusted')}" + (" (remembered)" if params.get("remember") else "")


class CancelParams(Params):
    """Cancel a compaction that is about to start (`compaction_before`)."""


@action("cancel", events={"compaction_before"}, refuses=True, example="- cancel: {}")
def describe_cancel(params: dict[str, Any]) -> str:
    return "cancel this compaction"
