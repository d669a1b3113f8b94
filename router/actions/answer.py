"""The `answer` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show


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
