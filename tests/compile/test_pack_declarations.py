"""Pack behaviour and wording declared in the policy, under `provides:`: `questions:` (how question
and dialog events are built, each text a template over vars), `bus_events:`, a tool's `no_answer`,
a virtual model's `fallback`, the model choice's tier; the engine sends the bridge's part in `hello`.
The top-level keys `provides:` replaced still load, and lint says where each goes (RT335)."""

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
from tests.runtime.test_server import FakeConnection

WORDED = """\
version: 1
vars:
  tool: ask_me
  lines: {input: "Hint: "}
  cap: {env: MY_CAP, type: int, default: 5}
provides:
  questions:
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
  model_choice: {tier: my.tier}
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
    assert event["tool_name"] == ""  # neutral: no pack's tool name
    dialog = normalize("dialog", {"kind": "confirm", "title": "Sure?", "message": "m"}, {}, env={}, models={})
    assert [(o["value"], o["description"]) for o in dialog["questions"][0]["options"]] == \
        [("yes", None), ("no", None)]  # neutral: no pack's wording


def test_the_decision_pack_declares_its_own_wording_and_sizes(tmp_path: Path) -> None:
    policy = pack_policy(tmp_path, "decision")
    settings = policy_question_settings(policy, {})
    assert settings != DEFAULT_SETTINGS
    assert (settings.tool_name, settings.excerpt_entries, settings.context_chars) == \
        ("decision_request", 12, 12000)
    assert [o["description"] for o in settings.confirm_options] == \
        ["Approve and continue.", "Decline and stop this action."]
    assert dict(settings.dialog_lines) == {"confirm": "", "input": "Placeholder: ",
                                           "editor": "Prefilled value: "}
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
    assert cached.model_choice == policy.model_choice == {"tier": "my.tier"}
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
    ('provides: {questions: {tool_name: "{vars.tol}"}}', "RT303", "3:", "undefined var 'vars.tol'"),
    ('provides: {questions: {tool_name: "{env.X}"}}', "RT302", "3:", "reads only vars"),
    ('provides: {questions: {tool_name: "{vars.tool"}}', "RT204", "3:", "invalid template"),
    ("provides: {questions: {excerpt_entries: many}}", "RT111", "3:", "expected a whole number"),
    ('provides: {questions: {context_chars: "{vars.tool}"}}', "RT111", "3:", "vars.tool is 'ask'"),
    ("provides: {questions: {dialog_lines: {inputs: x}}}", "RT110", "3:", "unknown key 'inputs'"),
    ("provides: {questions: {excerpt_entries: -1}}", "RT111", "3:", "0 or more"),
    ("provides: {bus_events: [{protocol: telepathy, prompt: p}]}", "RT111", "3:", "'questionnaire'"),
    ("provides: {bus_events: [{protocol: questionnaire}]}", "RT112", "3:", "'prompt'"),
    ("provides: {tools: [{name: t, description: d, no_answer: [x]}]}", "RT111", "3:", "valid string"),
    ("provides: {virtual_models: [{provider: p, id: a, fallback: [random]}]}", "RT111", "3:",
     "'first_available'"),
    ("provides: {model_choice: {tier: 'a b'}}", "RT111", "3:", "not a state key"),
    ("provides: {tools: []}\ntools: []", "RT111", "4:", "declared twice"),  # at the old key
    # the old top-level keys are located where they are written
    ('question_events: {tool_name: "{vars.tol}"}', "RT303", "3:", "undefined var 'vars.tol'"),
    ("tools: [{name: t, description: d, no_answer: [x]}]", "RT111", "3:", "valid string"),
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


LEGACY = """\
version: 1
vars: {tool: ask_me}
# the tool
tools:
  - {name: ask_me, description: Ask}
question_events: {tool_name: "{vars.tool}"}
import: {file: my.json, var: tool}
rules:
  - {id: q, on: question, do: [{notify: "{tool_name}"}]}
"""


def test_the_old_top_level_keys_load_as_provides_and_lint_says_where_each_goes(tmp_path: Path) -> None:
    old = compiled(tmp_path, LEGACY)
    new = compiled(tmp_path, WORDED)
    assert [t["name"] for t in old.tools] == [t["name"] for t in new.tools] == ["ask_me"]
    assert policy_question_settings(old, {}).tool_name == "ask_me"
    path = policy_file(tmp_path, LEGACY)
    moved = [d for d in lint_paths([path]) if d.code == "RT335"]
    assert [(d.span.line, d.span.col, d.severity.value) for d in moved] == \
        [(4, 1, "warning"), (6, 1, "warning"), (7, 1, "warning")]
    assert "`question_events:` belongs under `provides:` (as provides.questions)" in moved[1].message
    assert moved[1].help is not None and "renamed `questions:`" in moved[1].help
    assert moved[0].help is not None and "`  tools: …`" in moved[0].help
    assert not [d for d in lint_paths([policy_file(tmp_path, WORDED)]) if d.code == "RT335"]


def test_a_question_declaration_is_a_template_over_vars(tmp_path: Path) -> None:
    text = WORDED.replace('tool_name: "{vars.tool}"', 'tool_name: "{vars.tool}_{vars.cap + 1}"')
    policy = compiled(tmp_path, text)
    assert policy_question_settings(policy, {"MY_CAP": "9"}).tool_name == "ask_me_10"
    assert policy_question_settings(policy, {}).tool_name == "ask_me_6"


def test_the_tier_is_read_from_the_declared_state_key_only(tmp_path: Path) -> None:
    from router.engine.choices import chosen_tier
    from router.engine.decision import Effect

    effects = [Effect("set", {"cu.tier": "cloud", "band": "big"}, "r")]
    assert chosen_tier(effects, {}) is None  # no declaration: no key name is guessed
    assert chosen_tier(effects, {"tier": "band"}) == "big"
    assert pack_policy(tmp_path, "cuttle").model_choice == {"tier": "cu.tier"}


def test_lint_fix_moves_the_old_keys_under_provides_keeping_comments(tmp_path: Path) -> None:
    from router.commands.lint import run
    from router.lint.moved_keys import moved_text

    path = policy_file(tmp_path, LEGACY)
    assert run([path], fix_first=True)[0] == 0
    fixed = path.read_text(encoding="utf-8")
    assert fixed == LEGACY.replace("""# the tool
tools:
  - {name: ask_me, description: Ask}
question_events: {tool_name: "{vars.tool}"}
import: {file: my.json, var: tool}
""", """provides:
  # the tool
  tools:
    - {name: ask_me, description: Ask}
  questions: {tool_name: "{vars.tool}"}
  import: {file: my.json, var: tool}
""")
    assert not [d for d in lint_paths([path]) if d.code == "RT335"]
    assert policy_question_settings(compiled(tmp_path, fixed), {}).tool_name == "ask_me"
    assert moved_text(fixed) is None  # nothing left to move
    assert moved_text("provides: {tools: []}\ncommands: []\n") is None  # merging is the author's
