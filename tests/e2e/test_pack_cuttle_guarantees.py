"""The `cuttle` pack end to end: what it guarantees where the seed draws a line.

- the user's /thinking level is a ceiling on every request, not only the first turn's;
- a model without a price is never "cheapest", and stats without prices give counts, not dollars;
- a pi-cuttle.json is never lost: one that does not parse is reported (file:line:col) and left
  byte for byte, a write keeps unknown keys and their order and leaves a `.bak`;
- maxConcurrent holds: a waiting turn says so on the status line and fails visibly after
  slotWaitMs, never going out over the cap.

Shared setup: helpers_cuttle.py; decisions: docs/packs/cuttle.md.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_cuttle import (
    CHEAP,
    REASONING,
    SMALL,
    Concurrency,
    base_config,
    chat_models,
    cuttle,
    cuttle_models,
    debug_lines,
    p_complex,
    setup_cuttle,
)
from tests.e2e.helpers_router import RouterRig, command, read_call, statuses
from tests.e2e.pi_harness import model_entry
from tests.e2e.pi_rpc import RpcPi

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

JsonDict = dict[str, Any]
UNPRICED = "fake/cloud-unpriced"


def efforts(rig: RouterRig) -> list[tuple[str, str | None]]:
    """(model, reasoning_effort) of every chat request, in order."""
    return [(c.model, c.reasoning_effort) for c in rig.fake.chat_requests()]


def assistant_errors(records: list[JsonDict]) -> list[str | None]:
    """The error messages of the assistant messages among ``records`` (None: no error)."""
    ends = [r["message"] for r in records if r["type"] == "message_end"]
    return [m.get("errorMessage") for m in ends if m["role"] == "assistant"]


# -- the user's /thinking is the ceiling of every request ---------------------------------------


def test_thinking_follows_the_users_level_on_every_turn_with_reclassify_session(rig: RouterRig) -> None:
    setup_cuttle(rig, base_config())  # reclassify: session, no thinking map
    p_complex(rig, 0.86)  # cloud-pricey, a reasoning model
    rpc = cuttle(rig, "--model", "cuttle/auto", "--thinking", "high")

    rpc.prompt_and_wait("design a new storage layer")
    rpc.command("set_thinking_level", level="off")
    rpc.prompt_and_wait("now a small fix")
    rpc.command("set_thinking_level", level="low")
    rpc.prompt_and_wait("and another")

    assert efforts(rig) == [("cloud-pricey", "high"), ("cloud-pricey", None), ("cloud-pricey", "low")]


def test_thinking_map_is_capped_by_the_users_level_of_each_request(rig: RouterRig) -> None:
    steps = [{"score": 0.2, "level": "off"}, {"score": 0.6, "level": "medium"}]
    levels = {"enabled": True, "default": "high", "map": steps}
    setup_cuttle(rig, base_config(thinkingLevels=levels))  # reclassify: session
    p_complex(rig, 0.9)  # cloud-pricey; the map gives the default, high
    held, go = threading.Event(), threading.Event()

    def reply(body: JsonDict) -> Reply | None:
        if "mid-turn" in json.dumps(body.get("messages")) and not held.is_set():
            held.set()  # the turn's first request: hold it while the user changes the level
            go.wait(30)
            return read_call(rig)
        return None

    rig.fake.script.fn = reply
    rpc = cuttle(rig, "--model", "cuttle/auto", "--thinking", "medium")

    rpc.prompt_and_wait("design a new storage layer")  # medium: the user's level caps high
    rpc.command("set_thinking_level", level="low")
    rpc.prompt_and_wait("second")  # sticky decision, capped by low
    rpc.command("set_thinking_level", level="xhigh")
    rpc.prompt_and_wait("third")  # the mapped level again, never the user's xhigh
    rpc.command("set_thinking_level", level="high")
    since = rpc.mark()
    rpc.send({"type": "prompt", "message": "a mid-turn change"})
    assert held.wait(30), "the first request of the fourth turn never arrived"
    rpc.command("set_thinking_level", level="minimal")  # while the turn's first request is out
    go.set()
    rpc.wait_event("agent_settled", 60, since)
    [why] = command(rpc, "/cuttle why")

    assert efforts(rig) == [
        ("cloud-pricey", "medium"),
        ("cloud-pricey", "low"),
        ("cloud-pricey", "high"),
        ("cloud-pricey", "high"),  # the fourth turn's first request, under high
        ("cloud-pricey", "minimal"),  # its tool-loop continuation, under the new minimal
    ]
    assert " thinking=minimal " in why


# -- prices: unknown is not free ----------------------------------------------------------------


def unpriced_models() -> list[JsonDict]:
    """The cuttle models plus a cloud model whose models.json entry has no cost (Pi fills in zeros)."""
    unpriced = model_entry("cloud-unpriced", 200000, reasoning=True, compat=REASONING)
    del unpriced["cost"]
    return [*cuttle_models(), unpriced]


def setup_unpriced(rig: RouterRig, cloud: list[str]) -> None:
    config = base_config(policy={"reclassify": "turn"})
    config["catalog"]["cloud"] = cloud
    setup_cuttle(rig, config, models=unpriced_models())


def test_an_unpriced_cloud_model_is_not_the_cheapest_and_stats_price_the_priced_one(rig: RouterRig) -> None:
    setup_unpriced(rig, [UNPRICED, CHEAP])  # listed first, 200k: it fits whatever fits cloud-cheap
    rig.fake.script.push(Reply(prompt_tokens=1000, completion_tokens=100), model="local-small")
    rpc = cuttle(rig, "--model", "cuttle/auto")

    p_complex(rig, 0.04)
    rpc.prompt_and_wait("list the files")
    p_complex(rig, 0.6)
    rpc.prompt_and_wait("design a new storage layer")
    [stats] = command(rpc, "/cuttle stats")

    assert chat_models(rig) == ["local-small", "cloud-cheap"]
    # the local request priced at cloud-cheap ($1 in, $2 out per 1M): 0.001 + 0.0002
    assert stats.endswith(f"\nestimated saved vs all-cloud ({CHEAP}): $0.0012")


def test_stats_without_any_cloud_price_give_counts_not_dollars(rig: RouterRig) -> None:
    setup_unpriced(rig, [UNPRICED])
    rig.fake.script.push(Reply(prompt_tokens=1000, completion_tokens=100), model="local-small")
    rpc = cuttle(rig, "--model", "cuttle/auto")

    p_complex(rig, 0.04)
    rpc.prompt_and_wait("list the files")
    p_complex(rig, 0.9)
    rpc.prompt_and_wait("design a new storage layer")
    [stats] = command(rpc, "/cuttle stats")

    assert chat_models(rig) == ["local-small", "cloud-unpriced"]
    assert stats == (
        "cuttle stats, last 7 days: 2 requests; local 50% (1), cloud 1\n"
        "tokens: local 1000 in / 100 out; cloud 10 in / 2 out\n"
        "estimated saved: unknown (no cloud model of the catalog has a price); counts only"
    )
    assert "$" not in stats


# -- pi-cuttle.json is never lost ---------------------------------------------------------------


BROKEN = """{
  "classifier": {"model": "llama.cpp/chat-small"},
  "catalog": {"local": ["fake/local-small"], "cloud": ["fake/cloud-cheap"]},
  "myNotes": "keep me",
}
"""


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (BROKEN, "5:1: not valid JSON: Expecting property name enclosed in double quotes "
                 "(a trailing comma: JSON allows none)"),
        (BROKEN.replace('  "myNotes": "keep me",\n', '  // my notes\n  "myNotes": "keep me"\n'),
         "4:3: not valid JSON: Expecting property name enclosed in double quotes (a comment: JSON has none)"),
    ],
    ids=["trailing-comma", "comment"],
)
def test_a_config_that_does_not_parse_is_reported_where_and_never_rewritten(
    rig: RouterRig, text: str, where: str
) -> None:
    debug = setup_cuttle(rig, None)
    path = rig.agent / "pi-cuttle.json"
    path.write_text(text)
    original = path.read_bytes()
    rpc = cuttle(rig, "--model", SMALL)

    [status] = command(rpc, "/cuttle status")
    [doctor] = command(rpc, "/cuttle doctor")
    [on] = command(rpc, "/cuttle on")
    [config_set] = command(rpc, "/cuttle config set policy.threshold 0.7")
    [off] = command(rpc, "/cuttle off")
    model = rpc.command("get_state")["model"]

    problem = f"{path}:{where}"
    warning = f"{problem} (the file is ignored, and cuttle never rewrites it, until it parses)"
    [factory] = [line for line in debug_lines(debug) if line.startswith("factory ")]
    assert factory.endswith(f" sources= warnings={warning}")
    assert f"\nwarnings: {warning}\n" in status
    assert status.endswith(f"\nconfig files: none (defaults); ignored: {path} (see warnings)")
    assert f"\nwarning: {warning}" in doctor
    assert on.startswith(f"cuttle: nothing changed: {problem}. cuttle never rewrites a file it cannot read")
    assert on.endswith("run /cuttle on again.")
    assert config_set.startswith(f"cuttle: nothing changed: {problem}.")
    assert off == (f"cuttle: off: autoSelect was not saved ({problem}; "
                   "cuttle never rewrites a file it cannot read)")
    assert (model["provider"], model["id"]) == ("fake", "local-small")  # /cuttle on did not switch
    assert path.read_bytes() == original
    assert not (rig.agent / "pi-cuttle.json.bak").exists()


def test_a_write_keeps_unknown_keys_their_order_and_a_bom_and_leaves_a_backup(rig: RouterRig) -> None:
    setup_cuttle(rig, None)
    config = {
        "myNotes": {"owner": "me", "since": 2024},
        "policy": {"threshold": 0.5, "reclassify": "session", "myPolicyNote": "x"},
        "catalog": {"local": [SMALL], "cloud": [CHEAP]},
        "classifier": {"model": "llama.cpp/chat-small", "timeoutMs": 3000},
        "autoSelect": False,
        "zExtra": [1, 2, 3],
    }
    path = rig.agent / "pi-cuttle.json"
    original = "\ufeff" + json.dumps(config, indent=4) + "\n"
    path.write_text(original, encoding="utf-8")
    p_complex(rig, 0.04)
    rpc = cuttle(rig, "--model", SMALL)

    [status] = command(rpc, "/cuttle status")
    command(rpc, "/cuttle on")
    after_on = path.read_text(encoding="utf-8")
    backup_after_on = (rig.agent / "pi-cuttle.json.bak").read_text(encoding="utf-8")
    command(rpc, "/cuttle config set policy.threshold 0.7")
    rpc.prompt_and_wait("list the files")

    assert status.endswith(f"\nconfig files: {path}")  # a BOM is harmless
    assert after_on == "\ufeff" + json.dumps({**config, "autoSelect": True}, indent=4) + "\n"
    assert backup_after_on == original
    final = json.loads(path.read_text(encoding="utf-8").removeprefix("\ufeff"))
    assert list(final) == list(config)
    assert list(final["policy"]) == ["threshold", "reclassify", "myPolicyNote"]
    assert final["policy"]["threshold"] == 0.7
    assert (rig.agent / "pi-cuttle.json.bak").read_text(encoding="utf-8") == after_on
    assert chat_models(rig) == ["local-small"]  # the kept file routes


# -- maxConcurrent holds ------------------------------------------------------------------------


def start_capped(rig: RouterRig, wait_ms: int) -> tuple[Concurrency, RpcPi, RpcPi]:
    setup_cuttle(rig, base_config(maxConcurrent=1, slotWaitMs=wait_ms))
    p_complex(rig, 0.04)
    tracker = Concurrency(hold_s=90.0)
    rig.fake.script.fn = tracker
    return tracker, cuttle(rig, "--model", "cuttle/auto"), cuttle(rig, "--model", "cuttle/auto")


def test_a_turn_that_gets_no_slot_fails_visibly_and_never_overlaps(rig: RouterRig) -> None:
    tracker, first, second = start_capped(rig, 1500)
    first_since = first.mark()
    first.send({"type": "prompt", "message": "first task"})
    try:
        assert tracker.first.wait(30), "the first request never arrived"
        records = second.prompt_and_wait("second task", timeout=60)  # waits 1.5 s, then fails
        seen_while_held = tracker.seen
    finally:
        tracker.release.set()
    first.wait_event("agent_settled", 60, first_since)
    again = second.prompt_and_wait("second task, again", timeout=60)

    [error] = assistant_errors(records)
    assert error == (
        "cuttle: no free slot within 1.5s (maxConcurrent=1 and other Pi processes hold every slot); "
        "the request was not sent. Try again when they are done, or raise maxConcurrent or slotWaitMs in "
        f"{rig.agent / 'pi-cuttle.json'}"
    )
    assert seen_while_held == 1  # the refused turn never reached the provider
    waiting = "cuttle: waiting for a free slot (maxConcurrent=1; the turn fails after 1.5s)"
    assert statuses(second, key="cuttle") == [waiting, None]  # shown while it waited, then cleared
    assert statuses(first, key="cuttle") == []
    assert assistant_errors(again) == [None]  # the slot is free again: the turn goes out
    assert not tracker.held_too_long
    assert (tracker.seen, tracker.peak) == (2, 1)


def test_a_waiting_turn_shows_it_and_goes_out_when_the_slot_frees(rig: RouterRig) -> None:
    tracker, first, second = start_capped(rig, 120000)
    marks = [first.mark(), second.mark()]
    first.send({"type": "prompt", "message": "first task"})
    try:
        assert tracker.first.wait(30), "the first request never arrived"
        second.send({"type": "prompt", "message": "second task"})
        second.wait_event(helpers_router.is_status("waiting for a free slot", key="cuttle"), 30, marks[1])
        seen_while_waiting = tracker.seen
    finally:
        tracker.release.set()
    second.wait_event("agent_settled", 60, marks[1])
    first.wait_event("agent_settled", 60, marks[0])
    records = second.events(marks[1])

    assert seen_while_waiting == 1
    assert statuses(second, key="cuttle") == [
        "cuttle: waiting for a free slot (maxConcurrent=1; the turn fails after 120s)", None]
    assert assistant_errors(records) == [None]
    assert not tracker.held_too_long
    assert (tracker.seen, tracker.peak) == (2, 1)


def test_aborting_a_waiting_turn_stops_its_wait_and_takes_no_slot(rig: RouterRig) -> None:
    tracker, first, second = start_capped(rig, 120000)
    marks = [first.mark(), second.mark()]
    first.send({"type": "prompt", "message": "first task"})
    try:
        assert tracker.first.wait(30), "the first request never arrived"
        second.send({"type": "prompt", "message": "second task"})
        second.wait_event(helpers_router.is_status("waiting for a free slot", key="cuttle"), 30, marks[1])
        second.command("abort")
        second.wait_event("agent_settled", 30, marks[1])
    finally:
        tracker.release.set()
    first.wait_event("agent_settled", 60, marks[0])
    # had the aborted wait gone on, the second process would take the freed slot and keep it
    again = first.prompt_and_wait("first process, next task", timeout=180)

    assert assistant_errors(again) == [None]
    assert statuses(second, key="cuttle")[-1] is None  # the waiting line is gone
    assert not tracker.held_too_long
    assert (tracker.seen, tracker.peak) == (2, 1)
    users = [c.texts("user")[-1] for c in rig.fake.chat_requests()]
    assert users == ["first task", "first process, next task"]  # the aborted turn never went out
