"""Raw bridge payloads (Pi's event objects plus context) -> normalized event documents.

The bridge sends `{type, payload, ctx}` with Pi's own field names; this module is the only place
that knows them. The result follows `router.events.catalog` (see docs/events.md) as plain dicts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from router.events.questions import (
    DEFAULT_SETTINGS,
    QuestionSettings,
    dialog_questions,
    explicit_context,
    normalize_questions,
    question_context,
    render_excerpt,
)

Raw = Mapping[str, Any]


def _count(value: Any) -> int:
    """A count from the bridge: a finite number, else 0 (odd payloads never fail an event)."""
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(value)
    return 0


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _model(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping) or not raw.get("id"):
        return None
    provider, model_id = str(raw.get("provider") or ""), str(raw.get("id"))
    cost = _prices(raw.get("cost"))
    return {
        "provider": provider, "id": model_id, "ref": f"{provider}/{model_id}" if provider else model_id,
        "name": raw.get("name"), "api": raw.get("api"), "context_window": raw.get("contextWindow"),
        "max_tokens": raw.get("maxTokens"), "reasoning": bool(raw.get("reasoning")),
        "input": _list(raw.get("input")),
        "cost": cost,
        "virtual": raw.get("api") == "pi-virtual" or bool(raw.get("virtual")),
    }


def _prices(raw: Any) -> dict[str, Any] | None:
    """A model's prices, or None when it has none: Pi fills in zeros for a model without a price,
    so all-zero prices mean "no price", never "free"."""
    if not isinstance(raw, Mapping):
        return None
    cost = {"input": raw.get("input"), "output": raw.get("output"),
            "cache_read": raw.get("cacheRead"), "cache_write": raw.get("cacheWrite")}
    return cost if any(v for v in cost.values()) else None


def _choice(raw: Any) -> dict[str, Any] | None:
    """A model Pi's route request names with its level: `{model: {provider, id, …}, thinkingLevel}`."""
    model = _map(_map(raw).get("model"))
    if not model.get("id"):
        return None
    provider, model_id = str(model.get("provider") or ""), str(model.get("id"))
    return {"ref": f"{provider}/{model_id}", "provider": provider, "id": model_id,
            "thinking_level": _map(raw).get("thinkingLevel")}


def _usage(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None
    return {"tokens": raw.get("tokens"), "context_window": raw.get("contextWindow"),
            "percent": raw.get("percent")}


def common(ctx: Raw, *, env: Mapping[str, str], models: Mapping[str, Any],
           registry: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fields every event carries."""
    return {
        "session": {"id": ctx.get("sessionId"), "cwd": str(ctx.get("cwd") or ""),
                    "mode": ctx.get("mode") or "cli", "has_ui": bool(ctx.get("hasUI")),
                    "subagent": env.get("PI_SUBAGENT_CHILD") == "1", "file": ctx.get("sessionFile"),
                    "project_trusted": ctx.get("projectTrusted") is True},
        "model": _model(ctx.get("model")),
        "thinking_level": ctx.get("thinkingLevel"),
        "tools": {"active": _list(ctx.get("activeTools")), "all": _list(ctx.get("allTools"))},
        "usage": _usage(ctx.get("usage")),
        "env": dict(env),
        "models": models,
        "registry": dict(registry) if registry is not None else registry_facts(None),
    }


def _message_usage(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None
    cost = raw.get("cost")
    total = cost.get("total") if isinstance(cost, Mapping) else cost
    return {"input": _count(raw.get("input")), "output": _count(raw.get("output")),
            "cache_read": _count(raw.get("cacheRead")), "cache_write": _count(raw.get("cacheWrite")),
            "cost": float(total) if isinstance(total, (int, float)) else None}


def _input(p: Raw) -> dict[str, Any]:
    return {"text": str(p.get("text") or ""), "source": p.get("source") or "interactive",
            "images": _count(p.get("images")), "streaming": p.get("streamingBehavior")}


def _before_agent_start(p: Raw) -> dict[str, Any]:
    return {"prompt": str(p.get("prompt") or ""), "message_type": p.get("messageType") or "user",
            "system_prompt": str(p.get("systemPrompt") or ""), "sections": _list(p.get("sections"))}


def _messages(raw: Any) -> list[dict[str, Any]]:
    return [{"role": str(m.get("role") or ""), "text": str(m.get("text") or ""),
             "custom_type": m.get("customType"), "tool_name": m.get("toolName")}
            for m in _list(raw) if isinstance(m, Mapping)]


def _context(p: Raw) -> dict[str, Any]:
    messages = _messages(p.get("messages"))
    last_user = next((m["text"] for m in reversed(messages) if m["role"] == "user"), None)
    return {"messages": messages, "last_user_text": last_user,
            "last_role": messages[-1]["role"] if messages else None}


def _route(p: Raw) -> dict[str, Any]:
    virtual, raw_failed = _map(p.get("model")), _map(p.get("failed"))
    failed = _choice(raw_failed)
    if failed is not None:
        message = _map(raw_failed.get("message"))
        failed.update(stop_reason=message.get("stopReason"), error=message.get("errorMessage"))
    return {
        "reason": p.get("reason") or "user",
        "virtual": {"provider": virtual.get("provider", ""), "id": virtual.get("id", ""),
                    "ref": f"{virtual.get('provider', '')}/{virtual.get('id', '')}"},
        "requested_thinking": p.get("thinkingLevel"), "previous": _choice(p.get("previous")),
        "failed": failed, "route_state": p.get("state"), "last_user_text": p.get("lastUserText"),
        "last_is_tool_result": bool(p.get("lastIsToolResult")),
        "message_count": _count(p.get("messageCount")),
    }


def _tool(p: Raw, *, result: bool) -> dict[str, Any]:
    tool = {"name": str(p.get("toolName") or ""), "call_id": p.get("toolCallId"), "input": p.get("input")}
    if result:
        tool.update(text=str(p.get("text") or ""), is_error=bool(p.get("isError")))
    return {"tool": tool}


def _question(p: Raw, settings: QuestionSettings = DEFAULT_SETTINGS) -> dict[str, Any]:
    raw = p.get("input")
    excerpt = render_excerpt(_list(p.get("excerpt")), settings=settings)
    return {"tool_name": p.get("toolName") or settings.tool_name, "source": p.get("source") or "tool",
            "questions": normalize_questions(raw), "context": question_context(raw, excerpt, settings),
            "context_given": explicit_context(raw, settings) is not None}


def _dialog(p: Raw, settings: QuestionSettings = DEFAULT_SETTINGS) -> dict[str, Any]:
    kind = str(p.get("kind") or "select")
    options = [str(o) for o in _list(p.get("options"))]
    title = str(p.get("title") or "")
    message, placeholder, prefill = (_text_or_none(p.get(k)) for k in ("message", "placeholder", "prefill"))
    return {"kind": kind, "title": title, "message": message, "options": options,
            "placeholder": placeholder, "prefill": prefill,
            "questions": dialog_questions(kind, title=title, message=message, options=options,
                                          placeholder=placeholder, prefill=prefill, settings=settings),
            "context": render_excerpt(_list(p.get("excerpt")), settings=settings)}


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _compaction(p: Raw) -> dict[str, Any]:
    return {"reason": p.get("reason") or "manual", "by_router": bool(p.get("byRouter")),
            "tokens_before": p.get("tokensBefore"), "error": str(p.get("errorMessage") or ""),
            "aborted": bool(p.get("aborted"))}


def _history(p: Raw) -> dict[str, Any]:
    h = _map(p.get("history"))
    return {"user_messages": _count(h.get("userMessages")), "first_user_text": h.get("firstUserText"),
            "last_user_text": h.get("lastUserText")}


_SPECIFIC: dict[str, Callable[[Raw], dict[str, Any]]] = {
    "input": _input,
    "before_agent_start": _before_agent_start,
    "context": _context,
    "route": _route,
    "turn_start": lambda p: {"turn_index": _count(p.get("turnIndex"))},
    "turn_end": lambda p: {"turn_index": _count(p.get("turnIndex")),
                           "outcome": p.get("outcome") or "completed",
                           "tool_calls": _count(p.get("toolCalls")),
                           "tool_results": _count(p.get("toolResults")),
                           "stop_reason": p.get("stopReason"),
                           "answered_by": p.get("answeredBy"),
                           "message_usage": _message_usage(p.get("usage"))},
    "tool_call": lambda p: _tool(p, result=False),
    "tool_result": lambda p: _tool(p, result=True),
    "model_select": lambda p: {"source": p.get("source") or "set",
                               "previous_model": _model(p.get("previousModel"))},
    "thinking_level_select": lambda p: {"level": str(p.get("level") or "off"),
                                        "previous_level": p.get("previousLevel")},
    "agent_settled": lambda p: {"aborted": bool(p.get("aborted")),
                                "had_tool_activity": bool(p.get("hadToolActivity"))},
    "session_start": lambda p: {"reason": p.get("reason") or "startup",
                                "previous_session_file": p.get("previousSessionFile"),
                                "model_flag": _text_or_none(p.get("modelFlag") or None),
                                "history": _history(p)},
    "session_shutdown": lambda p: {"reason": p.get("reason") or "quit"},
    "compaction_before": lambda p: {k: v for k, v in _compaction(p).items()
                                    if k in ("reason", "by_router", "tokens_before")},
    "compaction_done": lambda p: {k: v for k, v in _compaction(p).items()
                                  if k in ("reason", "by_router", "tokens_before")},
    "compaction_failed": lambda p: {k: v for k, v in _compaction(p).items()
                                    if k in ("reason", "by_router", "error", "aborted")},
    "project_trust": lambda p: {"cwd": str(p.get("cwd") or "")},
    "question": _question,
    "dialog": _dialog,
    "command": lambda p: {"name": str(p.get("name") or ""), "args": str(p.get("args") or ""),
                          "argv": str(p.get("args") or "").split()},
}


_WORDED: dict[str, Callable[[Raw, QuestionSettings], dict[str, Any]]] = {
    "question": _question, "dialog": _dialog}


def normalize(event_type: str, payload: Raw, ctx: Raw, *, env: Mapping[str, str],
              models: Mapping[str, Any], registry: Mapping[str, Any] | None = None,
              questions: QuestionSettings = DEFAULT_SETTINGS, cut: bool = False) -> dict[str, Any]:
    """One normalized event document; unknown types raise KeyError. `questions` is how the
    policy builds question and dialog events (its `provides.questions:`); `cut`: the protocol cut
    parts of the payload past its limits (`payload_cut`, router/runtime/protocol.py)."""
    worded = _WORDED.get(event_type)
    specific = worded(_map(payload), questions) if worded else _SPECIFIC[event_type](_map(payload))
    event = common(_map(ctx), env=env, models=models, registry=registry)
    event.update(specific)
    event["type"] = event_type
    event["payload_cut"] = cut
    return event


def registry_facts(raw: Any) -> dict[str, Any]:
    """What Pi's registry knows beyond the available models: provider ids, classifier refs and the
    providers that discover models at run time (None when Pi did not say)."""
    facts = _map(raw)
    discovering = facts.get("discovering")
    return {"providers": [str(p) for p in _list(facts.get("providers"))],
            "classifiers": [str(c) for c in _list(facts.get("classifiers"))],
            "discovering": [str(p) for p in discovering] if isinstance(discovering, list) else None}


def model_catalog(raw_models: Any) -> dict[str, Any]:
    """Pi's available models (raw registry objects) keyed by ref."""
    catalog = {}
    for raw in _list(raw_models):
        model = _model(raw)
        if model is not None:
            catalog[model["ref"]] = model
    return catalog
