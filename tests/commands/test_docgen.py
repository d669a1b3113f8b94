"""router.commands.docgen: the committed reference pages match the code and document every registered name."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from router.actions import ACTIONS
from router.commands import docgen
from router.diagnostics.codes import CODES
from router.events.catalog import EVENT_MODELS, EVENT_TYPES
from router.events.examples import EXAMPLES
from router.lang.functions import FUNCTIONS
from tests.helpers import compile_ok, decide

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"


def test_stale_committed_pages_are_up_to_date() -> None:
    assert docgen.stale(DOCS) == [], "run `router docs` and commit the result"


def test_stale_missing_and_edited_pages_reported(tmp_path: Path) -> None:
    assert docgen.stale(tmp_path) == list(docgen.PAGES)
    written = docgen.write(tmp_path)
    assert sorted(written) == sorted(tmp_path / name for name in docgen.PAGES)
    assert docgen.stale(tmp_path) == []
    name = next(iter(docgen.PAGES))
    (tmp_path / name).write_text((tmp_path / name).read_text() + "hand edit\n")
    assert docgen.stale(tmp_path) == [name]


def test_pages_start_with_the_generated_header() -> None:
    for build in docgen.PAGES.values():
        assert build().startswith(docgen.HEADER)


def test_examples_exist_for_exactly_the_event_types() -> None:
    assert set(EXAMPLES) == set(EVENT_MODELS) == set(EVENT_TYPES)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_event_example_compiles_and_listens_to_its_type(tmp_path: Path, event_type: str) -> None:
    text = "version: 1\nrules:\n" + textwrap.indent(EXAMPLES[event_type], "  ") + "\n"
    policy = compile_ok(tmp_path, text)
    assert [rule.on for rule in policy.rules] == [(event_type,)]
    assert policy.event_types == (event_type,)


def test_event_example_question_answers_first_option(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, "version: 1\nrules:\n" + textwrap.indent(EXAMPLES["question"], "  "))
    decision = decide(policy, {"type": "question", "questions": [
        {"id": "q1", "prompt": "p", "options": [{"value": "mvp", "label": "MVP"}]}]})
    assert decision.actions("answer")[0]["value"] == "mvp"


def test_events_page_documents_every_type_and_common_field() -> None:
    page = docgen.events_page()
    for event_type in EVENT_TYPES:
        assert f"## `{event_type}`" in page
        assert EXAMPLES[event_type] in page
    for field in ("session", "model", "thinking_level", "tools", "usage", "env", "models"):
        assert f"| `{field}` |" in page
    for nested in ("Session", "ModelInfo", "Usage", "Tools"):
        assert f"### `{nested}`" in page


def test_actions_page_documents_every_action() -> None:
    page = docgen.actions_page()
    for name, spec in ACTIONS.items():
        assert f"## `{name}`" in page
        assert spec.example in page


def test_functions_page_documents_every_function() -> None:
    page = docgen.functions_page()
    for name, spec in FUNCTIONS.items():
        assert f"## `{name}`" in page
        assert spec.example in page


def test_codes_page_documents_every_code() -> None:
    page = docgen.codes_page()
    for code, info in CODES.items():
        assert f"## {code}: {info.title}" in page


def test_field_rows_render_types_defaults_and_escape_pipes() -> None:
    page = docgen.events_page()
    assert ("| `has_ui` | bool | true in tui and rpc modes, where dialogs can be shown "
            "(default `False`) |") in page
    assert "| `streaming` | 'steer' or 'followUp' or null |" in page
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert all(line.count(" | ") == 2 for line in rows), [r for r in rows if r.count(" | ") != 2]
