"""Normalize question-tool arguments and UI dialogs into one question model.

Shapes accepted: `question` (a prompt plus options), `questionnaire` and the gstack/Claude-style
`questions[]` of ask_question / ask_user_question / AskUserQuestion, and `decision_request`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PROMPT_KEYS = ("question", "prompt", "text", "message", "title", "label")
ID_KEYS = ("id", "key", "name")
HEADER_KEYS = ("header", "shortLabel")
OPTION_LABEL_KEYS = ("label", "name", "title", "value")
OPTION_VALUE_KEYS = ("value", "id", "key")
OPTION_DESCRIPTION_KEYS = ("description", "help", "detail")
EXCERPT_ENTRIES = 12
CONTEXT_CAP = 12_000
CONFIRM_OPTIONS = (  # as the original pi-decision-router offers a confirm to its child
    {"value": "yes", "label": "Yes", "description": "Approve and continue."},
    {"value": "no", "label": "No", "description": "Decline and stop this action."},
)


def _first_text(obj: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def normalize_options(raw: Any) -> list[dict[str, Any]]:
    """String options (trimmed, empties dropped) and object options (label/value/description)."""
    if not isinstance(raw, list):
        return []
    options = []
    for index, item in enumerate(raw):
        if isinstance(item, str):
            text = item.strip()
            if text:
                options.append({"value": text, "label": text, "description": None})
        elif isinstance(item, Mapping):
            label = _first_text(item, OPTION_LABEL_KEYS) or f"Option {index + 1}"
            value = _first_text(item, OPTION_VALUE_KEYS) or label
            options.append({"value": value, "label": label,
                            "description": _first_text(item, OPTION_DESCRIPTION_KEYS)})
    return options


def js_string(value: Any) -> str:
    """JavaScript's `String(value)` for JSON values (true, null, 1.5, a,b for arrays)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    if isinstance(value, Mapping):
        return "[object Object]"
    return str(value)


def _question(item: Any, index: int, root: Mapping[str, Any], *, is_root: bool) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        item = {"question": js_string(item)}
    own_options = item.get("options")
    options = normalize_options(own_options if isinstance(own_options, list) else root.get("options"))
    allow_other = item.get("allowOther")
    multi = item.get("multiSelect")
    if not isinstance(multi, bool):
        multi = root.get("multiSelect") if isinstance(root.get("multiSelect"), bool) else False
    return {
        "id": _first_text(item, ID_KEYS) or f"q{index + 1}",
        "header": _first_text(item, HEADER_KEYS),
        "prompt": _first_text(item, PROMPT_KEYS) or f"Question {index + 1}",
        "options": options,
        "allow_other": allow_other if isinstance(allow_other, bool) else True,
        "multi_select": multi,
    }


def normalize_questions(raw: Any) -> list[dict[str, Any]]:
    """Every question of a tool call, in order (a non-object input is one question)."""
    if not isinstance(raw, Mapping):
        return [_question({"question": "" if raw is None else js_string(raw)}, 0, {}, is_root=True)]
    items = raw.get("questions")
    if isinstance(items, list) and items:
        return [_question(item, i, raw, is_root=False) for i, item in enumerate(items)]
    return [_question(raw, 0, raw, is_root=True)]


def render_excerpt(messages: Sequence[Any], *, max_chars: int = CONTEXT_CAP) -> str:
    """The last message entries as `role: text` lines, empties (and non-objects) skipped, the last
    chars kept."""
    lines = []
    for message in list(messages)[-EXCERPT_ENTRIES:]:
        if not isinstance(message, Mapping):
            continue
        text = str(message.get("text") or "").strip()
        if text:
            lines.append(f"{message.get('role', 'unknown')}: {text}")
    joined = "\n".join(lines)
    return joined[-max_chars:] if max_chars > 0 else ""


def explicit_context(raw: Any) -> str | None:
    """The call's own context: the root's `context`, else its `description`; None without one."""
    if isinstance(raw, Mapping):
        for key in ("context", "description"):
            value = raw.get(key)
            if isinstance(value, str) and value.strip():
                return value[:CONTEXT_CAP]
    return None


def question_context(raw: Any, excerpt: str) -> str:
    """The root's `context`, else its `description`, else the conversation excerpt."""
    explicit = explicit_context(raw)
    return explicit if explicit is not None else excerpt[-CONTEXT_CAP:]


def dialog_questions(kind: str, *, title: str, message: str | None = None,
                     options: Sequence[str] = (), placeholder: str | None = None,
                     prefill: str | None = None) -> list[dict[str, Any]]:
    """The single question a UI dialog asks, built as the seed's UI shim builds it."""
    question: dict[str, Any] = {"id": "q1", "header": None, "options": [], "allow_other": True,
                                "multi_select": False}
    if kind == "select":
        question.update(prompt=title, options=normalize_options(list(options)), allow_other=False)
    elif kind == "confirm":
        question.update(prompt=f"{title}\n{message}" if message else title,
                        options=[dict(o) for o in CONFIRM_OPTIONS], allow_other=False)
    elif kind == "input":
        question.update(prompt=title + (f"\nPlaceholder: {placeholder}" if placeholder else ""))
    elif kind == "editor":
        question.update(prompt=title + (f"\nPrefilled value: {prefill}" if prefill else ""))
    else:
        question.update(prompt=title)
    return [question]
