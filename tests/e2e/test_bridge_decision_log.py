"""The decision log and `/policy why` inside a real Pi: what the sidecar wrote is what happened.

A small user policy (a model choice on input, a block on tool_call, a shadow rule) runs in a real
Pi over RPC; the installed `router log --format json` reads the records back, and `/policy why`
explains the last decisions from the trace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig, tool_call
from tests.replay.test_report_html import parsed

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

PROMPT = "a hard task about the quarterly numbers"
POLICY = """
rules:
  - id: pick-cloud
    on: input
    match: "contains(text, 'hard')"
    do: [{model: fake/fake-cloud}]
  - id: try-local
    on: input
    group: trial
    shadow: true
    do: [{model: fake/fake-local}]
  - id: no-rm
    on: tool_call
    match: "tool.name == 'bash' && contains(tool.input.command, 'rm ')"
    do: [{block: "rm is not allowed here"}]
"""


def router_log(rig: RouterRig, *args: str) -> list[dict[str, Any]]:
    """`router log --format json` through the installed console script, with the rig's agent dir."""
    script = sys.executable.rsplit("/", 1)[0] + "/router"
    done = subprocess.run([script, "log", "--format", "json", *args], cwd=rig.work, env=rig.env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_pi_run_writes_records_that_router_log_reads_back(rig: RouterRig) -> None:
    rig.policy(POLICY)
    rig.fake.script.push(tool_call("bash", {"command": "rm -rf build"}), Reply(text="done"))
    rpc = rig.rpc()
    rpc.prompt_and_wait(PROMPT)
    assert rig.fake.chat_requests()[0].model == "fake-cloud"

    records = router_log(rig)
    [entry] = [r for r in records if r["event"] == "input"]
    assert entry["rules"] == ["pick-cloud"] and entry["shadow"] == ["try-local"]
    assert entry["actions"] == [
        {"action": "model", "params": {"ref": "fake/fake-cloud"}, "rule": "pick-cloud"}]
    assert entry["model"] == "fake/fake-cloud" and entry["session"]
    [blocked] = [r for r in records if r["event"] == "tool_call"]
    assert blocked["rules"] == ["no-rm"] and blocked["session"] == entry["session"]
    assert blocked["actions"][0]["action"] == "block"
    assert blocked["actions"][0]["params"]["reason"] == "rm is not allowed here"
    assert router_log(rig, "--rule", "no-rm") == [blocked]
    assert router_log(rig, "--session", entry["session"][:6]) == records

    text = "".join(p.read_text() for p in (rig.agent / "router" / "log").glob("decisions*.jsonl"))
    assert PROMPT not in text and "quarterly" not in text  # no prompt text unless the user says so
    raw = [json.loads(line) for line in text.splitlines()]
    [input_record] = [r for r in raw if r["event"] == "input"]
    assert input_record["shadow"] == [{"id": "try-local", "agrees": False, "would": [
        {"action": "model", "params": {"ref": "fake/fake-local"}, "rule": "try-local"}]}]
    tool_results = rig.fake.chat_requests()[-1].texts("tool")
    assert any("rm is not allowed here" in t for t in tool_results), tool_results


def test_report_and_shadow_report_read_the_turns_of_a_real_pi_run(rig: RouterRig) -> None:
    """The turn_end record names the model that answered and its tokens; `router report --html`
    counts that turn (not the decisions) at its price, `router shadow-report` prices it on the
    shadow's model and shows where it disagreed."""
    rig.policy(POLICY + "  - id: count-turns\n    on: turn_end\n"
               "    do: [{set: {turns: \"{(state.turns or 0) + 1}\"}}]\n")
    rig.fake.script.push(Reply(text="done", prompt_tokens=1000, completion_tokens=100))
    rpc = rig.rpc()
    rpc.prompt_and_wait(PROMPT)
    text = "".join(p.read_text() for p in (rig.agent / "router" / "log").glob("decisions*.jsonl"))
    [turn] = [r for r in map(json.loads, text.splitlines()) if r["event"] == "turn_end"]
    assert turn["model"] == "fake/fake-cloud" and turn["tokens"]["input"] == 1000, turn
    assert turn["tokens"]["output"] == 100

    page = rig.tmp / "report.html"
    done = rig.router("report", "--html", str(page))
    assert done.returncode == 0, done.stderr
    cells = parsed(page.read_text(encoding="utf-8"))
    assert cells.summary["turns"] == "1" and int(cells.summary["decisions"]) >= 2
    assert cells.rows[("data-model", "fake/fake-cloud")][:3] == ["fake/fake-cloud", "1", "100%"]
    assert cells.summary["cost"].startswith("$0.0045")  # 1000 x $3 + 100 x $15 per million

    shadow = rig.router("shadow-report", "--format", "json")
    assert shadow.returncode == 0, shadow.stderr
    [rule] = json.loads(shadow.stdout)["rules"]
    assert (rule["id"], rule["disagreed"], rule["agreed"]) == ("try-local", 1, 0)
    assert rule["examples"][0] | {"session": ""} == {"aspect": "model", "would": "fake/fake-local",
                                                     "actual": "fake/fake-cloud", "session": "", "turn": 1,
                                                     "prompt": None}
    assert rule["cost"]["actual"]["usd"] == pytest.approx(0.0045)
    assert rule["cost"]["shadow"] == {"usd": 0.0, "turns": 1, "unknown_turns": 0, "priced_by": {"local": 1}}


def test_policy_why_in_pi_explains_the_last_decisions(rig: RouterRig) -> None:
    rig.policy(POLICY)
    rig.fake.script.push(tool_call("bash", {"command": "ls"}), Reply(text="done"))
    rpc = rig.rpc()
    rpc.prompt_and_wait("an easy one")

    [why_input] = helpers_router.command(rpc, "/policy why input")
    lines = why_input.splitlines()
    assert lines[0].startswith("last decision: input #0 at ")
    assert any(line.startswith("  pick-cloud: not matched (match was false)") for line in lines), lines
    assert "      match contains(text, 'hard'): false  [text=\"an easy one\"]" in lines
    assert any(line.startswith("  try-local (shadow): would fire (shadow: not applied)") for line in lines)

    [why_tool] = helpers_router.command(rpc, "/policy why tool_call")
    tool_lines = why_tool.splitlines()
    assert tool_lines[0].startswith("last decision: tool_call #0 at ")
    assert any(line.startswith("  no-rm: not matched (match was false)") for line in tool_lines), tool_lines

    [latest] = helpers_router.command(rpc, "/policy why")
    assert latest.startswith("last decision: ")
    [nothing] = helpers_router.command(rpc, "/policy why compaction_done")
    assert nothing == ("no decision yet in this session: the router has evaluated no compaction_done "
                       "event of it")
