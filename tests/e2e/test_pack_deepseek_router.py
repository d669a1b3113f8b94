"""The `deepseek` pack's `/router` command end to end (RPC mode): status, controls, selector.

The `/router` command as the original has it; setup in helpers_deepseek.py.
"""

from __future__ import annotations

import pytest

from tests.e2e import helpers_router
from tests.e2e.helpers_deepseek import (
    DISABLED,
    FULL,
    HANDS_ON,
    PRO,
    REACT,
    SEARCH,
    SELECT_OPTIONS,
    active_tools,
    answer_selects,
    block,
    guidance_messages,
    probe,
    setup,
)
from tests.e2e.helpers_router import RouterRig, command, ui_requests

pytestmark = pytest.mark.e2e
rig = helpers_router.rig


def test_router_status_lines_and_no_provider_request(rig: RouterRig) -> None:
    setup(rig)
    rpc = rig.rpc(*PRO)

    before = command(rpc, "/router status")
    rpc.prompt_and_wait("build a new command-line tool")
    after = command(rpc, "/router status")
    rpc.prompt_and_wait("now " + "make it faster and smaller " * 6)  # over 120 characters: complex
    later = command(rpc, "/router status")

    prefix = "enabled=true model=deepseek-v4-pro control=auto"
    assert before == [f"{prefix} activeBand=pending complexity=pending tools=full"]
    assert after == [f"{prefix} activeBand=react complexity=simple tools=core"]
    assert later == [f"{prefix} activeBand=react complexity=complex tools=full"]
    assert len(rig.fake.chat_requests()) == 2  # /router never reaches the provider


def test_router_react_before_any_task_cuts_at_once(rig: RouterRig) -> None:
    setup(rig)
    rpc = probe(rig, *PRO)

    assert command(rpc, "/router react") == ["mode=react — next request applies"]
    assert active_tools(rpc) == REACT
    # the original's edge: the status still says tools=full before the first task
    assert command(rpc, "/router status") == [
        "enabled=true model=deepseek-v4-pro control=react activeBand=react complexity=pending tools=full"
    ]
    rpc.prompt_and_wait("please inspect this")  # weak by keywords, react by the override

    [chat] = rig.fake.chat_requests()
    assert chat.tools == REACT
    assert chat.system.endswith(block("1.00", "react", HANDS_ON))
    assert not guidance_messages(chat)


def test_router_selector_title_options_and_answers(rig: RouterRig) -> None:
    setup(rig)
    rpc = probe(rig, *PRO, ui_handler=answer_selects("Spec — Debug / review / maintenance", None, None))

    picked = command(rpc, "/router")
    assert active_tools(rpc) == SEARCH
    cancelled = command(rpc, "/router")
    rpc.prompt_and_wait("build a new command-line tool")
    command(rpc, "/router")

    first, second, third = ui_requests(rpc, "select")
    assert first["title"] == "DeepSeek Router · deepseek-v4-pro\nCurrent: Auto"
    assert first["options"] == SELECT_OPTIONS
    assert second["title"] == "DeepSeek Router · deepseek-v4-pro\nCurrent: Spec"
    assert third["title"] == "DeepSeek Router · deepseek-v4-pro\nCurrent: Spec"
    assert picked == ["mode=spec — next request applies"]
    assert cancelled == []  # a cancelled selector is silent
    [chat] = rig.fake.chat_requests()
    assert chat.tools == SEARCH  # the spec override beats the build keywords
    assert "mode=0.00 band=spec\nYou are a helpful software engineer assistant.\n" in chat.system


def test_router_selector_auto_shows_band_and_status_option(rig: RouterRig) -> None:
    setup(rig)
    rpc = rig.rpc(*PRO, ui_handler=answer_selects("Status — Show current router status"))

    rpc.prompt_and_wait("build a new command-line tool")
    shown = command(rpc, "/router")

    [select] = ui_requests(rpc, "select")
    assert select["title"] == "DeepSeek Router · deepseek-v4-pro\nCurrent: Auto → React"
    assert shown == command(rpc, "/router status")
    assert shown == [
        "enabled=true model=deepseek-v4-pro control=auto activeBand=react complexity=simple tools=core"
    ]


def test_router_rejects_weak_and_other_tokens(rig: RouterRig) -> None:
    setup(rig)
    rpc = probe(rig, *PRO)

    for token in ("weak", "mixed", "0.3"):
        since = rpc.mark()
        assert rpc.command("prompt", message=f"/router {token}")["disposition"] == "handled"
        [warning] = ui_requests(rpc, "notify", since)
        assert warning["message"] == "invalid mode: use auto, spec, react, or status"
        assert warning["notifyType"] == "warning"
    assert active_tools(rpc) == FULL
    assert not ui_requests(rpc, "select")


@pytest.mark.parametrize("args", ["", " react"], ids=["no-argument", "react"])
def test_router_on_gpt_says_disabled(rig: RouterRig, args: str) -> None:
    setup(rig)
    rpc = probe(rig, "--model", "fake/gpt-5")

    assert command(rpc, f"/router{args}") == [DISABLED]

    assert not ui_requests(rpc, "select")
    assert active_tools(rpc) == FULL
    commands = {c["name"]: c for c in rpc.command("get_commands")["commands"]}
    assert commands["router"]["description"] == "DeepSeek Router: auto, spec, react or status"
    assert not {"deepseek-router-status", "deepseek-router-mode"} & commands.keys()
