"""A session's entries -> the sequence of events Pi fired, as the bridge would have sent them.

Pure and in file order (abandoned branches included: they happened). Each step carries Pi's
own field names (the payload the bridge sends), so `router.normalize` stays the one place that
maps them. Steps whose payload depends on what the replayed policy decided (the model of a
turn, a route's virtual model) are completed by the runner. Pseudo steps (type starting with
`@`) are facts of the session, not events: an assistant answer, a recorded model or thinking
change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from router.load.prices import Tokens
from router.replay.session_file import Entry, SessionFile

ANSWER, MODEL, THINKING = "@answer", "@model", "@thinking"
PI_DEFAULT_TOOLS = ("read", "bash", "edit", "write")  # what Pi 1.6 activates by default
QUICK_SECONDS = 0.5  # a model change this close before a prompt came with it (a rule's doing)


@dataclass
class Step:
    """One event (or pseudo step) of the rebuilt session."""

    type: str
    payload: dict[str, Any]
    line: int
    turn: int  # the assistant answer (1-based) the step belongs to or leads to
    tokens: Tokens | None = None  # @answer: the message's usage
    recorded_cost: float | None = None  # @answer: Pi's computed cost (None when unpriced)
    ref: str | None = None  # @answer: the model that answered; @model: the model selected
    quick: bool = False  # @model: came right before a prompt (likely a rule's, not the user's)


@dataclass
class _Walk:
    """The rebuild's running view of the session."""

    session: SessionFile
    steps: list[Step] = field(default_factory=list)
    answers: int = 0  # assistant messages so far
    in_run: bool = False
    turn_open: bool = False
    turn_index: int = 0
    turn_calls: int = 0
    turn_results: int = 0
    turn_message: dict[str, Any] = field(default_factory=dict)
    had_tools: bool = False
    messages: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (entry id, context message)
    started: bool = False  # the initial model/thinking entries are behind us
    line: int = 0

    def emit(self, kind: str, payload: dict[str, Any], **extra: Any) -> None:
        turn = extra.pop("turn", self.answers if self.turn_open or kind in _AFTER else self.answers + 1)
        self.steps.append(Step(kind, payload, self.line, turn, **extra))


_AFTER = frozenset({"agent_settled", "compaction_before", "compaction_done", "session_shutdown",
                    MODEL, THINKING})


def rebuild(session: SessionFile, *, question_tools: frozenset[str] = frozenset()) -> list[Step]:
    """The steps of one session, in the order Pi fired them.

    `question_tools` are the policy's question tools (its `provides.tools`): a call of one fires a
    `question` event between its tool_call and tool_result.
    """
    walk = _Walk(session)
    entries = session.entries
    opened = False  # session_start comes after the initial model and thinking entries: it has a model
    for index, entry in enumerate(entries):
        walk.line = entry.line
        if not opened and not _initial(walk, entry):
            opened = _open(walk)
        _step(walk, entry, entries[index + 1] if index + 1 < len(entries) else None, question_tools)
    if not opened:
        _open(walk)
    _end_run(walk)
    walk.emit("session_shutdown", {"reason": "quit"})
    return walk.steps


def _initial(walk: _Walk, entry: Entry) -> bool:
    """A model or thinking entry before the first message: the session's starting selection."""
    return not walk.started and entry.type in ("model_change", "thinking_level_change")


def _open(walk: _Walk) -> bool:
    walk.emit("session_start", {"reason": "startup", "history": {"userMessages": 0}}, turn=0)
    return True


def _step(walk: _Walk, entry: Entry, following: Entry | None, question_tools: frozenset[str]) -> None:
    kind = entry.type
    if kind == "message":
        _message(walk, entry, question_tools)
    elif kind == "model_change":
        ref = f"{entry.data.get('provider') or ''}/{entry.data.get('modelId') or ''}"
        if walk.started:
            walk.emit(MODEL, {}, ref=ref, quick=_just_before_prompt(entry, following))
        else:
            walk.emit(MODEL, {"initial": True}, ref=ref, turn=0)
    elif kind == "thinking_level_change":
        level = str(entry.data.get("thinkingLevel") or "off")
        walk.emit(THINKING, {"level": level, "initial": not walk.started},
                  quick=_just_before_prompt(entry, following))
    elif kind == "compaction":
        _compaction(walk, entry)


def _message(walk: _Walk, entry: Entry, question_tools: frozenset[str]) -> None:
    message = entry.message
    role = str(message.get("role") or "")
    if role == "system":
        return
    walk.started = True
    if role == "user":
        _user(walk, message)
    elif role == "assistant":
        _assistant(walk, message)
    elif role == "toolResult":
        _tool_result(walk, message, question_tools)
    walk.messages.append((str(entry.data.get("id") or ""), _context_message(message)))


def _user(walk: _Walk, message: dict[str, Any]) -> None:
    _end_run(walk)
    text = text_of(message.get("content"))
    images = sum(1 for b in _list(message.get("content")) if isinstance(b, dict) and b.get("type") == "image")
    walk.emit("input", {"text": text, "source": "interactive", "images": images})
    walk.emit("before_agent_start", {"prompt": text, "messageType": "user"})
    walk.in_run, walk.turn_index, walk.had_tools = True, 0, False


def _assistant(walk: _Walk, message: dict[str, Any]) -> None:
    if walk.turn_open:
        _end_turn(walk)
        walk.turn_index += 1
    walk.in_run = True
    walk.emit("turn_start", {"turnIndex": walk.turn_index})
    walk.emit("context", {"messages": [m for _, m in walk.messages]})
    walk.emit("route", {"reason": _route_reason(walk), "messageCount": len(walk.messages),
                        "lastUserText": _last_user_text(walk),
                        "lastIsToolResult": _last_role(walk) == "toolResult"})
    walk.answers += 1
    walk.turn_open, walk.turn_message = True, message
    calls = [b for b in _list(message.get("content")) if isinstance(b, dict) and b.get("type") == "toolCall"]
    walk.turn_calls, walk.turn_results = len(calls), 0
    ref = f"{message.get('provider') or ''}/{message.get('model') or ''}"
    usage = message.get("usage")
    walk.emit(ANSWER, {"stopReason": message.get("stopReason")}, ref=ref, tokens=Tokens.of(usage),
              recorded_cost=_recorded_cost(usage))
    for call in calls:
        walk.emit("tool_call", {"toolName": str(call.get("name") or ""), "toolCallId": call.get("id"),
                                "input": call.get("arguments")})


def _tool_result(walk: _Walk, message: dict[str, Any], question_tools: frozenset[str]) -> None:
    name = str(message.get("toolName") or "")
    call = _call_input(walk.turn_message, message.get("toolCallId"))
    if name in question_tools:
        walk.emit("question", {"toolName": name, "source": "tool", "input": call,
                               "excerpt": [{"role": m["role"], "text": m["text"]}
                                           for _, m in walk.messages[-12:]]})
    walk.emit("tool_result", {"toolName": name, "toolCallId": message.get("toolCallId"), "input": call,
                              "text": text_of(message.get("content")),
                              "isError": bool(message.get("isError"))})
    walk.turn_results += 1
    walk.had_tools = True


def _compaction(walk: _Walk, entry: Entry) -> None:
    _end_run(walk)
    tokens = entry.data.get("tokensBefore")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
    walk.emit("compaction_before", {"reason": "threshold", "tokensBefore": tokens})
    walk.emit("compaction_done", {"reason": "threshold", "tokensBefore": tokens})
    kept = str(entry.data.get("firstKeptEntryId") or "")
    ids = [entry_id for entry_id, _ in walk.messages]
    rest = walk.messages[ids.index(kept):] if kept in ids else []
    summary = {"role": "compactionSummary", "text": str(entry.data.get("summary") or ""),
               "customType": None, "toolName": None}
    walk.messages = [("", summary), *rest]


def _end_turn(walk: _Walk) -> None:
    message = walk.turn_message
    walk.emit("turn_end", {"turnIndex": walk.turn_index, "outcome": _outcome(message.get("stopReason")),
                           "toolCalls": walk.turn_calls, "toolResults": walk.turn_results,
                           "stopReason": message.get("stopReason"), "usage": message.get("usage")})
    walk.turn_open = False


def _end_run(walk: _Walk) -> None:
    if walk.turn_open:
        _end_turn(walk)
    if walk.in_run:
        aborted = walk.turn_message.get("stopReason") == "aborted"
        walk.emit("agent_settled", {"aborted": aborted, "hadToolActivity": walk.had_tools})
        walk.in_run = False


def _last_role(walk: _Walk) -> str | None:
    return walk.messages[-1][1]["role"] if walk.messages else None


def _route_reason(walk: _Walk) -> str:
    if _last_role(walk) == "toolResult":
        return "continuation"
    previous = walk.turn_message.get("stopReason") if walk.turn_open else None
    return "retry" if previous == "error" else "user"


def _last_user_text(walk: _Walk) -> str | None:
    return next((m["text"] for _, m in reversed(walk.messages) if m["role"] == "user"), None)


def _outcome(stop_reason: Any) -> str:
    return {"aborted": "aborted", "error": "error"}.get(str(stop_reason), "completed")


def _call_input(message: dict[str, Any], call_id: Any) -> Any:
    for block in _list(message.get("content")):
        if isinstance(block, dict) and block.get("type") == "toolCall" and block.get("id") == call_id:
            return block.get("arguments")
    return None


def _recorded_cost(usage: Any) -> float | None:
    """Pi's cost of the message; 0 means Pi had no price for the model, so: unknown."""
    cost = usage.get("cost") if isinstance(usage, dict) else None
    total = cost.get("total") if isinstance(cost, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
        return float(total)
    return None


def _context_message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": str(message.get("role") or ""), "text": text_of(message.get("content")),
            "customType": message.get("customType"), "toolName": message.get("toolName")}


def _just_before_prompt(entry: Entry, following: Entry | None) -> bool:
    """Whether the next entry is a user message written within QUICK_SECONDS of this one."""
    if following is None or following.type != "message" or following.message.get("role") != "user":
        return False
    start, end = _time(entry.data.get("timestamp")), _time(following.data.get("timestamp"))
    return start is not None and end is not None and 0 <= end - start <= QUICK_SECONDS


def _time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def text_of(content: Any) -> str:
    """The text of a message's content (a string, or its text blocks joined), as the bridge does."""
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in _list(content)
                     if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def declared_tools(session: SessionFile) -> list[str]:
    """Pi's default tools plus every tool a system message of the session declared (the tools the
    session had registered; which of them a rule had switched off is the replay's to decide)."""
    names = dict.fromkeys(PI_DEFAULT_TOOLS)
    for entry in session.entries:
        system = entry.message if entry.type == "message" else entry.data.get("systemMessage")
        if not isinstance(system, dict) or system.get("role") != "system":
            continue
        for tool in _list(system.get("toolsAdded")):
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                names[tool["name"]] = None
    return list(names)
