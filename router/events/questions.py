"""Normalize question-tool arguments and UI dialogs into one question model.

Shapes accepted: `question` (a prompt plus options), `questionnaire` and the gstack/Claude-style
`questions[]` of ask_question / ask_user_question / AskUserQuestion, and the decision pack's
`decision_request` (each a shape of arguments; which tools ask is the policy's `provides.tools`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

PROMPT_KEYS = ("question", "prompt", "text", "message", "title", "label")
ID_KEYS = ("id", "key", "name")
HEADER_KEYS = ("header", "shortLabel")
OPTION_LABEL_KEYS = ("label", "name", "title", "value")
OPTION_VALUE_KEYS = ("value", "id", "key")
OPTION_DESCRIPTION_KEYS = ("description", "help", "detail")
# The engine's neutral defaults: a policy declares its own (`provides.questions:`), as the
# decision pack declares the original extension's (rules/decision.yaml).
EXCERPT_ENTRIES = 10
CONTEXT_CAP = 10_000
CONFIRM_OPTIONS = (
    {"value": "yes", "label": "Yes", "description": None},
    {"value": "no", "label": "No", "description": None},
)
DIALOG_LINES = {"confirm": "", "input": "", "editor": ""}
DIALOG_FIELDS = {"confirm": "message", "input": "placeholder", "editor": "prefill"}


@dataclass(frozen=True)
class QuestionSettings:
    """How question and dialog events are built: what a policy's `provides.questions:` declares.

    - tool_name: a question event's `tool_name` when the bridge names none ('' by default);
    - excerpt_entries, context_chars: the conversation excerpt (the last entries, the last chars);
    - confirm_options: a confirm dialog's options;
    - dialog_lines: per dialog kind, the label of the line added after the title for the
      dialog's message (confirm), placeholder (input) or prefilled value (editor).
    """

    tool_name: str = ""
    excerpt_entries: int = EXCERPT_ENTRIES
    context_chars: int = CONTEXT_CAP
    confirm_options: tuple[Mapping[str, Any], ...] = CONFIRM_OPTIONS
    dialog_lines: Mapping[str, str] = field(default_factory=lambda: dict(DIALOG_LINES))


DEFAULT_SETTINGS = QuestionSettings()


def question_settings(values: Mapping[str, Any]) -> QuestionSettings:
    """Settings from resolved `provides.questions` values; a missing or unusable value keeps the
    engine's default (a policy that lints clean gives only usable ones)."""
    changes: dict[str, Any] = {}
    if isinstance(values.get("tool_name"), str) and values["tool_name"]:
        changes["tool_name"] = values["tool_name"]
    for name in ("excerpt_entries", "context_chars"):
        number = values.get(name)
        if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
            changes[name] = number
    options = values.get("confirm_options")
    if isinstance(options, list) and options and all(isinstance(o, Mapping) for o in options):
        changes["confirm_options"] = tuple(normalize_options(options))
    lines = values.get("dialog_lines")
    if isinstance(lines, Mapping):
        changes["dialog_lines"] = {**DIALOG_LINES, **{k: v for k, v in lines.items()
                                                     if k in DIALOG_LINES and isinstance(v, str)}}
    return replace(DEFAULT_SETTINGS, **changes)


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


def render_excerpt(messages: Sequence[Any], *, max_chars: int | None = None,
                   settings: QuestionSettings = DEFAULT_SETTINGS) -> str:
    """The last message entries as `role: text` lines, empties (and non-objects) skipped, the last
    chars kept (`max_chars`, else the settings' context_chars)."""
    max_chars = settings.context_chars if max_chars is None else max_chars
    lines = []
    entries = list(messages)[-settings.excerpt_entries:] if settings.excerpt_entries > 0 else []
    for message in entries:
        if not isinstance(message, Mapping):
            continue
        text = str(message.get("text") or "").strip()
        if text:
            lines.append(f"{message.get('role', 'unknown')}: {text}")
    joined = "\n".join(lines)
    return joined[-max_chars:] if max_chars > 0 else ""


def explicit_context(raw: Any, settings: QuestionSettings = DEFAULT_SETTINGS) -> str | None:
    """The call's own context: the root's `context`, else its `description`; None without one."""
    if isinstance(raw, Mapping):
        for key in ("context", "description"):
            value = raw.get(key)
            if isinstance(value, str) and value.strip():
                return value[:settings.context_chars]
    return None


def question_context(raw: Any, excerpt: str, settings: QuestionSettings = DEFAULT_SETTINGS) -> str:
    """The root's `context`, else its `description`, else the conversation excerpt."""
    explicit = explicit_context(raw, settings)
    if explicit is not None:
        return explicit
    return excerpt[-settings.context_chars:] if settings.context_chars > 0 else ""


def dialog_questions(kind: str, *, title: str, message: str | None = None,
                     options: Sequence[str] = (), placeholder: str | None = None,
                     prefill: str | None = None,
                     settings: QuestionSettings = DEFAULT_SETTINGS) -> list[dict[str, Any]]:
    """The single question a UI dialog asks: the title, then for a confirm its message, for an
    input its placeholder, for an editor its prefilled value, each on a line of its own after
    the label the settings give it."""
    question: dict[str, Any] = {"id": "q1", "header": None, "options": [], "allow_other": True,
                                "multi_select": False}
    given = {"message": message, "placeholder": placeholder, "prefill": prefill}
    extra = given.get(DIALOG_FIELDS.get(kind, ""))
    prompt = title + (f"\n{settings.dialog_lines.get(kind, '')}{extra}" if extra else "")
    if kind == "select":
        question.update(prompt=title, options=normalize_options(list(options)), allow_other=False)
    elif kind == "confirm":
        question.update(prompt=prompt, options=[dict(o) for o in settings.confirm_options],
                        allow_other=False)
    else:
        question.update(prompt=prompt)
    return [question]
