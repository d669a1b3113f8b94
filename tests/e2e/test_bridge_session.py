"""Session state persisted in the Pi session and restored on resume; compaction started by a rule."""

from __future__ import annotations

import json

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_cuttle import (
    SMALL,
    base_config,
    chat_models,
    classifier_calls,
    cuttle,
    p_complex,
    setup_cuttle,
)
from tests.e2e.helpers_decision import decision_env
from tests.e2e.helpers_router import (
    STATE_ENTRY,
    RouterRig,
    is_notify,
    notices,
    read_call,
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


# -- one state entry per change -------------------------------------------------------------------

SAME_AGAIN = """
transient_state: [runs]
rules:
  - id: mark-seen
    on: input
    do: [{set: {seen: true}}]                      # the same value at every prompt
  - id: count-runs
    on: before_agent_start
    do:
      - set: {runs: "{(state.runs or 0) + 1}"}     # transient: kept in memory, never stored
      - system_append: {text: "RUNS={state.runs}"}
"""


def state_entries(rig: RouterRig) -> list[dict[str, object]]:
    return [e["data"]["state"] for e in session_entries(rig.session_dir)
            if e.get("type") == "custom" and e.get("customType") == STATE_ENTRY]


def test_a_state_entry_only_when_the_stored_state_changes(rig: RouterRig) -> None:
    rig.policy(SAME_AGAIN)
    rpc = rig.rpc(session=True)
    for text in ("first", "second", "third"):
        rpc.prompt_and_wait(text)
    assert rpc.close() == 0
    resumed = rig.print("--continue", "fourth", session=True)

    assert resumed.returncode == 0, resumed.stderr
    runs = [chat.system.split("RUNS=")[-1].split()[0] for chat in rig.fake.chat_requests()]
    assert runs == ["1", "2", "3", "1"]  # in memory for the session, not restored on resume
    assert state_entries(rig) == [{"seen": True}]  # set four times, stored once


def test_the_packs_store_their_state_once_per_real_change(rig: RouterRig) -> None:
    """cuttle (with the slot broker) and decision: no entry at a session start, none per turn or
    tool step; the routing decision is the one change, and a resumed session keeps it."""
    setup_cuttle(rig, base_config(maxConcurrent=2), policy="use: [cuttle, decision]\n")
    p_complex(rig, 0.04)
    rig.fake.script.push(read_call(rig), Reply(text="r1"), Reply(text="r2"), Reply(text="r3"))
    env = decision_env(rig)
    rpc = cuttle(rig, "--model", "cuttle/auto", session=True, env=env)
    rpc.prompt_and_wait("first")
    rpc.prompt_and_wait("second")
    assert rpc.close() == 0
    rpc = cuttle(rig, "--continue", session=True, env=env)
    rpc.prompt_and_wait("third")
    assert rpc.close() == 0

    assert chat_models(rig) == ["local-small"] * 4  # the decision stuck, also after the resume
    assert classifier_calls(rig) == 1
    [stored] = state_entries(rig)
    assert list(stored) == ["cu"]  # nothing of the decision pack, no slot
    assert "slot" not in stored["cu"]
    assert (stored["cu"]["tier"], stored["cu"]["ref"], stored["cu"]["reason"]) == (
        "local", SMALL, "classifier p(complex)=0.04")
