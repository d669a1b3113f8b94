"""Session state persisted in the Pi session and restored on resume; compaction started by a rule."""

from __future__ import annotations

import json

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import (
    STATE_ENTRY,
    RouterRig,
    is_notify,
    notices,
    session_entries,
    session_files,
)

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

COUNTER = """
rules:
  - id: count-prompts
    on: input
    do:
      - set: {count: "{(state.count or 0) + 1}"}
  - id: show-count
    on: before_agent_start
    do:
      - system_append: {text: "ROUTER_COUNT={state.count}"}
"""


def test_state_persisted_and_restored_on_continue(rig: RouterRig) -> None:
    rig.policy(COUNTER)
    rig.fake.script.push(Reply(text="r1"), Reply(text="r2"), Reply(text="r3"))
    rpc = rig.rpc(session=True)

    rpc.prompt_and_wait("first")
    rpc.prompt_and_wait("second")
    appended = [r["entry"] for r in rpc.events(type_="entry_appended")]
    assert rpc.close() == 0
    resumed = rig.print("--continue", "third", session=True)

    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "r3"
    counts = [chat.system.split("ROUTER_COUNT=")[-1].split()[0] for chat in rig.fake.chat_requests()]
    assert counts == ["1", "2", "3"]
    third = rig.fake.chat_requests()[2]
    assert third.texts("user")[:2] == ["first", "second"]  # the same session was resumed
    assert [(e["customType"], e["data"]["state"]) for e in appended if e.get("type") == "custom"] == [
        (STATE_ENTRY, {"count": 1}),
        (STATE_ENTRY, {"count": 2}),
    ]

    [session_file] = session_files(rig.session_dir)
    states = [
        e["data"]["state"]
        for e in session_entries(rig.session_dir)
        if e.get("type") == "custom" and e.get("customType") == STATE_ENTRY
    ]
    assert states == [{"count": 1}, {"count": 2}, {"count": 3}]
    assert "ROUTER_COUNT" not in "".join(
        json.dumps(e) for e in session_entries(rig.session_dir) if e.get("type") == "custom"
    )
    assert session_file.stat().st_size > 0


def test_state_starts_fresh_in_a_new_session(rig: RouterRig) -> None:
    """Control for the resume test: without --continue the count starts at 1 again."""
    rig.policy(COUNTER)

    assert rig.print("first", session=True).returncode == 0
    assert rig.print("again", session=True).returncode == 0

    counts = [chat.system.split("ROUTER_COUNT=")[-1].split()[0] for chat in rig.fake.chat_requests()]
    assert counts == ["1", "1"]
    assert len(session_files(rig.session_dir)) == 2


COMPACT = """
rules:
  - id: compact-when-big
    on: agent_settled
    when: "usage.percent >= 50 and not state.compacted"
    do:
      - compact: {instructions: ROUTER_COMPACT_INSTRUCTIONS}
      - set: {compacted: true}
  - id: compacted
    on: compaction_done
    do:
      - notify: "COMPACTED by_router={by_router} reason={reason}"
"""


def test_compact_from_agent_settled(rig: RouterRig) -> None:
    rig.settings(defaultModel="fake-cloud", compaction={"keepRecentTokens": 10})
    rig.policy(COMPACT)
    rig.fake.script.push(
        Reply(text="small answer " * 20, prompt_tokens=1000),
        Reply(text="big answer " * 20, prompt_tokens=120000),  # 60% of fake-cloud's 200k
    )
    rig.fake.script.default = Reply(text="SUMMARY_TEXT_42")  # the compaction's summary requests
    rpc = rig.rpc(session=True)

    rpc.prompt_and_wait("first question " * 10)
    assert not rpc.events(type_="compaction_start")  # 0.5% full: the rule does not fire
    since = rpc.mark()
    rpc.prompt_and_wait("second question " * 10)
    start = rpc.wait_event("compaction_start", since=since)
    end = rpc.wait_event("compaction_end", since=since)
    done = rpc.wait_record(is_notify("COMPACTED"), since=since)
    summaries = len(rig.fake.chat_requests()) - 2
    # as full as the second: only the state flag keeps the rule from compacting again
    rig.fake.script.push(Reply(text="after compaction", prompt_tokens=120000))
    rpc.prompt_and_wait("third question")
    rpc.command("get_state")  # a round trip: a compaction started on this settle is reported by now

    assert start["reason"] == "manual"
    assert end.get("errorMessage") in (None, ""), end
    assert end.get("aborted") in (None, False)
    assert done["message"] == "COMPACTED by_router=true reason=manual"
    chats = rig.fake.chat_requests()
    assert summaries >= 1 and len(chats) == 2 + summaries + 1
    assert all("ROUTER_COMPACT_INSTRUCTIONS" in json.dumps(c.body) for c in chats[2:-1])
    after = chats[-1]
    assert "SUMMARY_TEXT_42" in json.dumps(after.messages)
    assert "first question" not in json.dumps(after.messages)  # summarized away
    assert len(rpc.events(type_="compaction_start")) == 1  # the state flag keeps it to one
    assert sum("COMPACTED" in n for n in notices(rpc)) == 1
    entries = session_entries(rig.session_dir)
    [compaction] = [e for e in entries if e.get("type") == "compaction"]
    assert "SUMMARY_TEXT_42" in compaction["summary"]
