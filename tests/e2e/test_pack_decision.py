"""The built-in pack `decision` (the original pi-decision-router) inside a real Pi 1.6.0.

A user policy `use: [decision]` switches the pack on; the shared setup (the fake provider's two
audiences, the child stubs, the audit log) is helpers_decision.py. This module holds the tests of
the tool surface, the child call, the fallbacks and the registry path.
"""

from __future__ import annotations

import json

import pytest

from router.load.paths import packs_dir
from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_decision import (
    ALIASES,
    CHILD_FLAGS,
    CHILD_OFF,
    DELEGATE_MARK,
    FALLBACK_REASON,
    MARKER,
    OPEN_REASON,
    POLICY,
    Provider,
    answers_json,
    audit_records,
    decide,
    decision_env,
    delegate_prompt,
    delegate_requests,
    failing_pi,
    parent_requests,
    pick_first,
    recorded_calls,
    recording_pi,
    tool_text,
)
from tests.e2e.helpers_router import RouterRig, process_state, wait_until

pytestmark = pytest.mark.e2e
rig = helpers_router.rig


# -- 1. the tool surface ---------------------------------------------------------------------------


def test_one_registered_tool_and_guidance_once_per_request(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [decide({"question": "Go?", "options": ["yes", "no"]}), Reply(text="fine")])

    rpc = rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_CHILD="0"))
    rpc.prompt_and_wait("first")
    rpc.prompt_and_wait("second")

    requests = parent_requests(rig)
    assert len(requests) == 3  # tool call, its continuation, the second prompt
    first = requests[0]
    assert "decision_request" in first.tools
    assert not set(ALIASES) & set(first.tools)
    assert not [name for name in first.tools if "question" in name.lower() and name != "decision_request"]
    declared = next(t["function"] for t in first.body["tools"] if t["function"]["name"] == "decision_request")
    assert declared["parameters"] == {"type": "object", "additionalProperties": True}
    assert ("- decision_request: answer routine choices automatically (options, confirmations, short inputs)"
            in first.system)
    guideline = "- Use decision_request when a routine choice is needed instead of waiting for a human."
    assert guideline in first.system
    for request in requests:
        assert request.system.count(MARKER) == 1, request.system[-400:]
    commands = {c["name"] for c in rpc.command("get_commands")["commands"]}
    assert {"decision-router-toggle", "decision-router-status", "decision-router-log"} <= commands


def test_the_packs_skill_is_listed_in_the_system_prompt(rig: RouterRig) -> None:
    # the original package ships the skill `pi-decision-router`; with skills on, Pi lists it
    rig.policy(POLICY)
    Provider(rig, [Reply(text="fine")])

    done = rig.print("hello", env=decision_env(rig, PI_DECISION_ROUTER_CHILD="0"))

    assert done.returncode == 0, done.stderr
    [request] = parent_requests(rig)
    skill = packs_dir() / "skills" / "pi-decision-router" / "SKILL.md"
    assert "<available_skills>" in request.system
    assert "<name>pi-decision-router</name>" in request.system
    assert f"<location>{skill.resolve()}</location>" in request.system
    assert "call the\n  `decision_request` tool" in skill.read_text()


# -- 2. shapes, the child call and its argv ---------------------------------------------------------

SHAPES = {
    "questionnaire": (
        {"questions": [
            {"id": "scope", "prompt": "Scope?",
             "options": [{"value": "full", "label": "Full"}, {"value": "mvp", "label": "MVP (Recommended)"}]},
            {"key": "db", "question": "Database?",
             "options": [{"id": "pg", "name": "Postgres", "help": "a server"},
                         {"value": "sqlite", "label": "SQLite (default)"}]}]},
        [{"id": "scope", "prompt": "Scope?",
          "options": [{"value": "full", "label": "Full"}, {"value": "mvp", "label": "MVP (Recommended)"}],
          "allowOther": True, "multiSelect": False},
         {"id": "db", "prompt": "Database?",
          "options": [{"value": "pg", "label": "Postgres", "description": "a server"},
                      {"value": "sqlite", "label": "SQLite (default)"}],
          "allowOther": True, "multiSelect": False}],
        ["- scope: Full (full) — child picked it", "- db: Postgres (pg) — child picked it"],
    ),
    "AskUserQuestion": (
        {"questions": [
            {"question": "Which scope?", "header": "Scope", "multiSelect": False,
             "options": [{"label": "Full", "description": "everything"},
                         {"label": "MVP (Recommended)", "description": "the core"}]},
            {"question": "Which channels?", "header": "Channels", "multiSelect": True,
             "options": [{"label": "Blog"}, {"label": "X"}]}]},
        [{"id": "q1", "header": "Scope", "prompt": "Which scope?",
          "options": [{"value": "Full", "label": "Full", "description": "everything"},
                      {"value": "MVP (Recommended)", "label": "MVP (Recommended)",
                       "description": "the core"}],
          "allowOther": True, "multiSelect": False},
         {"id": "q2", "header": "Channels", "prompt": "Which channels?",
          "options": [{"value": "Blog", "label": "Blog"}, {"value": "X", "label": "X"}],
          "allowOther": True, "multiSelect": True}],
        ["- q1: Full (Full) — child picked it", "- q2: Blog, X (Blog, X) — child picked it"],
    ),
    "bare question": (
        {"question": "Ship now?", "options": ["Later", "  Now (Recommended) ", ""], "extra": {"ignored": 1}},
        [{"id": "q1", "prompt": "Ship now?",
          "options": [{"value": "Later", "label": "Later"},
                      {"value": "Now (Recommended)", "label": "Now (Recommended)"}],
          "allowOther": True, "multiSelect": False}],
        ["- q1: Later (Later) — child picked it"],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_child_answer_wins_for_each_question_shape(rig: RouterRig, shape: str) -> None:
    arguments, normalized, lines = SHAPES[shape]
    rig.policy(POLICY)
    stub, argv_log = recording_pi(rig)
    Provider(rig, [decide(arguments), Reply(text="thanks")], child=pick_first)

    rpc = rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_PI_BIN=str(stub)))
    rpc.prompt_and_wait("plan the release")

    # one child request holding every question, with the delegate system prompt
    [child] = delegate_requests(rig)
    prompt = delegate_prompt(child.body)
    assert list(prompt) == ["cwd", "context", "questions"]
    assert prompt["cwd"] == str(rig.work)
    assert prompt["context"] == "user: plan the release"
    assert prompt["questions"] == normalized
    assert child.system.startswith(DELEGATE_MARK)
    assert "Reply with JSON only" in child.system
    assert child.tools == []
    # the child process: one spawn, the seed's flags, the session's model; the prompt arrives on
    # stdin and the system prompt in a file, so neither is on the command line (`ps`)
    [spawn] = recorded_calls(argv_log)
    argv = spawn["argv"]
    assert argv[: len(CHILD_FLAGS)] == CHILD_FLAGS
    assert argv[len(CHILD_FLAGS): len(CHILD_FLAGS) + 5] == [
        "--provider", "fake", "--model", "fake-local", "--system-prompt"]
    assert len(argv) == len(CHILD_FLAGS) + 6
    assert spawn["system_prompt"].startswith(DELEGATE_MARK)
    assert child.system.startswith(spawn["system_prompt"])  # Pi appends the date and cwd
    assert spawn["stdin"] == json.dumps(prompt, indent=2, ensure_ascii=False)
    assert not any(DELEGATE_MARK in part or "plan the release" in part or '"questions"' in part
                   for part in argv)
    assert spawn["cwd"] == str(rig.work)
    # the child's answer reached the parent model
    _, after = parent_requests(rig)
    assert tool_text(after).splitlines() == ["Automated decision (child-agent)", *lines]
    [record] = audit_records(rig)
    assert [a["source"] for a in record["answers"]] == ["child-agent"] * len(normalized)
    assert record["child"] == {"attempted": True, "status": "selected", "model": "fake-local",
                               "command": str(stub)}
    [end] = rpc.events(type_="tool_execution_end")
    assert end["result"]["details"]["child"]["status"] == "selected"


# -- 3. fallbacks ------------------------------------------------------------------------------------


def test_invalid_child_answer_sends_every_question_to_fallback(rig: RouterRig) -> None:
    rig.policy(POLICY)
    questions = {"questions": [
        {"id": "scope", "prompt": "Scope?", "allowOther": False,
         "options": [{"value": "full", "label": "Full"}, {"value": "mvp", "label": "MVP (Recommended)"}]},
        {"id": "db", "prompt": "Database?", "options": ["pg", "sqlite"]}]}
    child = answers_json([{"id": "scope", "value": "unknown"}, {"id": "db", "value": "pg"}])
    Provider(rig, [decide(questions), Reply(text="ok")], child=lambda _prompt: child)

    rig.rpc(env=decision_env(rig)).prompt_and_wait("decide")

    assert len(delegate_requests(rig)) == 1
    _, after = parent_requests(rig)
    assert tool_text(after).splitlines() == [
        "Automated decision (fallback)",
        f"- scope: MVP (Recommended) (mvp) — {FALLBACK_REASON}",
        f"- db: pg (pg) — {FALLBACK_REASON}",  # valid on its own, but all or nothing
    ]
    [record] = audit_records(rig)
    assert [(a["id"], a["value"], a["source"], a["confidence"]) for a in record["answers"]] == [
        ("scope", "mvp", "fallback", 0.75), ("db", "pg", "fallback", 0.35)]
    assert record["child"]["status"] == "fallback"
    assert record["child"]["attempted"] is True
    assert record["child"]["error"] == (
        "invalid result: validate_answers(): incomplete or invalid JSON answers")


def test_slow_child_times_out_and_is_killed(rig: RouterRig) -> None:
    rig.policy(POLICY)
    stub, argv_log = recording_pi(rig)
    question = {"question": "Scope?", "options": ["Full", "MVP (Recommended)"]}
    Provider(rig, [decide(question), Reply(text="ok")],
             child=lambda _prompt: Reply(text='{"answers": []}', delay_s=20))

    rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_PI_BIN=str(stub),
                             PI_DECISION_ROUTER_TIMEOUT_MS="300")).prompt_and_wait("decide")

    [record] = audit_records(rig)
    assert record["child"]["error"] == "timeout after 300ms"
    assert record["answers"][0]["value"] == "MVP (Recommended)"
    assert record["answers"][0]["source"] == "fallback"
    _, after = parent_requests(rig)
    assert tool_text(after).startswith("Automated decision (fallback)\n- q1: MVP (Recommended)")
    [spawn] = recorded_calls(argv_log)  # the child was started, then killed at the deadline
    wait_until(lambda: process_state(spawn["pid"]) in (None, "Z"), 5, "the timed-out child to be killed")


def test_child_disabled_never_spawns_and_open_prompts_fall_back(rig: RouterRig) -> None:
    rig.policy(POLICY)
    stub, argv_log = recording_pi(rig)
    questions = {"questions": [
        {"id": "scope", "prompt": "Scope?", "options": ["Full", "MVP (Recommended)"]},
        {"id": "publish", "prompt": "Do you want to publish this release?"},
        {"id": "name", "prompt": "Name the branch"},
        {"id": "pick", "prompt": "Pick one", "options": ["alpha", "beta"]}]}
    Provider(rig, [decide(questions), Reply(text="ok")], child=pick_first)

    rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_CHILD="0",
                             PI_DECISION_ROUTER_PI_BIN=str(stub))).prompt_and_wait("decide")

    assert delegate_requests(rig) == []
    assert recorded_calls(argv_log) == []
    [record] = audit_records(rig)
    assert [(a["value"], a["confidence"]) for a in record["answers"]] == [
        ("MVP (Recommended)", 0.75), ("yes", 0.15), ("auto", 0.15), ("alpha", 0.35)]
    assert record["child"] == CHILD_OFF
    _, after = parent_requests(rig)
    assert tool_text(after).splitlines()[:3] == [
        "Automated decision (fallback)",
        f"- scope: MVP (Recommended) (MVP (Recommended)) — {FALLBACK_REASON}",
        f"- publish: yes (yes) — {OPEN_REASON}",
    ]


def test_failing_child_exit_code_is_reported(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [decide({"question": "Overwrite the file?"}), Reply(text="ok")])

    rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_PI_BIN=str(failing_pi(rig)))).prompt_and_wait("go")

    [record] = audit_records(rig)
    assert record["child"]["error"] == "child exited with code 3: child broke"
    assert record["answers"][0]["value"] == "yes"
    assert delegate_requests(rig) == []


# -- 4. the registry path ------------------------------------------------------------------------------


def test_registry_path_answers_in_process(rig: RouterRig) -> None:
    rig.policy(POLICY)
    stub, argv_log = recording_pi(rig)
    arguments, normalized, lines = SHAPES["questionnaire"]
    Provider(rig, [decide(arguments), Reply(text="ok")], child=pick_first)

    rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_VIA="registry",
                             PI_DECISION_ROUTER_PI_BIN=str(stub))).prompt_and_wait("plan it")

    assert recorded_calls(argv_log) == []  # no child process
    [request] = delegate_requests(rig)
    assert request.model == "fake-local"
    assert request.system.startswith(DELEGATE_MARK)
    assert delegate_prompt(request.body)["questions"] == normalized
    _, after = parent_requests(rig)
    assert tool_text(after).splitlines() == ["Automated decision (child-agent)", *lines]
    [record] = audit_records(rig)
    assert record["child"] == {"attempted": True, "status": "selected", "model": "fake-local",
                               "command": "registry"}


def test_abort_during_a_decision_kills_the_child_and_audits_the_fallback(rig: RouterRig) -> None:
    """Seed item 33: an aborted run stops the child, whose error is "aborted": the decision's
    answers are the fallback's and its audit record is written; Pi settles and keeps answering."""
    rig.policy(POLICY)
    stub, argv_log = recording_pi(rig)
    question = {"question": "Scope?", "options": ["Full", "MVP (Recommended)"]}
    Provider(rig, [decide(question)], child=lambda _prompt: Reply(text='{"answers": []}', delay_s=30))
    rpc = rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_PI_BIN=str(stub)))

    assert rpc.command("prompt", message="decide")["disposition"] == "started"
    wait_until(lambda: bool(delegate_requests(rig)), 20, "the child to ask the fake provider")
    [spawn] = recorded_calls(argv_log)
    rpc.command("abort")
    rpc.wait_event("agent_settled", timeout=20)

    wait_until(lambda: process_state(spawn["pid"]) in (None, "Z"), 5, "the aborted child to be killed")
    [record] = wait_until(lambda: audit_records(rig), 20, "the aborted decision's audit record")
    assert record["child"]["status"] == "fallback" and record["child"]["error"] == "aborted", record
    assert [(a["value"], a["source"]) for a in record["answers"]] == [("MVP (Recommended)", "fallback")]
    Provider(rig, [Reply(text="still here")])
    rpc.prompt_and_wait("hello again")
    assert parent_requests(rig)[-1].messages[-1]["text"] == "hello again"
