"""load.event_documents: people's event documents get every default, derived fields and located errors."""

from __future__ import annotations

from typing import Any

import pytest

from router.diagnostics.diagnostic import Diagnostic
from router.diagnostics.errors import EventError
from router.events.catalog import EVENT_TYPES
from router.load.event_documents import complete_event
from router.load.source import parse_source
from tests.helpers import where


def errors_of(data: Any, text: str | None = None) -> list[Diagnostic]:
    doc = parse_source(text, "event.yaml") if text is not None else None
    with pytest.raises(EventError) as info:
        complete_event(doc.data if doc else data, doc=doc)
    return info.value.diagnostics


def test_complete_event_input_fills_every_default() -> None:
    event = complete_event({"type": "input"})
    assert event == {
        "type": "input", "text": "", "source": "interactive", "images": 0, "streaming": None,
        "session": {"id": None, "cwd": "", "mode": "cli", "has_ui": False, "subagent": False, "file": None,
                    "project_trusted": False},
        "model": None, "thinking_level": None, "tools": {"active": [], "all": []}, "usage": None,
        "env": {}, "models": {}, "registry": {"providers": [], "classifiers": [], "discovering": None},
        "payload_cut": False,
    }


REQUIRED = {"route": "virtual", "command": "name", "thinking_level_select": "level", "tool_call": "tool",
            "tool_result": "tool"}


@pytest.mark.parametrize("event_type", [t for t in EVENT_TYPES if t not in REQUIRED])
def test_complete_event_type_alone_is_enough(event_type: str) -> None:
    assert complete_event({"type": event_type})["type"] == event_type


@pytest.mark.parametrize("event_type", sorted(REQUIRED))
def test_complete_event_required_field_missing_rt131(event_type: str) -> None:
    [diagnostic] = errors_of({"type": event_type})
    assert (diagnostic.code, diagnostic.key_path) == ("RT131", REQUIRED[event_type])


def test_complete_event_required_fields_of_route_command_thinking() -> None:
    route = complete_event({"type": "route", "virtual": {"provider": "r", "id": "a", "ref": "r/a"}})
    assert route["reason"] == "user" and route["previous"] is None
    assert complete_event({"type": "command", "name": "x"})["args"] == ""
    assert complete_event({"type": "thinking_level_select", "level": "high"})["previous_level"] is None
    assert complete_event({"type": "tool_result", "tool": {"name": "bash"}})["tool"] == {
        "name": "bash", "call_id": None, "input": None, "text": "", "is_error": False}


def test_complete_event_model_ref_derived_from_provider_and_id() -> None:
    assert complete_event({"type": "input", "model": {"provider": "fake", "id": "m1"}})["model"]["ref"] \
        == "fake/m1"
    assert complete_event({"type": "input", "model": {"id": "m1"}})["model"]["ref"] == "m1"
    assert complete_event({"type": "input", "model": {"id": "m1", "ref": "x/y"}})["model"]["ref"] == "x/y"
    event = complete_event({"type": "model_select", "previous_model": {"provider": "a", "id": "b"}})
    assert event["previous_model"]["ref"] == "a/b"


def test_complete_event_model_without_id_keeps_empty_ref() -> None:
    assert complete_event({"type": "input", "model": {"provider": "fake"}})["model"]["ref"] == ""


def test_complete_event_usage_percent_derived() -> None:
    usage = complete_event({"type": "turn_end", "usage": {"tokens": 50, "context_window": 200}})["usage"]
    assert usage == {"tokens": 50, "context_window": 200, "percent": 25.0}


def test_complete_event_usage_percent_explicit_or_unknown() -> None:
    given = complete_event({"type": "turn_end", "usage": {"tokens": 50, "context_window": 200, "percent": 7}})
    assert given["usage"]["percent"] == 7
    assert complete_event({"type": "turn_end", "usage": {"tokens": 50}})["usage"]["percent"] is None
    assert complete_event({"type": "turn_end", "usage": {"tokens": 5, "context_window": 0}})["usage"][
        "percent"] is None


def test_complete_event_command_argv_split_on_white_space() -> None:
    assert complete_event({"type": "command", "name": "r", "args": " set  mode\tcost "})["argv"] \
        == ["set", "mode", "cost"]
    assert complete_event({"type": "command", "name": "r", "args": "a b", "argv": ["x"]})["argv"] == ["x"]
    assert complete_event({"type": "command", "name": "r"})["argv"] == []


def test_complete_event_dialog_questions_derived_per_kind() -> None:
    select = complete_event({"type": "dialog", "kind": "select", "title": "Pick", "options": ["a", " b "]})
    [question] = select["questions"]
    assert question["prompt"] == "Pick" and question["allow_other"] is False
    assert [o["value"] for o in question["options"]] == ["a", "b"]
    confirm = complete_event({"type": "dialog", "kind": "confirm", "title": "Go?", "message": "really"})
    assert confirm["questions"][0]["prompt"] == "Go?\nreally"
    assert [o["value"] for o in confirm["questions"][0]["options"]] == ["yes", "no"]
    text = complete_event({"type": "dialog", "kind": "input", "title": "Name", "placeholder": "p"})
    assert text["questions"][0]["prompt"] == "Name\np"  # the engine's neutral default: no label


def test_complete_event_dialog_explicit_questions_kept() -> None:
    event = complete_event({"type": "dialog", "title": "t", "questions": [{"id": "z", "prompt": "mine"}]})
    assert [q["prompt"] for q in event["questions"]] == ["mine"]


def test_complete_event_does_not_change_its_input() -> None:
    data = {"type": "command", "name": "r", "args": "a", "model": {"id": "m"}}
    complete_event(data)
    assert data == {"type": "command", "name": "r", "args": "a", "model": {"id": "m"}}


@pytest.mark.parametrize("data", [None, [], "input", 3])
def test_complete_event_non_mapping_rt130(data: Any) -> None:
    [diagnostic] = errors_of(data)
    assert diagnostic.code == "RT130"


def test_complete_event_unknown_type_suggests_the_closest() -> None:
    [diagnostic] = errors_of(None, "# an event\ntype: inptu\n")
    assert diagnostic.code == "RT130" and "'inptu'" in diagnostic.message
    assert where(diagnostic) == (2, 7)
    assert "input" in (diagnostic.help or "")


def test_complete_event_missing_type_rt130_lists_types() -> None:
    [diagnostic] = errors_of({"text": "x"})
    assert diagnostic.code == "RT130" and "turn_end" in (diagnostic.help or "")


def test_complete_event_unknown_field_located_at_its_key() -> None:
    [diagnostic] = errors_of(None, "type: input\ntext: hi\n  \ntxt: x\n")
    assert (diagnostic.code, diagnostic.key_path) == ("RT131", "txt")
    assert "unknown event field 'txt'" in diagnostic.message
    assert where(diagnostic) == (4, 1)


def test_complete_event_nested_unknown_and_wrong_type_located() -> None:
    diagnostics = errors_of(None, "type: input\nimages: many\nmodel: {id: m, idd: 1}\n")
    by_path = {d.key_path: d for d in diagnostics}
    assert set(by_path) == {"images", "model.idd"} and {d.code for d in diagnostics} == {"RT131"}
    assert where(by_path["images"]) == (2, 9)
    assert where(by_path["model.idd"]) == (3, 16)
    assert by_path["images"].message.startswith("event field 'images': input should be")


def test_complete_event_wrong_literal_rt131() -> None:
    [diagnostic] = errors_of({"type": "input", "source": "print"})
    assert (diagnostic.code, diagnostic.key_path) == ("RT131", "source")


def test_complete_event_without_doc_uses_where_as_location() -> None:
    with pytest.raises(EventError) as info:
        complete_event({"type": "input", "nope": 1}, where="cases.yaml:3")
    assert str(info.value.diagnostics[0].span).startswith("cases.yaml:3")


def test_complete_event_base_key_path_locates_inside_a_larger_document() -> None:
    doc = parse_source("cases:\n  - event:\n      type: input\n      txt: 1\n", "t.yaml")
    with pytest.raises(EventError) as info:
        complete_event(doc.data["cases"][0]["event"], doc=doc, base=("cases", 0, "event"))
    assert where(info.value.diagnostics[0]) == (4, 7)
