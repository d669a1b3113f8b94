"""Event documents written by people (explain, tests, examples): fill defaults, validate, locate."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from router.diagnostics.code_names import INVALID_EVENT_DOCUMENT, INVALID_EVENT_FIELD
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import EventError
from router.diagnostics.suggest import did_you_mean
from router.events.catalog import EVENT_MODELS, EVENT_TYPES
from router.events.questions import DEFAULT_SETTINGS, QuestionSettings, dialog_questions
from router.load.source import KeyPath, SourceDoc, format_key_path


def complete_event(data: Any, *, doc: SourceDoc | None = None, base: KeyPath = (),
                   where: str = "event", questions: QuestionSettings = DEFAULT_SETTINGS) -> dict[str, Any]:
    """Validate a (possibly partial) event document and return it with every default filled
    (a dialog's `questions` as the policy builds them: `questions`)."""
    span = doc.span(base) if doc else Span(where)
    if not isinstance(data, dict):
        raise EventError([Diagnostic(INVALID_EVENT_DOCUMENT, "an event must be a mapping with a `type`",
                                     span)])
    event_type = data.get("type")
    model = EVENT_MODELS.get(event_type) if isinstance(event_type, str) else None
    if model is None:
        raise EventError([Diagnostic(
            INVALID_EVENT_DOCUMENT, f"unknown event type {event_type!r}",
            doc.span((*base, "type")) if doc else span,
            help=did_you_mean(str(event_type), EVENT_TYPES) or f"expected one of: {', '.join(EVENT_TYPES)}")])
    try:
        event = model.model_validate(data)
    except ValidationError as exc:
        raise EventError([_event_diagnostic(err, doc, base, span) for err in exc.errors()]) from None
    document = event.model_dump(mode="json")
    _derive(document, data)
    if event_type == "dialog" and "questions" not in data:
        document["questions"] = dialog_questions(
            document["kind"], title=document["title"], message=document["message"],
            options=document["options"], placeholder=document["placeholder"], prefill=document["prefill"],
            settings=questions)
    return document


def _derive(document: dict[str, Any], given: dict[str, Any]) -> None:
    """Fill what Pi's normalizer would: model refs, usage percent, command argv."""
    for key in ("model", "previous_model"):
        model = document.get(key)
        if isinstance(model, dict) and not model.get("ref") and model.get("id"):
            provider = model.get("provider") or ""
            model["ref"] = f"{provider}/{model['id']}" if provider else model["id"]
    usage = document.get("usage")
    if isinstance(usage, dict) and usage.get("percent") is None and usage.get("tokens") is not None \
            and usage.get("context_window"):
        usage["percent"] = usage["tokens"] / usage["context_window"] * 100
    if document.get("type") == "command" and "argv" not in given:
        document["argv"] = str(document.get("args") or "").split()


def _event_diagnostic(err: Any, doc: SourceDoc | None, base: KeyPath, span: Span) -> Diagnostic:
    loc = tuple(p for p in err["loc"] if isinstance(p, int) or "[" not in str(p))
    path = format_key_path(loc)
    place = doc.span((*base, *loc), key=err["type"] == "extra_forbidden") if doc else span
    if err["type"] == "extra_forbidden":
        return Diagnostic(INVALID_EVENT_FIELD, f"unknown event field '{path}'", place, key_path=path,
                          help="see docs/events.md for the fields of each event type")
    message = err["msg"][0].lower() + err["msg"][1:]
    return Diagnostic(INVALID_EVENT_FIELD, f"event field '{path}': {message}", place, key_path=path)
