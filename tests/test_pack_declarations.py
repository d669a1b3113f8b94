"""Pack behaviour and wording declared in the policy: `question_events:` (how question and dialog
events are built), `bus_events:`, a tool's `no_answer`, a virtual model's `fallback`; the engine
sends the bridge's part in `hello`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from router.commands.lint import lint_paths
from router.compile.cache import from_ir, to_ir
from router.compile.compiler import compile_files, load_policy
from router.compile.question_settings import policy_question_settings
from router.events.normalize import normalize
from router.events.questions import DEFAULT_SETTINGS
from router.runtime.server import Engine
from tests.test_server import FakeConnection

WORDED = """\
version: 1
vars:
  tool: ask_me
  lines: {input: "Hint: "}
  cap: {env: MY_CAP, type: int, default: 5}
question_events:
  tool_name: "{vars.tool}"
  excerpt_entries: 2
  context_chars: "{vars.cap}"
  confirm_options: [{value: ok, label: OK}]
  dialog_lines: "{vars.lines}"
bus_events:
  - {protocol: questionnaire, prompt: "x:prompt", blocked: "x:blocked"}
tools:
  - {name: ask_me, description: Ask, no_answer: "Nobody answered."}
virtual_models:
  - {provider: r, id: auto, fallback: [first_available]}
rules:
  - {id: q, on: [question, dialog], do: [{notify: "{context}"}]}
"""


def policy_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "router.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def compiled(tmp_path: Path, text: str = WORDED) -> Any:
    policy, diagnostics = compile_files([("file", policy_file(tmp_path, text))])
    assert policy is not None, [d.message for d in diagnostics]
    return policy


def pack_policy(tmp_path: Path, pack: str) -> Any:
    policy, diagnostics = load_policy(tmp_path, agent=tmp_path / "agent",
                                      extra=[policy_file(tmp_path, f"use: [{pack}]\n")])
    assert policy is not None, [d.message for d in diagnostics]
    return policy


EXCERPT = [{"role": "user", "text": "one"}, {"role": "assistant", "text": "two"},
           {"role": "user", "text": "three"}]


def test_question_events_shape_question_and_dialog_events(tmp_path: Path) -> None:
    settings = policy_question_settings(compiled(tmp_path), {})
    question = normalize("question", {"input": {"question": "Go?"}, "excerpt": EXCERPT}, {},
                         env={}, models={}, questions=settings)
    assert (question["tool_name"], question["context"]) == ("ask_me", "three")  # last 2 entries, 5 chars
    confirm = normalize("dialog", {"kind": "confirm", "title": "Sure?", "message": "m"}, {},
                        env={}, models={}, questions=settings)
    assert confirm["questions"][0]["options"] == [{"value": "ok", "label": "OK", "description": None}]
    assert confirm["questions"][0]["prompt"] == "Sure?\nm"  # an undeclared label keeps the default
    text = normalize("dialog", {"kind": "input", "title": "Name", "placeholder": "p"}, {},
                     env={}, models={}, questions=settings)
    assert text["questions"][0]["prompt"] == "Name\nHint: p"


def test_an_environment_bound_var_is_resolved_per_event(tmp_path: Path) -> None:
    policy = compiled(tmp_path)
    assert policy_question_settings(policy, {"MY_CAP": "9"}).context_chars == 9
    assert policy_question_settings(policy, {}).context_chars == 5


def test_without_a_declaration_the_engine_defaults_hold(tmp_path: Path) -> None:
    policy = compiled(tmp_path, "version: 1\nrules: [{id: q, on: question, do: [{notify: x}]}]\n")
    assert policy_question_settings(policy, {}) == DEFAULT_SETTINGS
    event = normalize("question", {"input": {}}, {}, env={}, models={})
    assert event["tool_name"] == "decision_request"


def test_the_decision_pack_declares_the_values_the_engine_defaults_to(tmp_path: Path) -> None:
    policy = pack_policy(tmp_path, "decision")
    assert policy is not None
    assert policy_question_settings(policy, {}) == DEFAULT_SETTINGS
    assert set(policy.question_events) == {"tool_name", "excerpt_entries", "context_chars",
                                           "confirm_options", "dialog_lines"}
    assert list(policy.bus_events) == [{"protocol": "questionnaire", "prompt": "rpiv:ask-user:prompt",
                                        "blocked": "rpiv:ask-user:blocked"}]
    [tool] = policy.tools
    assert tool["no_answer"] == "No automated answer is available; decide yourself or ask the user."


def test_the_cuttle_pack_declares_its_route_fallback(tmp_path: Path) -> None:
    policy = pack_policy(tmp_path, "cuttle")
    assert len(policy.virtual_models) == 6
    assert {tuple(v["fallback"]) for v in policy.virtual_models} == {("previous", "first_available")}


def test_the_declarations_survive_the_policy_cache(tmp_path: Path) -> None:
    policy = compiled(tmp_path)
    cached = from_ir(json.loads(json.dumps(to_ir(policy))))
    assert (cached.question_events, cached.bus_events) == (policy.question_events, policy.bus_events)
    assert policy_question_settings(cached, {}) == policy_question_settings(policy, {})


def test_hello_sends_bus_events_no_answer_and_fallback(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    agent.mkdir()
    cwd.mkdir()
    (agent / "router.yaml").write_text(WORDED, encoding="utf-8")
    engine = Engine(FakeConnection(), cwd=cwd, agent=agent, extra=[])  # type: ignore[arg-type]
    hello = asyncio.run(engine.hello({"cwd": str(cwd)}))
    assert hello["bus_events"] == [
        {"protocol": "questionnaire", "prompt": "x:prompt", "blocked": "x:blocked"}]
    assert [t["no_answer"] for t in hello["tools"]] == ["Nobody answered."]
    assert [v["fallback"] for v in hello["virtual_models"]] == [["first_available"]]
    assert hello["excerpt_entries"] == 2
    result = asyncio.run(engine.event(1, {"type": "question", "payload": {"input": {}, "excerpt": EXCERPT},
                                          "ctx": {}}))
    assert result["actions"][0]["params"]["text"] == "three"  # the sidecar builds events as declared


@pytest.mark.parametrize(("declaration", "code", "where", "words"), [
    ('question_events: {tool_name: "{vars.tol}"}', "RT303", "3:", "undefined var 'vars.tol'"),
    ("question_events: {excerpt_entries: many}", "RT111", "3:", "expected a whole number"),
    ('question_events: {context_chars: "{vars.tool}"}', "RT111", "3:", "vars.tool is 'ask'"),
    ("question_events: {dialog_lines: {inputs: x}}", "RT110", "3:", "unknown key 'inputs'"),
    ("question_events: {excerpt_entries: -1}", "RT111", "3:", "0 or more"),
    ("bus_events: [{protocol: telepathy, prompt: p}]", "RT111", "3:", "'questionnaire'"),
    ("bus_events: [{protocol: questionnaire}]", "RT112", "3:", "'prompt'"),
    ("tools: [{name: t, description: d, no_answer: [x]}]", "RT111", "3:", "valid string"),
    ("virtual_models: [{provider: p, id: a, fallback: [random]}]", "RT111", "3:", "'first_available'"),
    ("signals: {p: {probe: {models: [a/b]}}}", "RT111", "3:", "needs `prompt`"),
    ("signals: {p: {probe: {classifier: a/b}}}", "RT111", "3:", "needs `question"),
])
def test_lint_locates_bad_declarations(tmp_path: Path, declaration: str, code: str, where: str,
                                       words: str) -> None:
    path = policy_file(tmp_path, f"version: 1\nvars: {{tool: ask}}\n{declaration}\n")
    found = [d for d in lint_paths([path]) if d.severity == "error"]
    assert found, declaration
    first = found[0]
    assert (first.code, str(first.span).startswith(f"{path}:{where}")) == (code, True), \
        (first.code, str(first.span), first.message)
    assert words in first.message
