"""router.events.questions: any question shape -> DecisionQuestion (the seed's shapes)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.compile.question_settings import policy_question_settings
from router.events.catalog import Question
from router.events.questions import (
    CONTEXT_CAP,
    QuestionSettings,
    dialog_questions,
    explicit_context,
    normalize_options,
    normalize_questions,
    question_context,
    render_excerpt,
)
from router.load.paths import packs_dir


@functools.cache
def decision() -> QuestionSettings:
    """How the decision pack builds question and dialog events (its `provides.questions:`)."""
    policy, diagnostics = compile_files([("pack", packs_dir() / "decision.yaml")])
    assert policy is not None, [d.message for d in diagnostics]
    return policy_question_settings(policy, {})


def one(raw: Any) -> dict[str, Any]:
    [question] = normalize_questions(raw)
    return question


def values(question: dict[str, Any]) -> list[str]:
    return [o["value"] for o in question["options"]]


# 17: a non-object input is one question whose prompt is the input as text


@pytest.mark.parametrize(("raw", "prompt"), [("Ship it?", "Ship it?"), ("  padded  ", "padded"), (42, "42"),
                                             (None, "Question 1"), ("", "Question 1")])
def test_rule17_non_object_input_is_one_question(raw: Any, prompt: str) -> None:
    question = one(raw)
    assert question == {"id": "q1", "header": None, "prompt": prompt, "options": [], "allow_other": True,
                        "multi_select": False}


def test_rule17_non_object_input_rendered_like_javascript_string() -> None:
    assert one(True)["prompt"] == "true"
    assert normalize_questions({"questions": [None]})[0]["prompt"] == "null"


# 18: questions[] when present and non-empty, else the root is the question


def test_rule18_questions_array_each_element_a_question() -> None:
    raw = {"question": "root", "questions": [{"question": "a"}, "b", {"text": "c"}]}
    questions = normalize_questions(raw)
    assert [q["prompt"] for q in questions] == ["a", "b", "c"]
    assert [q["id"] for q in questions] == ["q1", "q2", "q3"]


@pytest.mark.parametrize("items", [[], None, "not a list", {"question": "x"}])
def test_rule18_empty_or_invalid_questions_root_is_the_question(items: Any) -> None:
    assert one({"question": "root", "questions": items})["prompt"] == "root"


# 19: prompt keys in order, else "Question N"


def test_rule19_prompt_keys_in_order() -> None:
    keys = ["question", "prompt", "text", "message", "title", "label"]
    for index, key in enumerate(keys):
        raw = {k: f"from {k}" for k in keys[index:]}
        assert one(raw)["prompt"] == f"from {key}"


def test_rule19_prompt_skips_empty_and_non_text_values() -> None:
    assert one({"question": "   ", "prompt": ["x"], "text": {"a": 1}, "title": " T "})["prompt"] == "T"


def test_rule19_prompt_default_numbered_from_one() -> None:
    questions = normalize_questions({"questions": [{}, {"header": "h"}, {"question": ""}]})
    assert [q["prompt"] for q in questions] == ["Question 1", "Question 2", "Question 3"]


# 20: id keys in order, else "qN"; 21: header keys


def test_rule20_id_keys_in_order_and_default() -> None:
    questions = normalize_questions({"questions": [
        {"id": "scope", "key": "k", "name": "n"}, {"key": "k", "name": "n"}, {"name": "n"}, {"id": 7}, {}]})
    assert [q["id"] for q in questions] == ["scope", "k", "n", "7", "q5"]


def test_rule21_header_then_short_label() -> None:
    raw = {"questions": [{"header": "Scope", "shortLabel": "S"}, {"shortLabel": "S"}, {}]}
    questions = normalize_questions(raw)
    assert [q["header"] for q in questions] == ["Scope", "S", None]


# 22: root options are inherited by sub-questions without their own


def test_rule22_root_options_inherited_by_sub_questions() -> None:
    raw = {"options": ["A", "B"],
           "questions": [{"question": "1"}, {"question": "2"}, {"question": "3", "options": ["C"]}]}
    questions = normalize_questions(raw)
    assert [values(q) for q in questions] == [["A", "B"], ["A", "B"], ["C"]]


# 23: string options trimmed, empties and non-strings dropped


def test_rule23_string_options_trimmed_empties_and_non_strings_dropped() -> None:
    assert normalize_options(["A", "", 3, "  B  ", None, True, ["x"], "   "]) == [
        {"value": "A", "label": "A", "description": None}, {"value": "B", "label": "B", "description": None}]
    assert normalize_options("A, B") == [] and normalize_options(None) == []


# 24: object options: label, value and description keys


def test_rule24_object_option_keys_in_order() -> None:
    options = normalize_options([
        {"label": "MVP"},
        {"name": "N", "title": "T", "value": "v", "id": "i", "key": "k", "help": "H", "detail": "D"},
        {"title": "T", "id": "i", "key": "k", "detail": "D"},
        {"value": "only-value", "description": "Desc", "help": "H"},
        {"key": "k"},
    ])
    assert options == [
        {"value": "MVP", "label": "MVP", "description": None},
        {"value": "v", "label": "N", "description": "H"},
        {"value": "i", "label": "T", "description": "D"},
        {"value": "only-value", "label": "only-value", "description": "Desc"},
        {"value": "k", "label": "Option 5", "description": None},
    ]


def test_rule24_option_number_is_the_original_index() -> None:
    assert normalize_options(["", 3, {}]) == [{"value": "Option 3", "label": "Option 3", "description": None}]


# 25: allowOther is the question's own boolean (default true); the root's only when it is the question


def test_rule25_allow_other_default_true_and_own_value() -> None:
    assert one({"question": "q", "options": ["a"]})["allow_other"] is True
    assert one({"question": "q", "allowOther": False})["allow_other"] is False
    assert one({"question": "q", "allowOther": "no"})["allow_other"] is True


def test_rule25_allow_other_not_inherited_from_root() -> None:
    raw = {"allowOther": False, "questions": [{"question": "a"}, {"question": "b", "allowOther": False}]}
    questions = normalize_questions(raw)
    assert [q["allow_other"] for q in questions] == [True, False]


# 26: multiSelect: own boolean, else the root's, else false


def test_rule26_multi_select_inherited_from_root() -> None:
    questions = normalize_questions({"multiSelect": True, "questions": [
        {"question": "a"}, {"question": "b", "multiSelect": False}, {"question": "c", "multiSelect": "yes"}]})
    assert [q["multi_select"] for q in questions] == [True, False, True]
    not_a_bool = normalize_questions({"questions": [{"question": "a"}], "multiSelect": 1})
    assert not_a_bool[0]["multi_select"] is False


# 27: context, else description, else the excerpt (an explicit context suppresses the excerpt)


def test_rule27_context_then_description_then_excerpt() -> None:
    assert question_context({"context": "X", "description": "D"}, "user: hi") == "X"
    assert question_context({"description": "D"}, "user: hi") == "D"
    assert question_context({"context": "  ", "description": 3}, "user: hi") == "user: hi"
    assert question_context("bare", "user: hi") == "user: hi"


def test_rule27_explicit_context_none_without_context_or_description() -> None:
    assert explicit_context({"context": "X", "description": "D"}) == "X"
    assert explicit_context({"description": "D"}) == "D"
    assert explicit_context({"context": "  ", "description": 3}) is None
    assert explicit_context("bare") is None


def test_rule27_context_capped_at_12000_chars() -> None:
    assert question_context({"context": "c" * 20000}, "") == "c" * CONTEXT_CAP
    assert question_context({}, "x" + "e" * CONTEXT_CAP) == "e" * CONTEXT_CAP


# 28: the excerpt: last 12 entries, `role: text`, empties skipped, joined by newlines, last chars kept


def test_rule28_excerpt_last_twelve_entries() -> None:
    messages = [{"role": "user" if i % 2 else "assistant", "text": f"m{i}"} for i in range(20)]
    lines = render_excerpt(messages, settings=decision()).split("\n")
    assert lines == [f"{'user' if i % 2 else 'assistant'}: m{i}" for i in range(8, 20)]
    assert len(render_excerpt(messages).split("\n")) == 10  # the engine's neutral default


def test_rule28_excerpt_empties_skipped_and_text_trimmed() -> None:
    messages = [{"role": "user", "text": "  a  "}, {"role": "assistant", "text": ""},
                {"role": "toolResult", "text": None}, {"text": "no role"}]
    assert render_excerpt(messages) == "user: a\nunknown: no role"


def test_rule28_excerpt_keeps_the_last_chars() -> None:
    messages = [{"role": "user", "text": "a" * 100}, {"role": "assistant", "text": "b" * 100}]
    assert render_excerpt(messages, max_chars=50) == "b" * 50
    assert render_excerpt(messages, max_chars=0) == ""
    assert len(render_excerpt([{"role": "user", "text": "x" * 20000}])) == CONTEXT_CAP


def test_rule28_excerpt_empty() -> None:
    assert render_excerpt([]) == ""


def test_rule28_excerpt_non_object_entries_skipped() -> None:
    assert render_excerpt([None, "text", 3, {"role": "user", "text": "a"}]) == "user: a"


# the UI shims' questions


def test_dialog_select_prompt_title_string_options_no_other() -> None:
    [question] = dialog_questions("select", title="Pick one", options=["a", " b ", ""])
    assert question == {"id": "q1", "header": None, "prompt": "Pick one", "allow_other": False,
                        "multi_select": False, "options": [{"value": "a", "label": "a", "description": None},
                                                           {"value": "b", "label": "b", "description": None}]}


def test_dialog_confirm_yes_no_options() -> None:
    [question] = dialog_questions("confirm", title="Delete the branch?", message="main is protected",
                                  settings=decision())
    assert question["prompt"] == "Delete the branch?\nmain is protected"
    assert question["options"] == [
        {"value": "yes", "label": "Yes", "description": "Approve and continue."},
        {"value": "no", "label": "No", "description": "Decline and stop this action."}]
    assert question["allow_other"] is False
    assert dialog_questions("confirm", title="Sure?")[0]["prompt"] == "Sure?"


def test_dialog_input_and_editor_prompts() -> None:
    pack = decision()
    assert dialog_questions("input", title="Name", placeholder="p", settings=pack)[0]["prompt"] == \
        "Name\nPlaceholder: p"
    assert dialog_questions("input", title="Name", placeholder="p")[0]["prompt"] == "Name\np"  # neutral
    assert dialog_questions("input", title="Name")[0]["prompt"] == "Name"
    editor = dialog_questions("editor", title="Edit", prefill="draft", settings=pack)[0]
    assert editor["prompt"] == "Edit\nPrefilled value: draft" and editor["allow_other"] is True
    assert editor["options"] == []
    assert dialog_questions("custom", title="T")[0]["prompt"] == "T"


def test_dialog_confirm_options_are_copies() -> None:
    first = dialog_questions("confirm", title="a")[0]
    first["options"][0]["value"] = "changed"
    assert dialog_questions("confirm", title="a")[0]["options"][0]["value"] == "yes"


# property: any JSON input gives at least one valid question

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["question", "prompt", "text", "title", "label", "id", "key", "name", "header",
                         "options", "value", "description", "allowOther", "multiSelect", "questions",
                         "context"])
        | st.text(max_size=4), inner, max_size=6),
    max_leaves=25)


@settings(max_examples=100, deadline=None)
@given(JSON)
def test_normalize_questions_any_input_gives_valid_questions(raw: Any) -> None:
    questions = normalize_questions(raw)
    assert len(questions) >= 1
    for question in questions:
        Question.model_validate(question)
        assert isinstance(question["prompt"], str) and question["prompt"].strip()
        assert question["prompt"] == question["prompt"].strip()
        assert all(isinstance(o["value"], str) and isinstance(o["label"], str) for o in question["options"])
        assert isinstance(question["allow_other"], bool) and isinstance(question["multi_select"], bool)
    assert isinstance(question_context(raw, "excerpt"), str)
