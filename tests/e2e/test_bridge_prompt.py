"""The bridge inside a real Pi: tools, model, thinking, prompt sections, ephemeral messages,
blocked tool calls and rewritten tool results, as the fake provider received them."""

from __future__ import annotations

import json

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import (
    BUILTIN,
    RouterRig,
    process_state,
    read_call,
    rpc_pid,
    session_entries,
    session_files,
    sidecar_pids,
    wait_until,
)

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

CUT_AND_RESTORE = """
rules:
  - id: first-input-read-only
    on: input
    do:
      - tools: {only: [read]}
  - id: restore-after-first-call
    on: tool_call
    do:
      - tools: {only: "{tools.all}"}
"""


def read_then_answer(rig: RouterRig, text: str = "FINAL") -> None:
    """Script: the model reads notes.txt, then answers ``text``."""
    rig.fake.script.push(read_call(rig, "NOTE_CONTENT_314\n"), Reply(text=text))


def test_tools_cut_on_first_input_print_mode(rig: RouterRig) -> None:
    rig.policy(CUT_AND_RESTORE)
    read_then_answer(rig)

    done = rig.print("look at the notes")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "FINAL"
    first, second = rig.fake.chat_requests()
    assert first.tools == ["read"]
    # restored on tool_call: the second request of the same prompt carries the full set again
    assert set(second.tools) >= BUILTIN
    assert any("NOTE_CONTENT_314" in text for text in second.texts("tool"))
    assert "failed" not in rig.log()


def test_tools_cut_on_first_input_rpc_mode(rig: RouterRig) -> None:
    rig.policy(CUT_AND_RESTORE)
    read_then_answer(rig, "RPC_FINAL")
    rpc = rig.rpc()

    records = rpc.prompt_and_wait("look at the notes")
    active_after = rpc.command("get_state")
    last_text = rpc.command("get_last_assistant_text")
    [sidecar] = sidecar_pids(rpc_pid(rpc))
    assert rpc.close() == 0

    assert records[0]["data"]["disposition"] == "started"
    assert [e["toolName"] for e in rpc.events(type_="tool_execution_end")] == ["read"]
    assert last_text == {"text": "RPC_FINAL"}
    first, second = rig.fake.chat_requests()
    assert first.tools == ["read"]
    assert set(second.tools) >= BUILTIN
    assert active_after["model"]["id"] == "fake-local"
    assert not rpc.events(type_="extension_error")
    # Pi's session_shutdown stopped the sidecar (it may finish exiting just after Pi)
    wait_until(lambda: process_state(sidecar) in (None, "Z"), 5, "the sidecar to exit after Pi")


@pytest.mark.parametrize("thinking_first", [False, True], ids=["model-first", "thinking-listed-first"])
def test_model_switch_and_thinking_reach_first_request(rig: RouterRig, thinking_first: bool) -> None:
    model, thinking = "- model: fake/fake-cloud", "- thinking: high"
    actions = [thinking, model] if thinking_first else [model, thinking]
    rig.policy(
        "rules:\n  - id: go-cloud\n    on: input\n    do:\n"
        + "".join(f"      {line}\n" for line in actions)
    )
    rig.fake.script.push(Reply(text="CLOUD"))

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "CLOUD"
    [chat] = rig.fake.chat_requests()
    assert chat.model == "fake-cloud"  # the default model is fake-local
    # the executor orders model before thinking, so a non-reasoning default never clamps it away
    assert chat.reasoning_effort == "high"


def test_model_switch_reported_over_rpc(rig: RouterRig) -> None:
    rig.policy("""
        rules:
          - id: go-cloud
            on: input
            match: "contains(text, '#cloud')"
            do:
              - model: fake/fake-cloud
              - thinking: medium
    """)
    rpc = rig.rpc()

    rpc.prompt_and_wait("plain question")
    before = rpc.command("get_state")
    rpc.prompt_and_wait("#cloud question")
    after = rpc.command("get_state")

    local, cloud = rig.fake.chat_requests()
    assert (local.model, local.reasoning_effort) == ("fake-local", None)
    assert (cloud.model, cloud.reasoning_effort) == ("fake-cloud", "medium")
    assert before["model"]["id"] == "fake-local"
    assert (after["model"]["id"], after["thinkingLevel"]) == ("fake-cloud", "medium")


def test_unknown_model_warns_and_keeps_model(rig: RouterRig) -> None:
    rig.policy("""
        rules:
          - id: go-nowhere
            on: input
            do:
              - model: fake/does-not-exist
    """)

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    assert rig.fake.chat_requests()[0].model == "fake-local"
    assert "model fake/does-not-exist is not available" in done.stderr


SECTION_AND_EPHEMERAL = """
rules:
  - id: persona
    on: before_agent_start
    do:
      - section: {name: policy_engine, text: "PERSONA_MARKER_7731"}
      - system_append: {text: "APPEND_MARKER_4242", marker: APPEND_MARKER_4242}
  - id: guidance
    on: context
    do:
      - context_message: {text: "EPHEMERAL_GUIDANCE_5521"}
"""


def test_section_and_ephemeral_message_reach_provider_not_session(rig: RouterRig) -> None:
    rig.policy(SECTION_AND_EPHEMERAL)
    read_then_answer(rig, "ANSWERED")
    rpc = rig.rpc(session=True)

    rpc.prompt_and_wait("the user question")
    messages = rpc.command("get_messages")["messages"]
    assert rpc.close() == 0

    first, second = rig.fake.chat_requests()
    for chat in (first, second):
        assert "<policy_engine>\nPERSONA_MARKER_7731\n</policy_engine>" in chat.system
        assert chat.system.count("APPEND_MARKER_4242") == 1
        roles = [(m["role"], m["text"]) for m in chat.messages if m["role"] != "system"]
        # right after the triggering user message, on every request of the run: never after a tool result
        assert roles[:2] == [("user", "the user question"), ("user", "EPHEMERAL_GUIDANCE_5521")]
        assert sum("EPHEMERAL_GUIDANCE_5521" in text for _, text in roles) == 1
    assert second.messages[-1]["role"] == "tool"

    assert "EPHEMERAL_GUIDANCE_5521" not in json.dumps(messages)
    assert any("the user question" in json.dumps(m) for m in messages)
    [session_file] = session_files(rig.session_dir)
    stored = session_file.read_text()
    assert "EPHEMERAL_GUIDANCE_5521" not in stored
    assert "the user question" in stored and "ANSWERED" in stored
    assert any(e.get("type") == "message" for e in session_entries(rig.session_dir))


def test_block_and_rewrite_result(rig: RouterRig) -> None:
    rig.policy("""
        rules:
          - id: no-bash
            on: tool_call
            match: "tool.name == 'bash'"
            do:
              - block: "BLOCKED_BY_POLICY: bash is off limits"
          - id: redact-reads
            on: tool_result
            match: "tool.name == 'read'"
            do:
              - rewrite_result: {text: "REDACTED_BY_POLICY", is_error: false}
    """)
    secret = rig.work / "secret.txt"
    secret.write_text("TOP_SECRET_9001\n")
    marker = rig.work / "ran.txt"
    rig.fake.script.push(
        Reply(
            text="",
            tool_calls=[
                {"name": "bash", "arguments": {"command": f"echo ran > {marker}"}},
                {"name": "read", "arguments": {"path": str(secret)}},
            ],
        ),
        Reply(text="DONE"),
    )
    rpc = rig.rpc()

    rpc.prompt_and_wait("do things")

    assert not marker.exists(), "the blocked bash call ran"
    ends = {e["toolName"]: e for e in rpc.events(type_="tool_execution_end")}
    assert ends["bash"]["isError"] is True
    assert "BLOCKED_BY_POLICY" in json.dumps(ends["bash"]["result"])
    assert "REDACTED_BY_POLICY" in json.dumps(ends["read"]["result"])
    assert ends["read"]["isError"] is False
    _, second = rig.fake.chat_requests()
    tool_texts = second.texts("tool")
    assert len(tool_texts) == 2
    assert any("BLOCKED_BY_POLICY: bash is off limits" in t for t in tool_texts)
    assert "REDACTED_BY_POLICY" in tool_texts
    assert not any("TOP_SECRET_9001" in t for t in tool_texts)
