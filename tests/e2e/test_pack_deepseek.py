"""The built-in `deepseek` pack end to end: real Pi 1.6.0, the bridge, `router serve`.

The behaviour is the original pi-deepseek-router's (docs/packs/deepseek.md). Every test asserts
on what the fake provider received (model, tools, system prompt, messages), on RPC
records or on the session file. `/router` is in test_pack_deepseek_router.py; the shared setup
is helpers_deepseek.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_chat import ChatSummary
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_deepseek import (
    DEEP,
    DISABLED,
    END,
    FULL,
    GUIDANCE,
    HANDS_ON,
    PRO,
    REACT,
    RESTORED,
    SEARCH,
    START,
    active_tools,
    block,
    guidance_messages,
    probe,
    setup,
)
from tests.e2e.helpers_router import STATE_ENTRY, RouterRig, command, read_call, session_entries

pytestmark = pytest.mark.e2e
rig = helpers_router.rig


# -- the gate ---------------------------------------------------------------------------------


def test_build_task_gets_react_core_persona_and_full_tools_after_first_call(rig: RouterRig) -> None:
    setup(rig)
    rig.fake.script.push(read_call(rig), read_call(rig), Reply(text="done"))
    rpc = rig.rpc(*PRO)

    rpc.prompt_and_wait("build a new command-line tool")

    first, second, third = rig.fake.chat_requests()
    assert first.model == "deepseek-v4-pro"
    assert first.tools == REACT
    assert first.system.endswith("\n\n" + block("1.00", "react", HANDS_ON))
    assert first.system.count(START) == 1
    assert "- bash:" not in first.system  # Pi rebuilt the prompt's tool list for the core set
    # the first tool call restores the full set for request 2 of the same prompt; once only
    assert second.tools == RESTORED
    assert third.tools == RESTORED
    assert all(c.system.count(START) == 1 for c in (second, third))
    assert [m["role"] for m in first.messages] == ["system", "user"]


def test_restore_brings_back_the_snapshots_tools(rig: RouterRig) -> None:
    # Pi keeps the tools still active in place and appends the others (as for the original
    # extension, which called setActiveTools the same way): the set is the snapshot's.
    setup(rig)
    rig.fake.script.push(read_call(rig), Reply(text="done"))
    rpc = rig.rpc(*PRO)

    rpc.prompt_and_wait("build a new command-line tool")

    first, second = rig.fake.chat_requests()
    assert first.tools == REACT
    assert sorted(second.tools) == sorted(FULL) and second.tools[: len(REACT)] == REACT


@pytest.mark.parametrize(
    "model", ["fake/gpt-5", "deepseek/x"], ids=["gpt-5", "provider-deepseek-id-x"]
)
def test_other_models_are_untouched(rig: RouterRig, model: str) -> None:
    setup(rig)
    rig.fake.script.push(read_call(rig), Reply(text="done"))
    baseline = rig.print("--model", model, "build a new command-line tool", bridge=False)
    assert baseline.returncode == 0, baseline.stderr
    rig.fake.script.push(read_call(rig), Reply(text="done"))

    done = rig.print("--model", model, "build a new command-line tool", session=True)

    assert done.returncode == 0, done.stderr
    plain_1, plain_2, routed_1, routed_2 = rig.fake.chat_requests()
    for plain, routed in ((plain_1, routed_1), (plain_2, routed_2)):
        assert routed.model == model.split("/")[1]
        assert routed.tools == plain.tools == FULL
        assert routed.system == plain.system
        assert _same_but_ids(plain, routed)
        assert START not in routed.system
        assert not guidance_messages(routed)
    entries = session_entries(rig.session_dir)
    assert entries, "the session file was written"
    assert not [e for e in entries if e.get("type") == "custom"]
    assert STATE_ENTRY not in json.dumps(entries)


def _same_but_ids(plain: ChatSummary, routed: ChatSummary) -> bool:
    """Messages equal apart from tool-call ids (the fake numbers them per reply)."""

    def strip(chat: ChatSummary) -> list[dict[str, Any]]:
        return [{k: v for k, v in m.items() if k != "tool_call_id"} for m in chat.messages]

    return strip(plain) == strip(routed)


def test_gate_ignores_case_of_the_model_id(rig: RouterRig) -> None:
    setup(rig)

    done = rig.print("--model", "fake/DeepSeek-Coder-V3", "build a new command-line tool")

    assert done.returncode == 0, done.stderr
    [chat] = rig.fake.chat_requests()
    assert (chat.model, chat.tools) == ("DeepSeek-Coder-V3", REACT)
    assert chat.system.endswith(block("1.00", "react", HANDS_ON))


# -- the original's worked classification examples, through the real input hook (print mode) --


@pytest.mark.parametrize(
    ("text", "mode", "band", "tools"),
    [
        ("build a new command-line tool", "1.00", "react", REACT),
        ("fix the crash in the parser", "0.00", "spec", SEARCH),
        ("please inspect this", "weak", "weak", SEARCH),
        ("add a prefix to the debug tool", "0.00", "spec", SEARCH),
        ("Rebuild the website", "1.00", "react", REACT),
        ("refactor and build", "weak", "weak", SEARCH),
        ("写一个脚本", "1.00", "react", REACT),
        ("修复登录报错", "0.00", "spec", SEARCH),
    ],
)
def test_worked_examples(rig: RouterRig, text: str, mode: str, band: str, tools: list[str]) -> None:
    setup(rig)

    done = rig.print(*PRO, text)

    assert done.returncode == 0, done.stderr
    [chat] = rig.fake.chat_requests()
    assert chat.tools == tools
    assert f"\n{START}\n## DeepSeek Router\nmode={mode} band={band}\n" in chat.system
    assert chat.system.endswith(END)
    assert bool(guidance_messages(chat)) == (band == "weak")


# -- the weak band's ephemeral guidance -------------------------------------------------------


def test_weak_guidance_on_every_request_never_stored(rig: RouterRig) -> None:
    setup(rig)
    rig.fake.script.push(read_call(rig), Reply(text="looked"), Reply(text="second"))
    rpc = rig.rpc(*PRO, session=True)
    long_task = "now go through the whole parser module and tell me " + "in depth " * 12

    rpc.prompt_and_wait("please inspect this")
    rpc.prompt_and_wait(long_task)
    messages = rpc.command("get_messages")["messages"]

    chats = rig.fake.chat_requests()
    assert len(chats) == 3
    for chat in chats:  # the tool-loop request included
        [at] = guidance_messages(chat)
        assert at == len(chat.messages) - 1, chat.messages
        assert "mode=weak band=weak" in chat.system
    assert DEEP not in chats[0].messages[-1]["text"]
    assert DEEP not in chats[1].messages[-1]["text"]
    assert DEEP in chats[2].messages[-1]["text"]  # depth follows the current task
    assert chats[0].tools == SEARCH
    assert sorted(chats[1].tools) == sorted(FULL)  # promoted after the first tool call
    assert GUIDANCE not in json.dumps(messages)
    stored = json.dumps(session_entries(rig.session_dir))
    assert GUIDANCE not in stored
    assert "pi-deepseek-router-guidance" not in stored


# -- promotion on the next task, extension input, RPC vs interactive ------------------------------


def test_next_task_gets_full_tools_when_first_turn_made_no_call(rig: RouterRig) -> None:
    setup(rig)
    rpc = rig.rpc(*PRO)

    rpc.prompt_and_wait("build a new command-line tool")
    rpc.prompt_and_wait("fix the crash in the parser")

    first, second = rig.fake.chat_requests()
    assert first.tools == REACT
    assert sorted(second.tools) == sorted(FULL)
    # the mode stays the first task's: the fix task keeps the react persona
    assert second.system.endswith(block("1.00", "react", HANDS_ON))
    assert second.system.count(START) == 1


def test_extension_input_never_classifies_or_cuts(rig: RouterRig) -> None:
    setup(rig)
    rpc = probe(rig, *PRO)

    since = rpc.mark()
    assert rpc.command("prompt", message="/probe-send build a website")["disposition"] == "handled"
    rpc.wait_event("agent_settled", since=since)
    rpc.prompt_and_wait("please inspect this")  # the first real task still classifies

    extension, user = rig.fake.chat_requests()
    assert extension.texts("user") == ["build a website"]
    assert extension.tools == FULL
    assert START not in extension.system
    assert not guidance_messages(extension)
    assert user.tools == SEARCH
    assert "mode=weak band=weak" in user.system


def test_rpc_prompt_routes_like_interactive(rig: RouterRig) -> None:
    setup(rig)
    done = rig.print(*PRO, "fix the crash in the parser")
    assert done.returncode == 0, done.stderr
    rpc = rig.rpc(*PRO)

    rpc.prompt_and_wait("fix the crash in the parser")

    interactive, from_rpc = rig.fake.chat_requests()
    assert interactive.tools == from_rpc.tools == SEARCH
    assert interactive.system == from_rpc.system
    assert from_rpc.system.endswith(END)


def test_marker_already_in_prompt_is_not_appended_again(rig: RouterRig) -> None:
    setup(rig)

    done = rig.print(*PRO, "--append-system-prompt", f"{START} (kept by the user)", "build a tool")

    assert done.returncode == 0, done.stderr
    [chat] = rig.fake.chat_requests()
    assert chat.tools == REACT  # the task is routed...
    assert chat.system.count(START) == 1  # ...but the block is not appended a second time
    assert "## DeepSeek Router" not in chat.system


# -- lifecycle ----------------------------------------------------------------------------------


def test_resume_derives_mode_from_history_without_cutting(rig: RouterRig) -> None:
    setup(rig)
    first = rig.print(*PRO, "build a new command-line tool", session=True)
    assert first.returncode == 0, first.stderr

    resumed = rig.print("--continue", "fix the crash in the parser", session=True)

    assert resumed.returncode == 0, resumed.stderr
    before, after = rig.fake.chat_requests()
    assert before.tools == REACT
    # Pi restored the cut tool set with the session; the pack puts the snapshot back
    assert after.model == "deepseek-v4-pro"
    assert sorted(after.tools) == sorted(FULL)
    assert after.system.endswith(block("1.00", "react", HANDS_ON))
    assert after.texts("user") == ["build a new command-line tool", "fix the crash in the parser"]


def test_switch_to_gpt_restores_tools_and_disables(rig: RouterRig) -> None:
    setup(rig)
    rpc = probe(rig, *PRO)

    rpc.prompt_and_wait("build a new command-line tool")
    assert active_tools(rpc) == REACT
    rpc.command("set_model", provider="fake", modelId="gpt-5")
    assert sorted(active_tools(rpc)) == sorted(FULL)
    rpc.prompt_and_wait("please inspect this")
    assert command(rpc, "/router status") == [DISABLED]

    deepseek, gpt = rig.fake.chat_requests()
    assert (deepseek.model, deepseek.tools) == ("deepseek-v4-pro", REACT)
    assert gpt.model == "gpt-5"
    assert sorted(gpt.tools) == sorted(FULL)
    assert START not in gpt.system
    assert not guidance_messages(gpt)


def test_flash_override_survives_switch_to_pro(rig: RouterRig) -> None:
    setup(rig)
    rpc = probe(rig, "--model", "fake/deepseek-v4-flash")

    rpc.prompt_and_wait("please inspect this")
    assert command(rpc, "/router react") == ["mode=react — next request applies"]
    rpc.command("set_model", provider="fake", modelId="deepseek-v4-pro")
    rpc.prompt_and_wait("please look again")

    flash, pro = rig.fake.chat_requests()
    assert flash.model == "deepseek-v4-flash"
    assert "mode=weak band=weak\nYou are a helpful assistant.\n" in flash.system
    assert flash.tools == SEARCH
    assert pro.model == "deepseek-v4-pro"
    assert pro.system.endswith(block("1.00", "react", HANDS_ON))
    assert sorted(pro.tools) == sorted(FULL)  # the first turn made no call: the next input restores
    assert not guidance_messages(pro)
    assert command(rpc, "/router status") == [
        "enabled=true model=deepseek-v4-pro control=react activeBand=react complexity=simple tools=full"
    ]


def test_new_session_is_isolated(rig: RouterRig) -> None:
    setup(rig)
    rig.fake.script.push(read_call(rig), Reply(text="built"))
    rpc = rig.rpc(*PRO)

    rpc.prompt_and_wait("build a new command-line tool")
    assert rpc.command("new_session") == {"cancelled": False}
    rpc.prompt_and_wait("fix the crash in the parser")

    build, promoted, fix = rig.fake.chat_requests()
    assert build.tools == REACT
    assert sorted(promoted.tools) == sorted(FULL)
    assert fix.tools == SEARCH  # session 2 is cut although session 1 was promoted
    assert fix.system.endswith(END) and "mode=0.00 band=spec" in fix.system
    assert fix.texts("user") == ["fix the crash in the parser"]
