"""router.lint.mistakes: the silent mistakes lint reports (RT317, RT318, RT306 on an always-true
condition, RT302 for a field of another event)."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.compile.compiler import load_policy
from router.diagnostics.diagnostic import Diagnostic
from router.lint import run_checks


def lint(tmp_path: Path, text: str) -> list[Diagnostic]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    policy, diagnostics = load_policy(tmp_path, extra=[path], include_project=False)
    return diagnostics + (run_checks(policy) if policy is not None else [])


def codes(found: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in found if d.code == code]


RULE = "version: 1\nrules:\n  - id: r\n    on: {on}\n    when: \"{when}\"\n    do: [{{notify: x}}]\n"


def test_an_object_compared_with_a_text_names_the_field_to_compare(tmp_path: Path) -> None:
    [found] = codes(lint(tmp_path, RULE.format(on="input", when="model == 'fake/fake-cloud'")), "RT317")
    assert found.message == ("rule 'r' compares model, an object, with the text 'fake/fake-cloud': the two "
                             "are never equal")
    assert found.help is not None and found.help.startswith("compare one of its fields, e.g. "
                                                            "model.ref == 'fake/fake-cloud'")
    assert (found.span.line, found.span.col) == (5, 11)


@pytest.mark.parametrize("when", ["model.ref == 'fake/x'", "text == 'model'", "'a' == 'b'",
                                  "model.id != 'x'", "contains(text, 'x')"])
def test_fields_and_texts_compare_without_a_warning(tmp_path: Path, when: str) -> None:
    assert codes(lint(tmp_path, RULE.format(on="input", when=when)), "RT317") == []


def test_the_text_on_the_left_is_found_too(tmp_path: Path) -> None:
    found = codes(lint(tmp_path, RULE.format(on="input", when="'fake/x' != model or text == 'a'")), "RT317")
    assert len(found) == 1


@pytest.mark.parametrize("text", ["", "# a comment only\n", "version: 1\n"])
def test_a_file_that_sets_nothing_is_a_warning(tmp_path: Path, text: str) -> None:
    [found] = codes(lint(tmp_path, text), "RT318")
    assert found.message == "this policy file sets nothing: no rules, no `use:`, no vars"
    assert found.severity.value == "warning"


def test_a_file_with_vars_only_is_not_empty(tmp_path: Path) -> None:
    assert codes(lint(tmp_path, "version: 1\nvars: {x: 1}\n"), "RT318") == []


@pytest.mark.parametrize("always", ["when: \"true\"", "when: \"True\"", "match: \"`true`\""])
def test_an_always_true_condition_stops_the_rules_after_it(tmp_path: Path, always: str) -> None:
    text = ("version: 1\nrules:\n  - id: all\n    on: input\n    " + always + "\n    do: [{notify: x}]\n"
            "  - id: later\n    on: input\n    when: \"text == 'a'\"\n    do: [{notify: y}]\n")
    [found] = codes(lint(tmp_path, text), "RT306")
    assert found.message.startswith("rule 'later' can never fire: rule 'all' (")
    assert found.message.endswith(") has a condition that is always true and stops its group first")


def test_a_real_condition_does_not_stop_the_rules_after_it(tmp_path: Path) -> None:
    text = ("version: 1\nrules:\n  - id: some\n    on: input\n    when: \"text == 'b'\"\n"
            "    do: [{notify: x}]\n"
            "  - id: later\n    on: input\n    when: \"text == 'a'\"\n    do: [{notify: y}]\n")
    assert codes(lint(tmp_path, text), "RT306") == []


def test_a_field_of_another_event_says_which_events_have_it(tmp_path: Path) -> None:
    [found] = codes(lint(tmp_path, RULE.format(on="input", when="tool.name == 'bash'")), "RT302")
    assert found.help == ("'tool' is a field of tool_call, tool_result events, not of the events this reads "
                          "(`on:`); put the condition in a rule `on: tool_call`")
