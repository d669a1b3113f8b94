"""Guards under faults: a real Pi 1.6.0 whose user policy blocks `git push -f`, with the engine
killed, stopped or missing while the model calls that command. The guarded tool call is refused
every time (the command never runs), the user is told, and a routing event under the same fault
goes on natively (docs/security.md, "Failure policy")."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.fake_chat import Reply
from tests.e2e.helpers_router import RouterRig, notices, rpc_pid, sidecar_pids, wait_until
from tests.reliability.faults import Case, is_warning, signal_descendant, timed

pytestmark = pytest.mark.e2e

GUARD = """\
rules:
  - id: no-force-push
    on: tool_call
    when: "tool.name == 'bash' and regex(tool.input.command, 'git push (-f|--force)')"
    do: [{block: "force pushes are not allowed"}]
"""
REFUSED = "because the policy's guards fail closed"


def push_call(workdir: Path) -> Reply:
    """The model's reply: run a command that would leave a file behind, then force-push."""
    return Reply(text="", tool_calls=[{"name": "bash", "arguments": {
        "command": f"touch {workdir / 'PUSHED'} && git push -f"}}])


def tool_result_text(rig: RouterRig) -> str:
    """What the model was told of its tool call (the tool message of the last request)."""
    return "\n".join(rig.fake.chat_requests()[-1].texts("tool"))


def is_tool_start(record: dict[str, object]) -> bool:
    return record.get("type") == "tool_execution_start"


def refused_push(rig: RouterRig, case: Case, note: str) -> None:
    """The common outcome: the command never ran, the model read a refusal, the user was told."""
    assert not (rig.work / "PUSHED").exists(), "the guarded command ran"
    told = tool_result_text(rig)
    assert REFUSED in told or "force pushes are not allowed" in told, told
    case.outcome = "blocked"
    case.note(note)


def push_once(rig: RouterRig, case: Case, call: Reply, env: dict[str, str] | None = None) -> None:
    """A new Pi whose model makes `call`, one prompt, its time measured (what the fault cost it)."""
    rig.fake.script.push(call, Reply(text="done"))
    rpc = timed(rig.rpc(env=env or rig.env))
    started = time.perf_counter()
    rpc.prompt_and_wait("push it", timeout=60)
    case.measured(started, time.perf_counter())
    case.tries = 1


def test_sidecar_killed_while_it_decides_a_tool_call(rig: RouterRig, case: Case) -> None:
    case.describe("the sidecar killed (SIGKILL) while it decides a guarded tool call", group="guard")
    rig.policy(GUARD)
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait("hello")
    [pid] = sidecar_pids(rpc_pid(rpc))
    assert signal_descendant(rpc_pid(rpc), pid, signal.SIGSTOP)  # it cannot answer before the kill
    rig.fake.script.push(push_call(rig.work), Reply(text="done"))
    since = rpc.mark()
    started = time.perf_counter()
    assert rpc.send({"type": "prompt", "message": "push it"}).get("success")
    rpc.wait_record(is_tool_start, since=since)
    assert signal_descendant(rpc_pid(rpc), pid, signal.SIGKILL)
    rpc.wait_record(lambda r: r.get("type") == "agent_settled", since=since, timeout=60)
    case.measured(started, time.perf_counter())
    case.tries = 1
    told = [r["message"] for r in rpc.events(since) if is_warning(r)]
    assert told, "the user was not told"
    refused_push(rig, case, "Refused with the cause; the user warned: " + told[0][:120])


def test_sidecar_stopped_while_it_decides_a_tool_call(rig: RouterRig, case: Case) -> None:
    case.describe("the sidecar stopped (SIGSTOP) while it decides a guarded tool call", group="guard")
    rig.policy(GUARD)
    rpc = timed(rig.rpc(env={**rig.env, "ROUTER_BRIDGE_TIMEOUT_MS": "1500"}))
    rpc.prompt_and_wait("hello")
    [pid] = sidecar_pids(rpc_pid(rpc))
    assert signal_descendant(rpc_pid(rpc), pid, signal.SIGSTOP)
    rig.fake.script.push(push_call(rig.work), Reply(text="done"))
    since = rpc.mark()
    started = time.perf_counter()
    rpc.prompt_and_wait("push it", timeout=60)
    case.measured(started, time.perf_counter())
    case.tries = 1
    assert REFUSED in tool_result_text(rig) and "no answer to event within 1500 ms" in tool_result_text(rig)
    assert any(REFUSED.split(" because")[0] in n or "refused" in n for n in notices(rpc, since))
    wait_until(lambda: pid not in sidecar_pids(rpc_pid(rpc)), 30, "the stopped sidecar to be replaced")
    refused_push(rig, case, "Refused after the event deadline (set to 1.5 s here); the stopped sidecar "
                            "was replaced.")


def test_an_engine_that_never_starts_refuses_the_guarded_call(rig: RouterRig, case: Case) -> None:
    case.describe("the engine never starts (its command is missing), no declarations cached", group="guard")
    rig.policy(GUARD)
    env = {**rig.env, "ROUTER_SERVE": json.dumps(["/nonexistent/router", "serve"])}
    push_once(rig, case, push_call(rig.work), env)
    assert "the policy engine did not start" in tool_result_text(rig)
    refused_push(rig, case, "Refused by the bridge's safe default (nothing declared yet): a tool call "
                            "fails closed.")


def test_a_routing_event_under_the_same_fault_goes_on_natively(rig: RouterRig, case: Case) -> None:
    case.describe("the sidecar stopped while it decides a prompt (`input`, open)", group="guard")
    rig.policy(GUARD + """\
  - id: say
    on: input
    do: [{notify: "routed"}]
""")
    rpc = timed(rig.rpc(env={**rig.env, "ROUTER_BRIDGE_TIMEOUT_MS": "1500"}))
    rpc.prompt_and_wait("hello")
    [pid] = sidecar_pids(rpc_pid(rpc))
    assert signal_descendant(rpc_pid(rpc), pid, signal.SIGSTOP)
    since = rpc.mark()
    started = time.perf_counter()
    rpc.prompt_and_wait("route me", timeout=60)
    case.measured(started, time.perf_counter())
    case.tries = 1
    assert rig.fake.chat_requests()[-1].texts("user")[-1] == "route me"  # Pi answered natively
    assert any(is_warning(r) for r in rpc.events(since)), "the user was not told"
    assert "routed" not in notices(rpc, since)
    case.outcome = "native"
    case.note("Pi answered with its own behaviour after the deadline; the user was warned once.")


def merge_key_bomb(depth: int = 200) -> str:
    """A small YAML file of chained merge keys that a parser expands without end (issue 22)."""
    lines = ["a0: &a0 {x: 1, y: 2}"]
    lines += [f"a{n}: &a{n} {{<<: [*a{n - 1}, *a{n - 1}], k{n}: {n}}}" for n in range(1, depth)]
    return "\n".join(lines) + "\nversion: 1\n"


def test_an_untrusted_bomb_in_the_project_leaves_the_users_guard_in_force(rig: RouterRig, case: Case) -> None:
    case.describe("an untrusted cloned repository whose .pi/router.yaml is 200 chained YAML merge keys",
                  group="guard")
    rig.policy(GUARD)
    (rig.work / ".pi").mkdir()
    (rig.work / ".pi" / "router.yaml").write_text(merge_key_bomb())
    push_once(rig, case, push_call(rig.work))
    assert "force pushes are not allowed" in tool_result_text(rig)  # the user's own rule decided
    refused_push(rig, case, "The user's rule blocked it: the untrusted file was never parsed.")


def test_a_trusted_project_guard_deleted_mid_session_stays_in_force(rig: RouterRig, case: Case) -> None:
    case.describe("the model deletes the trusted .pi/router.yaml that holds the guard", group="guard")
    (rig.work / ".pi").mkdir()
    (rig.work / ".pi" / "router.yaml").write_text("version: 1\n" + GUARD)
    trusted = rig.router("trust", "--yes")
    assert trusted.returncode == 0, trusted.stderr
    rpc = timed(rig.rpc())
    rig.fake.script.push(Reply(text="", tool_calls=[{"name": "bash", "arguments": {
        "command": f"rm {rig.work / '.pi' / 'router.yaml'}"}}]), Reply(text="removed"))
    since = rpc.mark()
    rpc.prompt_and_wait("remove the policy", timeout=60)
    assert not (rig.work / ".pi" / "router.yaml").exists()
    rig.fake.script.push(push_call(rig.work), Reply(text="done"))
    started = time.perf_counter()
    rpc.prompt_and_wait("push it", timeout=60)
    case.measured(started, time.perf_counter())
    case.tries = 1
    assert "force pushes are not allowed" in tool_result_text(rig)
    assert any("router.yaml" in n for n in notices(rpc, since)), notices(rpc, since)
    refused_push(rig, case, "The trusted policy stayed in force until the session ends, with a notice.")


def test_sidecar_stopped_while_a_child_signal_decides_a_tool_call(rig: RouterRig, case: Case) -> None:
    case.describe("the sidecar stopped (SIGSTOP) while a `child` signal decides a guarded tool call",
                  group="guard")
    from tests.helpers import HANGING_PI, stub

    child = stub(rig.tmp / "child-bin", HANGING_PI)
    rig.policy(f"""\
signals:
  verdict:
    child: {{prompt: "is this safe? {{tool.input.command}}", pi_bin: "{child}", timeout_ms: 2000}}
    fallback: "'unsafe'"
rules:
  - id: ask-a-child
    on: tool_call
    when: "tool.name == 'bash' and signals.verdict != 'safe'"
    do: [{{block: "the child did not say it is safe"}}]
""")
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait("hello")
    [pid] = sidecar_pids(rpc_pid(rpc))
    rig.fake.script.push(push_call(rig.work), Reply(text="done"))
    since = rpc.mark()
    started = time.perf_counter()
    assert rpc.send({"type": "prompt", "message": "push it"}).get("success")
    wait_until(lambda: (child.parent / "gpid").exists() and (child.parent / "gpid").read_text().strip(), 60,
               "the child signal to run")
    assert signal_descendant(rpc_pid(rpc), pid, signal.SIGSTOP)
    rpc.wait_record(lambda r: r.get("type") == "agent_settled", since=since, timeout=60)
    case.measured(started, time.perf_counter())
    case.tries = 1
    told = tool_result_text(rig)
    assert REFUSED in told and "the engine announced" in told, told
    refused_push(rig, case, "Refused when the child signal's announced budget (2 s + 1 s) ran out; the "
                            "stopped sidecar was replaced.")


def nested(depth: int) -> object:
    value: object = "deep"
    for _ in range(depth):
        value = {"x": value}
    return value


def test_a_tool_call_with_a_field_nested_99_deep_still_meets_the_guard(rig: RouterRig, case: Case) -> None:
    case.describe("a tool call whose arguments carry one extra field nested 99 deep", group="guard")
    rig.policy(GUARD)
    call = push_call(rig.work)
    call.tool_calls[0]["arguments"]["extra"] = nested(99)
    push_once(rig, case, call)
    assert "force pushes are not allowed" in tool_result_text(rig)  # decided, not refused
    refused_push(rig, case, "The engine cut the deep field (`$cut`) and the rule decided on the command.")


def test_a_slow_rule_before_the_guard_does_not_switch_it_off(rig: RouterRig, case: Case) -> None:
    case.describe("a slow rule before the block rule (`(a|aa)+$` on 45 `a`s of the model's command)",
                  group="guard")
    rig.policy("""\
rules:
  - id: slow
    on: tool_call
    when: "regex(tool.input.command, '(a|aa)+$')"
    continue: true
    do: [{notify: "slow rule matched"}]
""" + GUARD.removeprefix("rules:\n"))
    call = push_call(rig.work)
    call.tool_calls[0]["arguments"]["command"] += " " + "a" * 45
    push_once(rig, case, call)
    assert "force pushes are not allowed" in tool_result_text(rig)
    refused_push(rig, case, "The pattern runs in linear time (RE2); the guard after it decided.")
