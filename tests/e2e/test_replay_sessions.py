"""`router replay` and `router diff` read back the session files of a real Pi 1.6.0 run.

The run's policy cuts the tools on every prompt and sends hard prompts to the cloud model, its
classify signal failing live (no classifier, so its fallback decides). The replay reads the
decision log the sidecar wrote during the run and must decide what the live sidecar decided.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig, read_call, session_files

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

POLICY = """
signals:
  hard:
    classify:
      model: llama.cpp/none
      questions: {hard: {type: bool, instructions: "is it hard?"}}
    transform: "result.hard.probability > 0.5"
    fallback: "'hard' in text"
rules:
  - id: only-read
    on: input
    do: [{tools: {only: [read]}}]
  - id: cloud-for-hard
    on: input
    group: model
    when: "signals.hard"
    do: [{model: fake/fake-cloud}]
  - id: local-otherwise
    on: input
    group: model
    do: [{model: fake/fake-local}]
"""


def run_pi(rig: RouterRig, policy: str = POLICY) -> str:
    rig.policy(policy)
    rig.fake.script.push(read_call(rig), Reply(text="read it"), Reply(text="thought hard"))
    rpc = rig.rpc(session=True)
    rpc.prompt_and_wait("read the notes")
    rpc.prompt_and_wait("a hard question")
    rpc.close()
    [path] = session_files(rig.session_dir)
    return str(json.loads(path.read_text().splitlines()[0])["id"])


def live_log(rig: RouterRig) -> list[dict[str, object]]:
    """The decision log the sidecar wrote during the run."""
    log = rig.agent / "router" / "log" / "decisions.jsonl"
    assert log.is_file(), "the sidecar wrote no decision log"
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_replay_reads_back_a_real_session_with_its_decision_log(rig: RouterRig) -> None:
    session = run_pi(rig)
    live = live_log(rig)
    assert {r["session"] for r in live} == {session}
    assert {r["project"]["name"] for r in live} == {rig.work.name}  # type: ignore[index]
    done = rig.router("replay", str(rig.session_dir), "--log", str(rig.agent / "router" / "log"),
                      "-f", "json")
    assert done.returncode == 0, done.stderr
    assert "recorded under policy" not in done.stderr  # the same policy: the recorded digest
    body = json.loads(done.stdout)
    assert (body["sessions"], body["turns"]) == (1, 3)
    assert body["rules"] == {"only-read": 2, "local-otherwise": 1, "cloud-for-hard": 1}
    fired_live: dict[str, int] = {}
    for entry in live:
        for rule in entry["rules"]:  # type: ignore[attr-defined]
            if rule["fired"]:
                fired_live[rule["id"]] = fired_live.get(rule["id"], 0) + 1
    assert body["rules"] == fired_live  # the replay decides what the live sidecar decided
    assert body["models"] == {"fake/fake-local": 2, "fake/fake-cloud": 1}
    assert body["recorded_models"] == body["models"]
    assert body["tools"] == {"read": 3}
    assert body["signals"]["recorded"] + body["signals"]["recorded_failure"] == 2
    assert body["cost"]["baseline"]["model"] == "fake/fake-cloud"
    assert body["problems"] == []


def test_diff_of_two_policies_on_the_real_session_reports_the_turns_that_change(rig: RouterRig) -> None:
    run_pi(rig)
    old = rig.policy_path
    new = rig.work / "new.yaml"
    text = old.read_text().replace("do: [{tools: {only: [read]}}]", "do: [{tools: {only: [read, bash]}}]")
    new.write_text(text.replace("fake/fake-cloud", "fake/deepseek-v4-pro"))
    done = rig.router("diff", str(old), str(new), "--sessions", str(rig.session_dir), "-f", "json",
                      "--fail-on-change")
    assert done.returncode == 1, done.stderr
    body = json.loads(done.stdout)
    changes = {c["turn"]: c["changes"] for c in body["changes"]}
    assert set(changes) == {1, 2, 3}
    assert all(c["tools"] == {"old": ["read"], "new": ["read", "bash"]} for c in changes.values())
    assert changes[3]["model"] == {"old": "fake/fake-cloud", "new": "fake/deepseek-v4-pro"}
    assert "model" not in changes[1] and "model" not in changes[2]
    same = rig.router("diff", str(old), str(old), "--sessions", str(rig.session_dir), "--fail-on-change")
    assert same.returncode == 0 and "no turn changes" in same.stdout


PRICED = """
  - id: turn-seen
    on: turn_end
    do: [{set: {turns_seen: true}}]
provides:
  prices:
    fake/fake-cloud: {input: 2, output: 4}
"""


def test_the_live_cost_of_each_turn_is_the_replays_and_both_name_the_project(rig: RouterRig) -> None:
    """The sidecar prices each turn as `router replay` prices it (fake-local on loopback, free;
    fake-cloud at its registry price; the policy's price first), and the replay of the agent's own
    sessions gives each session the project the live records have."""
    run_pi(rig, POLICY + PRICED)
    turns = [r for r in live_log(rig) if r["event"] == "turn_end"]
    assert [(r["model"], r["price_source"]) for r in turns] == [
        ("fake/fake-local", "local"), ("fake/fake-local", "local"), ("fake/fake-cloud", "policy")]
    assert [r["cost"] for r in turns][:2] == [0.0, 0.0] and turns[2]["cost"] > 0  # type: ignore[operator]
    done = rig.router("replay", str(rig.session_dir), "--log", str(rig.agent / "router" / "log"),
                      "-f", "json")
    assert done.returncode == 0, done.stderr
    [session] = json.loads(done.stdout)["per_session"]
    estimated = [t["estimated_cost"] for t in session["turn_outcomes"]]
    assert estimated == pytest.approx([r["cost"] for r in turns])  # the same number, live and replayed
    assert session["project"] == turns[0]["project"] and session["project"]["name"] == rig.work.name
    assert json.loads(done.stdout)["cost"]["estimated"]["priced_by"] == {"local": 2, "policy": 1}
