"""The `decision` pack's automatic compaction, as the original pi-decision-router's, in a real
Pi 1.6.0 over RPC.

The fake provider's `usage.prompt_tokens` drives Pi's context usage on fake-local (a 32000-token
window); `compaction.keepRecentTokens` is small so Pi has something to compact. Pi's own threshold
compaction keeps its default settings unless a test says otherwise: it then races the router's
(and must be cancelled while the router's is in flight).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_decision import POLICY, Provider, decision_env, parent_requests
from tests.e2e.helpers_router import (
    RouterRig,
    is_notify,
    is_status,
    session_entries,
    statuses,
    tool_call,
    ui_requests,
)

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

WINDOW = 32000  # fake-local's context window
COMPACTION_KEY = "pi-decision-router-compaction"
CONTINUATION = ("Context compaction is complete. Continue the interrupted task from where it stopped "
                "and give the final response. Do not ask the user to repeat anything.")


def tokens_at(percent: float) -> int:
    """prompt_tokens that make a reply (2 completion tokens) fill ``percent`` of the window."""
    return round(WINDOW * percent / 100) - 2


def prepare(rig: RouterRig, **compaction: Any) -> bytes:
    """The pack, a small keepRecentTokens and a file to read; returns the settings file's bytes."""
    rig.policy(POLICY)
    rig.settings(compaction={"keepRecentTokens": 10, **compaction})
    (rig.work / "notes.txt").write_text("some notes\n" * 20)
    return (rig.agent / "settings.json").read_bytes()


def is_settled(record: dict[str, Any]) -> bool:
    return record.get("type") == "agent_settled" and not record.get("aborted")


def is_compaction_end(reason: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r.get("type") == "compaction_end" and r.get("reason") == reason


def test_compaction_mid_tool_loop_then_hidden_follow_up(rig: RouterRig) -> None:
    settings = prepare(rig)  # Pi's own threshold (32000 - 16384 reserve) is crossed as well
    Provider(rig, [tool_call("read", {"path": "notes.txt"}, prompt_tokens=tokens_at(95.5)),
                   Reply(text="FINAL after compaction", prompt_tokens=1000)])
    rpc = rig.rpc(env=decision_env(rig), session=True)

    since = rpc.mark()
    rpc.send({"type": "prompt", "message": "read the notes and report"})
    rpc.wait_record(is_settled, since=since)

    records = rpc.events(since)
    kinds = [(r["type"], r.get("reason")) for r in records if r["type"].startswith("compaction_")]
    ends = [r for r in records if r["type"] == "compaction_end"]
    # Pi's native compaction started while the router's was pending and was cancelled
    assert all(e.get("aborted") for e in ends if e["reason"] != "manual"), ends
    [done] = [e for e in ends if e["reason"] == "manual"]
    assert done.get("result") and not done.get("aborted")
    assert ("compaction_start", "manual") in kinds
    warning = rpc.wait_record(is_notify("Compacting before continuing"), since=since)
    # Pi adds an estimate for the tool result after the 95.5 % reply
    found = re.fullmatch(r"Context usage is high \((\d+\.\d)%\)\. Compacting before continuing\.",
                         warning["message"])
    assert found and 95.5 <= float(found[1]) < 100, warning["message"]
    assert warning["notifyType"] == "warning"
    complete = rpc.wait_record(is_notify("Context compaction complete"), since=since)
    assert complete["message"] == "Context compaction complete. Continuing with the final response."
    order = [records.index(r) for r in (warning, complete, done)]
    assert order == sorted(order)
    assert statuses(rpc, COMPACTION_KEY)[-1] is None  # cleared after "compacting at 9x.x%"
    assert f"compacting at {found[1]}%" in statuses(rpc, COMPACTION_KEY)
    # the hidden follow-up reached the provider and Pi finished the task
    first, continuation = parent_requests(rig)
    assert first.texts("user") == ["read the notes and report"]
    assert continuation.texts("user")[-1] == CONTINUATION
    assert rpc.command("get_last_assistant_text") == {"text": "FINAL after compaction"}
    entries = session_entries(rig.session_dir)
    [hidden] = [e for e in entries if e.get("type") == "custom_message"]
    assert hidden["customType"] == COMPACTION_KEY
    assert hidden["display"] is False
    assert hidden["content"] == CONTINUATION
    assert hidden["details"] == {"source": "pi-decision-router", "continuation": True}
    assert len([e for e in entries if e.get("type") == "compaction"]) == 1
    assert (rig.agent / "settings.json").read_bytes() == settings


def test_bridge_attributes_compactions_to_the_right_starter(rig: RouterRig) -> None:
    seen = rig.tmp / "compactions.log"
    rig.policy(f"""
        rules:
          - id: compact-now
            on: turn_end
            when: "usage.percent >= 90 and not state.compacted"
            do:
              - set: {{compacted: true}}
              - compact: {{abort: true}}
          - id: record
            on: compaction_before
            do:
              - log: {{file: "{seen}", text: "{{reason}} by_router={{by_router}}"}}
    """)
    rig.settings(compaction={"keepRecentTokens": 10})  # Pi's own threshold: 32000 - 16384 tokens
    (rig.work / "notes.txt").write_text("some notes\n" * 20)
    Provider(rig, [tool_call("read", {"path": "notes.txt"}, prompt_tokens=tokens_at(95.5))])
    rpc = rig.rpc()

    since = rpc.mark()
    rpc.send({"type": "prompt", "message": "read the notes"})
    rpc.wait_record(is_compaction_end("threshold"), since=since)  # Pi's own, crossed at 95.5 % as well
    rpc.wait_record(is_compaction_end("manual"), since=since)

    lines = seen.read_text().splitlines()
    # Pi's own compaction is not the rule's; the rule's compact action is
    assert sorted(lines) == ["manual by_router=true", "threshold by_router=false"], lines


def test_text_only_turn_at_100_percent_compacts_without_follow_up(rig: RouterRig) -> None:
    prepare(rig)
    Provider(rig, [Reply(text="small answer " * 20, prompt_tokens=1000),  # something to keep and to cut
                   Reply(text="huge answer " * 20, prompt_tokens=tokens_at(100)),
                   Reply(text="third answer", prompt_tokens=1200)])
    rpc = rig.rpc(env=decision_env(rig))
    rpc.prompt_and_wait("one")

    since = rpc.mark()
    rpc.send({"type": "prompt", "message": "two"})
    warning = rpc.wait_record(is_notify("Compacting before continuing"), since=since)
    rpc.wait_record(is_compaction_end("manual"), since=since)
    complete = rpc.wait_record(is_notify("Context compaction complete"), since=since)
    rpc.prompt_and_wait("three")

    assert warning["message"] == "Emergency context limit reached (100.0%). Compacting before continuing."
    assert complete["message"] == "Context compaction complete."
    requests = parent_requests(rig)
    assert [r.texts("user")[-1] for r in requests] == ["one", "two", "three"]  # nothing in between
    assert not any(CONTINUATION in json.dumps(r.messages) for r in rig.fake.chat_requests())
    assert len([r for r in rpc.events(since) if r["type"] == "agent_start"]) == 2  # "two", "three"


def test_failed_compaction_is_reported_and_rearmed(rig: RouterRig) -> None:
    prepare(rig)
    # short messages: nothing older than keepRecentTokens, so Pi refuses to compact
    Provider(rig, [Reply(text="huge", prompt_tokens=tokens_at(100)),
                   Reply(text="again", prompt_tokens=tokens_at(100))])
    rpc = rig.rpc(env=decision_env(rig))

    since = rpc.mark()
    rpc.send({"type": "prompt", "message": "one"})
    failed = rpc.wait_record(is_notify("Context compaction failed"), since=since)
    rpc.wait_record(is_compaction_end("manual"), since=since)
    rpc.wait_record(is_status(None, COMPACTION_KEY), since=since)
    again = rpc.mark()
    rpc.send({"type": "prompt", "message": "two"})
    second = rpc.wait_record(is_notify("Context compaction failed"), since=again)
    rpc.wait_record(is_compaction_end("manual"), since=again)
    rpc.wait_record(is_status(None, COMPACTION_KEY), since=again)  # the status is cleared again

    assert failed["message"] == "Context compaction failed: Nothing to compact (session too small)"
    assert failed["notifyType"] == "error"
    assert second["message"] == failed["message"]  # re-armed: the next 100 % turn tries again
    assert statuses(rpc, COMPACTION_KEY) == ["compacting at 100.0%", None, "compacting at 100.0%", None]
    assert [e for e in rpc.events(since) if e["type"] == "compaction_end" and not e.get("errorMessage")] == []


@pytest.mark.parametrize("mode", ["router on (control)", "AUTO_COMPACTION=0", "ENABLED=0", "saved OFF"])
def test_no_compaction_when_switched_off(rig: RouterRig, mode: str) -> None:
    # a reserve of 1000 keeps Pi's own threshold (31000 tokens) above the 95.5 % turn
    settings = prepare(rig, reserveTokens=1000)
    env = decision_env(rig)
    if mode == "AUTO_COMPACTION=0":
        env["PI_DECISION_ROUTER_AUTO_COMPACTION"] = "0"
    elif mode == "ENABLED=0":
        env["PI_DECISION_ROUTER_ENABLED"] = "0"
    elif mode == "saved OFF":
        state = rig.agent / "pi-decision-router" / "state.json"
        state.parent.mkdir(parents=True)
        state.write_text(json.dumps({str(rig.work): {"enabled": False, "autoCompaction": True}}))
    Provider(rig, [tool_call("read", {"path": "notes.txt"}, prompt_tokens=tokens_at(95.5)),
                   Reply(text="FINAL", prompt_tokens=1000)])
    rpc = rig.rpc(env=env)

    since = rpc.mark()
    rpc.send({"type": "prompt", "message": "read the notes"})
    rpc.wait_record(is_settled, since=since)

    compactions = [r for r in rpc.events(since) if r["type"] == "compaction_start"]
    warnings = [r for r in ui_requests(rpc, "notify", since) if "Compacting" in str(r.get("message"))]
    if mode == "router on (control)":
        assert [c["reason"] for c in compactions] == ["manual"]
        assert len(warnings) == 1
        assert parent_requests(rig)[-1].texts("user")[-1] == CONTINUATION
    else:
        assert compactions == []
        assert warnings == []
        _, second = parent_requests(rig)  # the tool loop simply went on
        assert second.texts("tool")[-1].startswith("some notes")
        assert rpc.command("get_last_assistant_text") == {"text": "FINAL"}
    assert (rig.agent / "settings.json").read_bytes() == settings
