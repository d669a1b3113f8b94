"""Policy reloads, a broken policy, a killed or hanging sidecar: Pi keeps answering (fail open)."""

from __future__ import annotations

import os
import signal

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import (
    BUILTIN,
    ONLY_READ,
    RouterRig,
    descendants,
    is_notify,
    is_status,
    kill_descendant,
    notices,
    router_env,
    rpc_pid,
    sidecar_pids,
    wait_until,
)

pytestmark = pytest.mark.e2e
rig = helpers_router.rig


ONLY_BASH = """
rules:
  - id: rule-b
    on: input
    do:
      - tools: {only: [bash]}
"""

SECTION = """
rules:
  - id: rule-a
    on: input
    do:
      - tools: {only: [read]}
  - id: rule-b-section
    on: before_agent_start
    do:
      - section: {name: rule_b, text: RULE_B_SECTION}
"""


def test_policy_edit_takes_effect_and_broken_edit_keeps_last_good(rig: RouterRig) -> None:
    rig.policy(ONLY_READ)
    rpc = rig.rpc()

    rpc.prompt_and_wait("one")
    rig.policy(ONLY_BASH)
    rpc.prompt_and_wait("two")
    since = rpc.mark()
    rig.policy_path.write_text("version: 1\nrules: [\n  - id: broken\n")  # invalid YAML
    rpc.prompt_and_wait("three")
    failure = rpc.wait_record(is_notify("policy reload failed"), since=since)
    rpc.prompt_and_wait("four")

    one, two, three, four = rig.fake.chat_requests()
    assert one.tools == ["read"]
    assert two.tools == ["bash"]
    assert three.tools == ["bash"] and four.tools == ["bash"]  # the last good policy still applies
    assert failure["notifyType"] == "warning"
    assert "keeping the last good policy" in failure["message"]
    assert "policy reload failed" in rig.log("router.log")
    assert "policy reloaded" in rig.log("router.log")


def test_broken_policy_edit_warns_once(rig: RouterRig) -> None:
    rig.policy(ONLY_READ)
    rpc = rig.rpc()
    rpc.prompt_and_wait("one")

    rig.policy_path.write_text("version: 1\nrules: [\n  - id: broken\n")
    rpc.prompt_and_wait("two")
    rpc.prompt_and_wait("three")

    assert rig.fake.chat_requests()[-1].tools == ["read"]
    assert sum("policy reload failed" in n for n in notices(rpc)) == 1, notices(rpc)


def test_policy_edit_adding_an_event_type_takes_effect(rig: RouterRig) -> None:
    rig.policy(ONLY_READ)
    rpc = rig.rpc()

    rpc.prompt_and_wait("one")
    rig.policy(SECTION)  # adds a rule on before_agent_start, an event the bridge did not forward
    rpc.prompt_and_wait("two")

    one, two = rig.fake.chat_requests()
    assert one.tools == ["read"] and "RULE_B_SECTION" not in one.system
    assert "<rule_b>\nRULE_B_SECTION\n</rule_b>" in two.system


def test_broken_policy_at_startup_fails_open_and_warns_once(rig: RouterRig) -> None:
    rig.policy("rules:\n  - id: bad\n    on: input\n    do: [{tools: {only: [read]}}]\n    when: 'nope(('\n")
    rig.fake.script.push(Reply(text="first"), Reply(text="second"))
    rpc = rig.rpc()

    rpc.prompt_and_wait("one")
    rpc.prompt_and_wait("two")

    assert rpc.command("get_last_assistant_text") == {"text": "second"}
    first, second = rig.fake.chat_requests()
    assert set(first.tools) >= BUILTIN and set(second.tools) >= BUILTIN  # the rule never applied
    warned = [n for n in notices(rpc) if "is not applied: it has errors" in n]
    assert len(warned) == 1, notices(rpc)
    assert "router lint" in warned[0]
    assert "is not applied: it has errors" in rig.log()


def test_broken_policy_at_startup_print_mode(rig: RouterRig) -> None:
    rig.policy_path.write_text("version: 1\nrules: {oops\n")

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert done.stderr.count("is not applied: it has errors") == 1, done.stderr
    assert len(rig.fake.chat_requests()) == 1


def test_killed_sidecar_fails_open_and_restarts(rig: RouterRig) -> None:
    rig.policy(ONLY_READ)
    rpc = rig.rpc()
    rpc.prompt_and_wait("one")
    [pid] = sidecar_pids(rpc_pid(rpc))

    since = rpc.mark()
    os.kill(pid, signal.SIGKILL)
    warning = rpc.wait_record(is_notify("sidecar exited"), since=since)
    offline = rpc.wait_record(is_status("offline"), since=since)
    back = rpc.wait_record(is_notify("policy engine is back"), since=since)  # after the back-off
    cleared = rpc.wait_record(is_status(None), since=since)
    rpc.prompt_and_wait("two")

    assert warning["notifyType"] == "warning" and "sidecar exited" in warning["message"]
    assert "restarting" in offline["statusText"]
    assert back["notifyType"] == "info"
    assert rpc.records.index(offline) < rpc.records.index(cleared)
    [new_pid] = sidecar_pids(rpc_pid(rpc))
    assert new_pid != pid
    one, two = rig.fake.chat_requests()
    assert one.tools == ["read"] and two.tools == ["read"]
    assert "sidecar exited" in rig.log()


def test_killed_sidecar_next_prompt_answered(rig: RouterRig) -> None:
    """A prompt sent right after the kill, before the back-off ends, is still answered."""
    rig.policy(ONLY_READ)
    rig.fake.script.push(Reply(text="first"), Reply(text="second"))
    rpc = rig.rpc()
    rpc.prompt_and_wait("one")
    [pid] = sidecar_pids(rpc_pid(rpc))

    since = rpc.mark()
    os.kill(pid, signal.SIGKILL)
    rpc.wait_record(is_notify("sidecar exited"), since=since)
    rpc.prompt_and_wait("two")

    assert rpc.command("get_last_assistant_text") == {"text": "second"}
    assert len(rig.fake.chat_requests()) == 2
    assert sum("sidecar exited" in n for n in notices(rpc)) == 1  # warned once per outage


def test_hanging_sidecar_times_out_and_pi_answers(rig: RouterRig) -> None:
    rig.policy(ONLY_READ)
    env = router_env(rig.agent, rig.install, ROUTER_BRIDGE_TIMEOUT_MS="300")
    rig.fake.script.push(Reply(text="first"), Reply(text="while hung"), Reply(text="third"))
    rpc = rig.rpc(env=env)
    rpc.prompt_and_wait("one")
    pi = rpc_pid(rpc)
    [pid] = sidecar_pids(pi)
    try:
        os.kill(pid, signal.SIGSTOP)
        since = rpc.mark()
        rpc.prompt_and_wait("two", timeout=20)
        answered_while_hung = rpc.command("get_last_assistant_text")
        warning = rpc.wait_record(is_notify("no answer"), since=since)
        offline = rpc.wait_record(is_status("offline"), since=since)
        # the hung sidecar is replaced; the policy applies again once the new one answers
        rpc.wait_record(is_notify("policy engine is back"), since=since)
        rpc.prompt_and_wait("three")
        # the bridge kills the stopped sidecar (a second after stopping it) and Node reaps it
        wait_until(lambda: pid not in descendants(pi), 10, "the hung sidecar to be killed and reaped")
        rpc.command("get_state")  # a round trip: Node has run the exit handler of the reaped child
    finally:
        kill_descendant(pi, pid)  # only when the test failed before the bridge killed it

    assert "300 ms" in warning["message"]
    assert offline["statusText"] == "router: offline (restarting)"
    one, two, three = rig.fake.chat_requests()
    assert one.tools == ["read"]
    assert answered_while_hung == {"text": "while hung"}
    assert two.texts("user")[-1] == "two"
    assert "event input failed: no answer to event within 300 ms" in rig.log()
    assert three.tools == ["read"]
    assert rpc.command("get_last_assistant_text") == {"text": "third"}
    assert len(sidecar_pids(pi)) == 1
    assert sum("no answer" in n for n in notices(rpc)) == 1
    # the replaced sidecar's late exit must not take its successor down
    assert not [n for n in notices(rpc) if "sidecar exited" in n]
