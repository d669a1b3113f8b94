"""The rest of the action vocabulary inside a real Pi: input transform/handled, notify, status,
follow-up messages, policy-declared question tools and a cancelled compaction."""

from __future__ import annotations

import json

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig, is_notify, is_status, tool_call, ui_requests

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

INPUT_RULES = """
rules:
  - id: shorten
    on: input
    match: "starts_with(text, '#short ')"
    do:
      - input: {action: transform, text: "TRANSFORMED[{text}]"}
  - id: swallow
    on: input
    match: "text == 'ignore me'"
    do:
      - input: handled
      - notify: {text: "SWALLOWED", level: warning}
      - status: {key: my-router, text: "Router: swallowed one"}
"""


def test_input_transform_and_handled(rig: RouterRig) -> None:
    rig.policy(INPUT_RULES)
    rpc = rig.rpc()

    rpc.prompt_and_wait("#short make it brief")
    since = rpc.mark()
    handled = rpc.send({"type": "prompt", "message": "ignore me"})
    notice = rpc.wait_record(is_notify("SWALLOWED"), since=since)
    status = rpc.wait_record(is_status("swallowed", key="my-router"), since=since)

    [chat] = rig.fake.chat_requests()  # the handled input never reached the model
    assert chat.texts("user") == ["TRANSFORMED[#short make it brief]"]
    assert handled["data"]["disposition"] == "handled"
    assert notice["notifyType"] == "warning"
    assert status["statusText"] == "Router: swallowed one"
    messages = rpc.command("get_messages")["messages"]
    assert "ignore me" not in json.dumps(messages)


def test_notify_goes_to_stderr_in_print_mode(rig: RouterRig) -> None:
    rig.policy("""
        rules:
          - id: tell
            on: input
            do:
              - notify: {text: "PRINT_MODE_NOTICE_77"}
    """)

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "PRINT_MODE_NOTICE_77" in done.stderr


def test_follow_up_triggers_another_turn(rig: RouterRig) -> None:
    rig.policy("""
        rules:
          - id: nudge-once
            on: agent_settled
            when: "not state.nudged"
            do:
              - follow_up: {text: "FOLLOW_UP_NUDGE_12"}
              - set: {nudged: true}
    """)
    rig.fake.script.push(Reply(text="first"), Reply(text="after nudge"), Reply(text="third answer"))
    rpc = rig.rpc()

    rpc.prompt_and_wait("start")
    first_settled = rpc.records.index(rpc.events(type_="agent_settled")[0])
    rpc.wait_event("agent_settled", since=first_settled + 1)  # the follow-up's own run
    after_nudge = rpc.command("get_last_assistant_text")
    rpc.prompt_and_wait("third")  # a second nudge would come before it (or be queued with it)

    first, second, third = rig.fake.chat_requests()
    assert "FOLLOW_UP_NUDGE_12" not in json.dumps(first.messages)
    assert second.messages[-1] == {"role": "user", "text": "FOLLOW_UP_NUDGE_12"}
    assert after_nudge == {"text": "after nudge"}
    # the state flag stops a second nudge
    assert third.texts("user") == ["start", "FOLLOW_UP_NUDGE_12", "third"]
    assert rpc.command("get_last_assistant_text") == {"text": "third answer"}


QUESTION_TOOL = """
tools:
  - name: decision_request
    description: Ask for a decision instead of asking the user.
    parameters:
      type: object
      properties:
        question: {type: string}
      required: [question]
rules:
  - id: decide
    on: question
    match: "tool_name == 'decision_request'"
    do:
      - answer: {text: "DECIDED: go with option B"}
"""


def test_policy_declared_question_tool(rig: RouterRig) -> None:
    rig.policy(QUESTION_TOOL)
    rig.fake.script.push(
        tool_call("decision_request", {"question": "A or B?"}),
        Reply(text="going with B"),
    )

    done = rig.print("decide something")

    assert done.returncode == 0, done.stderr
    first, second = rig.fake.chat_requests()
    assert "decision_request" in first.tools
    declared = next(t for t in first.body["tools"] if t["function"]["name"] == "decision_request")
    assert declared["function"]["parameters"]["required"] == ["question"]
    assert second.texts("tool") == ["DECIDED: go with option B"]


def test_question_tool_without_answer_reports_error_text(rig: RouterRig) -> None:
    rig.policy(QUESTION_TOOL.replace("tool_name == 'decision_request'", "tool_name == 'other'"))
    rig.fake.script.push(
        tool_call("decision_request", {"question": "A?"}),
        Reply(text="fine"),
    )

    done = rig.print("decide something")

    assert done.returncode == 0, done.stderr
    _, second = rig.fake.chat_requests()
    # the engine's neutral wording: the decision pack declares its own (rules/decision.yaml)
    assert second.texts("tool") == ["No rule answered this call."]


def test_question_tool_without_answer_says_what_the_policy_declares(rig: RouterRig) -> None:
    policy = QUESTION_TOOL.replace("tool_name == 'decision_request'", "tool_name == 'other'")
    policy = policy.replace("    description: Ask for a decision instead of asking the user.\n",
                            "    description: Ask for a decision instead of asking the user.\n"
                            "    no_answer: \"Nobody answered: pick the safest option.\"\n")
    rig.policy(policy)
    rig.fake.script.push(tool_call("decision_request", {"question": "A?"}), Reply(text="fine"))

    done = rig.print("decide something")

    assert done.returncode == 0, done.stderr
    _, second = rig.fake.chat_requests()
    assert second.texts("tool") == ["Nobody answered: pick the safest option."]


def test_compaction_cancelled_by_rule(rig: RouterRig) -> None:
    rig.settings(compaction={"keepRecentTokens": 10})
    rig.policy("""
        rules:
          - id: never-compact
            on: compaction_before
            do:
              - cancel: {}
              - notify: "COMPACTION_CANCELLED reason={reason}"
    """)
    rpc = rig.rpc(session=True)
    rpc.prompt_and_wait("first message " * 20)
    rpc.prompt_and_wait("second message " * 20)
    requests_before = len(rig.fake.chat_requests())

    since = rpc.mark()
    response = rpc.send({"type": "compact"})
    notice = rpc.wait_record(is_notify("COMPACTION_CANCELLED"), since=since)

    assert response["success"] is False, response
    assert notice["message"] == "COMPACTION_CANCELLED reason=manual"
    assert len(rig.fake.chat_requests()) == requests_before  # no summary request was made
    assert not [e for e in helpers_router.session_entries(rig.session_dir) if e.get("type") == "compaction"]
    assert not ui_requests(rpc, "select")
