"""router.events.normalize: the bridge's payloads (Pi's field names) -> normalized event documents."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.events import normalize as normalize_module
from router.events.catalog import EVENT_MODELS, EVENT_TYPES
from router.events.normalize import model_catalog, normalize

PI_MODEL = {"provider": "fake", "id": "fake-cloud", "name": "Fake Cloud", "api": "openai-completions",
            "contextWindow": 200000, "maxTokens": 16384, "reasoning": True, "input": ["text", "image"],
            "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}
MODEL_DOC = {"provider": "fake", "id": "fake-cloud", "ref": "fake/fake-cloud", "name": "Fake Cloud",
             "api": "openai-completions", "context_window": 200000, "max_tokens": 16384, "reasoning": True,
             "input": ["text", "image"], "cost": {"input": 3, "output": 15, "cache_read": 0.3,
                                                  "cache_write": 3.75}, "virtual": False}
CTX = {"cwd": "/srv/p", "mode": "rpc", "hasUI": True, "sessionId": "s-1", "sessionFile": "/s.jsonl",
       "model": PI_MODEL, "thinkingLevel": "medium", "activeTools": ["read", "bash"],
       "allTools": ["read", "bash", "edit"],
       "usage": {"tokens": 1200, "contextWindow": 128000, "percent": 0.9}}


def norm(event_type: str, payload: Any = None, ctx: Any = None, **kw: Any) -> dict[str, Any]:
    doc = normalize(event_type, payload or {}, ctx if ctx is not None else {},
                    env=kw.get("env", {}), models=kw.get("models", {}))
    EVENT_MODELS[event_type].model_validate(doc)  # every mapping result is a valid event document
    return doc


def test_normalize_common_fields_from_ctx() -> None:
    doc = norm("turn_start", {}, {**CTX, "projectTrusted": True}, env={"PI_SUBAGENT_CHILD": "1", "X": "y"},
               models={"a/b": {}})
    assert doc["session"] == {"id": "s-1", "cwd": "/srv/p", "mode": "rpc", "has_ui": True, "subagent": True,
                              "file": "/s.jsonl", "project_trusted": True}
    assert doc["model"] == MODEL_DOC
    assert doc["thinking_level"] == "medium"
    assert doc["tools"] == {"active": ["read", "bash"], "all": ["read", "bash", "edit"]}
    assert doc["usage"] == {"tokens": 1200, "context_window": 128000, "percent": 0.9}
    assert doc["env"] == {"PI_SUBAGENT_CHILD": "1", "X": "y"} and doc["models"] == {"a/b": {}}
    assert doc["type"] == "turn_start"


def test_normalize_empty_ctx_defaults() -> None:
    doc = norm("turn_start", {}, {})
    assert doc["session"] == {"id": None, "cwd": "", "mode": "cli", "has_ui": False, "subagent": False,
                              "file": None, "project_trusted": False}
    assert (doc["model"], doc["usage"], doc["thinking_level"]) == (None, None, None)
    assert doc["tools"] == {"active": [], "all": []}


def test_normalize_model_refs_virtual_and_missing_fields() -> None:
    assert norm("input", {}, {"model": {"id": "m1"}})["model"]["ref"] == "m1"
    assert norm("input", {}, {"model": {"provider": "p"}})["model"] is None
    virtual = norm("input", {}, {"model": {"provider": "cuttle", "id": "auto", "api": "pi-virtual"}})["model"]
    assert virtual["virtual"] is True and virtual["cost"] is None and virtual["input"] == []
    assert norm("input", {}, {"model": {"id": "m", "virtual": True}})["model"]["virtual"] is True
    assert norm("input", {}, {"model": None, "usage": None})["usage"] is None


def test_normalize_usage_null_tokens_after_compaction() -> None:
    usage = norm("turn_end", {}, {"usage": {"tokens": None, "contextWindow": 1000, "percent": None}})["usage"]
    assert usage == {"tokens": None, "context_window": 1000, "percent": None}


def test_model_catalog_keyed_by_ref_skipping_id_less() -> None:
    catalog = model_catalog([PI_MODEL, {"provider": "x"}, "junk", {"provider": "llama.cpp", "id": "kev"}])
    assert list(catalog) == ["fake/fake-cloud", "llama.cpp/kev"]
    assert catalog["fake/fake-cloud"] == MODEL_DOC
    assert model_catalog(None) == {}


def test_normalize_input() -> None:
    doc = norm("input", {"text": "build", "source": "rpc", "images": 2, "streamingBehavior": "steer"})
    assert [doc[k] for k in ("text", "source", "images", "streaming")] == ["build", "rpc", 2, "steer"]
    empty = norm("input", {"text": None, "streamingBehavior": None})
    assert [empty[k] for k in ("text", "source", "images", "streaming")] == ["", "interactive", 0, None]


def test_normalize_before_agent_start() -> None:
    doc = norm("before_agent_start", {"prompt": "p", "messageType": "custom", "systemPrompt": "S",
                                      "sections": ["a"]})
    keys = ("prompt", "message_type", "system_prompt", "sections")
    assert [doc[k] for k in keys] == ["p", "custom", "S", ["a"]]
    assert norm("before_agent_start")["message_type"] == "user"


def test_normalize_context_messages_and_last_user() -> None:
    doc = norm("context", {"messages": [
        {"role": "user", "text": "first"}, {"role": "assistant", "text": "a"}, "junk",
        {"role": "user", "text": "second"}, {"role": "toolResult", "text": "out", "toolName": "bash"},
        {"role": "custom", "customType": "router-guidance"}]})
    assert doc["messages"][3] == {"role": "toolResult", "text": "out", "custom_type": None,
                                  "tool_name": "bash"}
    assert doc["messages"][4] == {"role": "custom", "text": "", "custom_type": "router-guidance",
                                  "tool_name": None}
    assert (len(doc["messages"]), doc["last_user_text"], doc["last_role"]) == (5, "second", "custom")
    assert (norm("context")["last_user_text"], norm("context")["last_role"]) == (None, None)


def test_normalize_route_previous_and_failed() -> None:
    doc = norm("route", {
        "reason": "retry", "model": {"provider": "router", "id": "auto", "api": "pi-virtual"},
        "thinkingLevel": "high",
        "previous": {"model": {"provider": "fake", "id": "local"}, "thinkingLevel": "off"},
        "failed": {"model": {"provider": "fake", "id": "cloud"}, "thinkingLevel": "high",
                   "message": {"stopReason": "error", "errorMessage": "429"}},
        "state": {"tier": 2}, "lastUserText": "hi", "lastIsToolResult": True, "messageCount": 7})
    assert doc["virtual"] == {"provider": "router", "id": "auto", "ref": "router/auto"}
    assert doc["previous"] == {"ref": "fake/local", "provider": "fake", "id": "local",
                               "thinking_level": "off"}
    assert doc["failed"] == {"ref": "fake/cloud", "provider": "fake", "id": "cloud", "thinking_level": "high",
                             "stop_reason": "error", "error": "429"}
    assert [doc[k] for k in ("reason", "requested_thinking", "route_state", "last_user_text",
                             "last_is_tool_result", "message_count")] == ["retry", "high", {"tier": 2}, "hi",
                                                                         True, 7]


def test_normalize_route_first_request_has_no_previous() -> None:
    doc = norm("route", {"model": {"provider": "r", "id": "a"}, "previous": {"thinkingLevel": "off"},
                         "failed": None})
    assert (doc["previous"], doc["failed"], doc["reason"], doc["message_count"]) == (None, None, "user", 0)


def test_normalize_turn_end_usage_and_answered_by() -> None:
    doc = norm("turn_end", {"turnIndex": 2, "outcome": "error", "toolCalls": 1, "toolResults": 1,
                            "stopReason": "toolUse", "answeredBy": "fake/fake-cloud",
                            "usage": {"input": 130000, "output": 20, "cacheRead": 5, "cacheWrite": 0,
                                      "totalTokens": 130025, "cost": {"input": 0.39, "total": 0.3903}}})
    assert doc["message_usage"] == {"input": 130000, "output": 20, "cache_read": 5, "cache_write": 0,
                                    "cost": 0.3903}
    assert [doc[k] for k in ("turn_index", "outcome", "tool_calls", "tool_results", "stop_reason",
                             "answered_by")] == [2, "error", 1, 1, "toolUse", "fake/fake-cloud"]


@pytest.mark.parametrize(("cost", "expected"), [
    ({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}, None),
    (None, None),
    ({"input": 0, "output": 2, "cacheRead": 0, "cacheWrite": 0},
     {"input": 0, "output": 2, "cache_read": 0, "cache_write": 0}),
])
def test_normalize_model_without_a_price_has_cost_null(cost: Any, expected: Any) -> None:
    # Pi fills in zeros for a model whose models.json entry has no cost: that is no price, not free
    catalog = model_catalog([{**PI_MODEL, "cost": cost}])
    assert catalog["fake/fake-cloud"]["cost"] == expected


def test_normalize_turn_end_defaults_and_plain_cost() -> None:
    doc = norm("turn_end", {"usage": None, "answeredBy": None})
    assert (doc["message_usage"], doc["answered_by"], doc["outcome"], doc["turn_index"]) == (
        None, None, "completed", 0)
    assert norm("turn_end", {"usage": {"cost": 0.5}})["message_usage"]["cost"] == 0.5
    assert norm("turn_end", {"usage": {"cost": {}}})["message_usage"] == {
        "input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "cost": None}


def test_normalize_tool_call_and_result() -> None:
    call = norm("tool_call", {"toolName": "bash", "toolCallId": "c1", "input": {"command": "ls"}})
    assert call["tool"] == {"name": "bash", "call_id": "c1", "input": {"command": "ls"}}
    result = norm("tool_result", {"toolName": "bash", "toolCallId": "c1", "input": {}, "text": "out",
                                  "isError": True})
    assert result["tool"] == {"name": "bash", "call_id": "c1", "input": {}, "text": "out", "is_error": True}


def test_normalize_model_and_thinking_selects() -> None:
    doc = norm("model_select", {"source": "cycle", "previousModel": PI_MODEL})
    assert (doc["source"], doc["previous_model"]) == ("cycle", MODEL_DOC)
    assert norm("model_select", {"previousModel": None})["previous_model"] is None
    level = norm("thinking_level_select", {"level": "high", "previousLevel": "low"})
    assert (level["level"], level["previous_level"]) == ("high", "low")
    assert norm("thinking_level_select")["level"] == "off"


def test_normalize_session_events() -> None:
    start = norm("session_start", {"reason": "resume", "previousSessionFile": "/a.jsonl", "history": {
        "userMessages": 3, "firstUserText": "one", "lastUserText": "three"}})
    assert start["history"] == {"user_messages": 3, "first_user_text": "one", "last_user_text": "three"}
    assert (start["reason"], start["previous_session_file"]) == ("resume", "/a.jsonl")
    assert norm("session_start")["history"] == {"user_messages": 0, "first_user_text": None,
                                                "last_user_text": None}
    assert norm("session_shutdown", {"reason": "fork"})["reason"] == "fork"
    assert norm("session_shutdown")["reason"] == "quit"
    settled = norm("agent_settled", {"aborted": True, "hadToolActivity": True})
    assert (settled["aborted"], settled["had_tool_activity"]) == (True, True)


def test_normalize_compaction_events_keep_their_own_fields() -> None:
    payload = {"reason": "threshold", "byRouter": True, "tokensBefore": 9000, "errorMessage": "boom",
               "aborted": True}
    assert {k: v for k, v in norm("compaction_before", payload).items() if k in (
        "reason", "by_router", "tokens_before", "error", "aborted")} == {
        "reason": "threshold", "by_router": True, "tokens_before": 9000}
    done = norm("compaction_done", payload)
    assert "error" not in done and done["tokens_before"] == 9000
    failed = norm("compaction_failed", payload)
    assert [failed[k] for k in ("reason", "by_router", "error", "aborted")] == [
        "threshold", True, "boom", True]
    assert "tokens_before" not in failed
    assert norm("compaction_failed", {"errorMessage": None})["error"] == ""


def test_normalize_project_trust_and_command_argv() -> None:
    assert norm("project_trust", {"cwd": "/srv/x"})["cwd"] == "/srv/x"
    command = norm("command", {"name": "cuttle", "args": "  config set  threshold 0.4 "})
    assert (command["name"], command["args"], command["argv"]) == (
        "cuttle", "  config set  threshold 0.4 ", ["config", "set", "threshold", "0.4"])
    assert norm("command", {"name": "x", "args": None})["argv"] == []


def test_normalize_question_questions_context_and_excerpt() -> None:
    doc = norm("question", {"toolName": "ask_user_question", "source": "tool", "input": {
        "questions": [{"question": "Scope?", "options": ["MVP", "Full"]}]},
        "excerpt": [{"role": "user", "text": "build it"}, {"role": "assistant", "text": " "}]})
    assert (doc["tool_name"], doc["source"]) == ("ask_user_question", "tool")
    assert doc["context"] == "user: build it"
    [question] = doc["questions"]
    assert question["prompt"] == "Scope?" and [o["value"] for o in question["options"]] == ["MVP", "Full"]
    explicit = norm("question", {"input": {"question": "q", "context": "X"}, "excerpt": [{"role": "user",
                                                                                         "text": "y"}]})
    assert explicit["context"] == "X"
    bare = norm("question", {})
    assert (bare["tool_name"], bare["source"], bare["context"]) == ("", "tool", "")  # no pack's tool name
    assert [q["prompt"] for q in bare["questions"]] == ["Question 1"]


def test_normalize_question_context_given_only_for_the_calls_own_context() -> None:
    excerpt = [{"role": "user", "text": "build it"}]
    assert norm("question", {"input": {"question": "q"}, "excerpt": excerpt})["context_given"] is False
    for own in ({"context": "X"}, {"description": "D"}):
        doc = norm("question", {"input": {"question": "q", **own}, "excerpt": excerpt})
        assert doc["context_given"] is True


def test_decision_pack_cuts_only_the_excerpt_to_max_context_chars() -> None:
    """As in the original pi-decision-router, PI_DECISION_ROUTER_MAX_CONTEXT_CHARS caps the excerpt only."""
    from router.compile.compiler import compile_files
    from router.engine.interpreter import evaluate

    policy, _ = compile_files([("pack", Path(__file__).parent.parent.parent / "rules" / "decision.yaml")])
    assert policy is not None
    env = {"PI_DECISION_ROUTER_MAX_CONTEXT_CHARS": "5"}
    excerpt = [{"role": "user", "text": "build it now"}]

    def child_context(question: dict[str, Any]) -> str:
        doc = norm("question", {"input": question, "excerpt": excerpt}, {"cwd": "/p"}, env=env)
        decision = evaluate(policy, doc, state={"dr": {"enabled": True}})
        assert decision.pending is not None and decision.pending.name == "child_answers"
        return str(json.loads(decision.pending.params["prompt"])["context"])

    assert child_context({"question": "q", "context": "the explicit context"}) == "the explicit context"
    assert child_context({"question": "q"}) == "t now"


def test_normalize_dialog_kinds_and_excerpt() -> None:
    doc = norm("dialog", {"kind": "confirm", "title": "Delete?", "message": "the branch",
                          "excerpt": [{"role": "user", "text": "clean up"}]})
    assert (doc["title"], doc["message"], doc["context"]) == ("Delete?", "the branch", "user: clean up")
    assert doc["questions"][0]["prompt"] == "Delete?\nthe branch"
    select = norm("dialog", {"title": "Pick", "options": ["a", 2, None]})
    assert (select["kind"], select["options"]) == ("select", ["a", "2", "None"])
    editor = norm("dialog", {"kind": "editor", "title": "Edit", "prefill": "draft", "placeholder": None})
    assert (editor["prefill"], editor["placeholder"]) == ("draft", None)
    assert editor["questions"][0]["prompt"] == "Edit\ndraft"  # neutral: the decision pack adds its label


def test_normalize_unknown_type_raises_key_error() -> None:
    with pytest.raises(KeyError):
        normalize("nope", {}, {}, env={}, models={})


def test_normalize_null_payload_and_ctx_are_empty() -> None:
    doc = normalize("input", None, None, env={}, models={})  # type: ignore[arg-type]
    assert doc["text"] == "" and doc["session"]["cwd"] == ""


# --- property: whatever the bridge sends, the result is a valid event document -------------------

TEXT = st.text(max_size=10)
NUM = st.integers(0, 10**7) | st.floats(0, 1e7, allow_nan=False)
COUNT = st.integers(0, 10**6)
SCALAR = st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.floats(allow_nan=False) | TEXT


def nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A scalar, or a list or an object of up to 3 `inner` values."""
    return SCALAR | st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3)


# Any JSON value up to 4 containers deep (deeper than any path the normalizer reads). Written out
# level by level: `st.recursive(..., max_leaves=12)` drew the same shapes at 3 times the cost
# (hypothesis redraws a tree that passes its leaf limit), most of these tests' time.
JSONISH = nested(nested(nested(nested(SCALAR))))
LEVEL = st.sampled_from(["off", "minimal", "low", "medium", "high", "xhigh", "max"])


def obj(required: dict[str, Any] | None = None, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A JSON object whose fields may be missing (undefined) or null, as JSON.stringify leaves them."""
    return st.fixed_dictionaries(required or {}, optional={k: st.none() | v for k, v in fields.items()})


COST = obj(input=NUM, output=NUM, cacheRead=NUM, cacheWrite=NUM, total=NUM)
MODEL = obj(provider=TEXT, id=TEXT, name=TEXT,
            api=st.sampled_from(["openai-completions", "pi-virtual"]) | TEXT, contextWindow=COUNT,
            maxTokens=COUNT, reasoning=st.booleans(),
            input=st.lists(st.sampled_from(["text", "image"]), max_size=2), cost=COST)
CHOICE = obj(model=obj(provider=TEXT, id=TEXT), thinkingLevel=LEVEL,
             message=obj(stopReason=TEXT, errorMessage=TEXT))
EXCERPT = st.lists(obj({"text": TEXT}, role=st.sampled_from(["user", "assistant", "toolResult"]) | TEXT),
                   max_size=14)
CONTEXT = obj(cwd=TEXT, mode=st.sampled_from(["tui", "rpc", "json", "print"]), hasUI=st.booleans(),
              sessionId=TEXT, sessionFile=TEXT, model=MODEL, thinkingLevel=LEVEL,
              activeTools=st.lists(TEXT, max_size=3), allTools=st.lists(TEXT, max_size=3),
              usage=obj(tokens=COUNT, contextWindow=COUNT, percent=st.floats(0, 200)))
COMPACTION = obj(reason=st.sampled_from(["manual", "threshold", "overflow"]), tokensBefore=COUNT,
                 byRouter=st.booleans(), errorMessage=TEXT, aborted=st.booleans())
TOOL = obj(toolName=TEXT, toolCallId=TEXT, input=JSONISH, text=TEXT, isError=st.booleans())
PAYLOADS: dict[str, st.SearchStrategy[Any]] = {
    "input": obj(text=TEXT, source=st.sampled_from(["interactive", "rpc", "extension"]), images=COUNT,
                 streamingBehavior=st.sampled_from(["steer", "followUp"])),
    "before_agent_start": obj(prompt=TEXT, messageType=st.sampled_from(["user", "custom"]), systemPrompt=TEXT,
                              sections=st.lists(TEXT, max_size=3)),
    "context": obj(messages=st.lists(obj(role=TEXT, text=TEXT, customType=TEXT, toolName=TEXT), max_size=4)),
    "route": obj({"model": st.fixed_dictionaries({"provider": TEXT, "id": TEXT})},
                 reason=st.sampled_from(["user", "continuation", "retry", "direct"]), thinkingLevel=LEVEL,
                 previous=CHOICE, failed=CHOICE, state=JSONISH, lastUserText=TEXT,
                 lastIsToolResult=st.booleans(), messageCount=COUNT),
    "turn_start": obj(turnIndex=COUNT),
    "turn_end": obj(turnIndex=COUNT, outcome=st.sampled_from(["completed", "aborted", "error"]),
                    toolCalls=COUNT, toolResults=COUNT, stopReason=TEXT, answeredBy=TEXT,
                    usage=obj(input=COUNT, output=COUNT, cacheRead=COUNT, cacheWrite=COUNT, totalTokens=COUNT,
                              cost=COST | NUM)),
    "tool_call": TOOL,
    "tool_result": TOOL,
    "model_select": obj(source=st.sampled_from(["set", "cycle", "restore"]), previousModel=MODEL),
    "thinking_level_select": obj(level=LEVEL, previousLevel=LEVEL),
    "agent_settled": obj(aborted=st.booleans(), hadToolActivity=st.booleans()),
    "session_start": obj(reason=st.sampled_from(["startup", "reload", "new", "resume", "fork"]),
                         previousSessionFile=TEXT,
                         history=obj(userMessages=COUNT, firstUserText=TEXT, lastUserText=TEXT)),
    "session_shutdown": obj(reason=st.sampled_from(["quit", "reload", "new", "resume", "fork"])),
    "compaction_before": COMPACTION,
    "compaction_done": COMPACTION,
    "compaction_failed": COMPACTION,
    "project_trust": obj(cwd=TEXT),
    "question": obj(toolName=TEXT, source=st.sampled_from(["tool", "event"]), input=JSONISH, excerpt=EXCERPT),
    "dialog": obj(kind=st.sampled_from(["select", "confirm", "input", "editor"]), title=TEXT | JSONISH,
                  message=TEXT | JSONISH, options=st.lists(TEXT | JSONISH, max_size=4), placeholder=TEXT,
                  prefill=TEXT, excerpt=EXCERPT),
    "command": obj(name=TEXT, args=TEXT),
}


def test_property_strategies_cover_every_event_type() -> None:
    assert set(PAYLOADS) == set(EVENT_TYPES)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_normalize_any_bridge_payload_validates(event_type: str, data: st.DataObject) -> None:
    payload = data.draw(st.none() | PAYLOADS[event_type])
    ctx = data.draw(st.none() | CONTEXT)
    env = data.draw(st.dictionaries(TEXT, TEXT, max_size=3))
    models = model_catalog(data.draw(st.none() | st.lists(MODEL, max_size=3)))
    doc = normalize(event_type, payload, ctx, env=env, models=models)
    assert doc["type"] == event_type
    EVENT_MODELS[event_type].model_validate(doc)
    json.dumps(doc)  # plain data, as the interpreter and the protocol need


# Every field name the normalizer reads, so odd values reach each of them.
READ_FIELDS = sorted(set(re.findall(r'\.get\("(\w+)"', Path(normalize_module.__file__).read_text())))
ODD = st.dictionaries(st.sampled_from(READ_FIELDS), JSONISH, max_size=8)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
@settings(max_examples=60, deadline=None)
@given(payload=JSONISH | ODD, ctx=JSONISH | ODD, models=JSONISH)
def test_normalize_odd_payload_never_raises(event_type: str, payload: Any, ctx: Any, models: Any) -> None:
    doc = normalize(event_type, payload, ctx, env={}, models=model_catalog(models))
    assert doc["type"] == event_type
    assert isinstance(doc["tools"]["active"], list) and isinstance(doc["session"]["cwd"], str)
    json.dumps(doc)
