"""Hostile input and faults with a real Pi: a parser-crashing policy edit, a sidecar that never says
hello, a long non-ASCII answer, a sidecar stopped while a signal runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import (
    ONLY_READ,
    RouterRig,
    descendants,
    is_notify,
    kill_descendant,
    notices,
    router_env,
    rpc_pid,
    sidecar_pids,
    wait_until,
)

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

# 100,000 levels of flow nesting: the YAML C composer recurses once per level and crashes the process
PARSER_CRASH = "version: 1\nrules: " + "[" * 100_000 + "]" * 100_000 + "\n"


def test_policy_replaced_by_a_parser_crashing_file_keeps_the_last_good_policy(rig: RouterRig) -> None:
    rig.policy(ONLY_READ)
    rig.fake.script.push(Reply(text="first"), Reply(text="second"), Reply(text="third"))
    rpc = rig.rpc()
    rpc.prompt_and_wait("one")
    pi = rpc_pid(rpc)
    [sidecar] = sidecar_pids(pi)

    since = rpc.mark()
    rig.policy_path.write_text(PARSER_CRASH, encoding="utf-8")
    rpc.prompt_and_wait("two")
    failure = rpc.wait_record(is_notify("policy reload failed"), since=since)
    rpc.prompt_and_wait("three")

    assert rpc.command("get_last_assistant_text") == {"text": "third"}
    one, two, three = rig.fake.chat_requests()
    assert one.tools == two.tools == three.tools == ["read"]  # the last good policy still routes
    assert "YAML nesting is deeper than 64 levels [RT101]" in failure["message"]
    assert failure["message"].endswith("keeping the last good policy")
    assert sum("policy reload failed" in n for n in notices(rpc)) == 1, notices(rpc)  # told once
    assert sidecar_pids(pi) == [sidecar]  # the same sidecar: nothing crashed, nothing restarted
    assert not [n for n in notices(rpc) if "offline" in n or "sidecar exited" in n]


def test_a_sidecar_that_never_says_hello_fails_open_at_once(rig: RouterRig, tmp_path: Path) -> None:
    silent = tmp_path / "silent_sidecar.py"
    silent.write_text("import sys, time\nsys.stdin.read()\ntime.sleep(60)\n")  # reads, never answers
    env = router_env(rig.agent, rig.install)
    env["ROUTER_SERVE"] = json.dumps([sys.executable, str(silent)])
    env["ROUTER_BRIDGE_HELLO_TIMEOUT_MS"] = "2000"  # the product's own deadline, under test here
    rig.policy(ONLY_READ)
    rig.fake.script.push(Reply(text="answered anyway"))
    rpc = rig.rpc(env=env)

    rpc.prompt_and_wait("hello")

    assert rpc.command("get_last_assistant_text") == {"text": "answered anyway"}
    started = [n for n in notices(rpc) if "did not start" in n]
    assert started == ["router: the policy engine did not start (no answer to hello within 2000 ms); "
                       "Pi continues without it"]
    # the wait at startup was the only one: session_start reported its reason instead of waiting again
    log = rig.log().splitlines()
    assert [line.split(" ", 1)[1] for line in log if "hello" in line] == [
        "router: could not load the policy declarations at startup: no answer to hello within 2000 ms",
        "router: the policy engine did not start (no answer to hello within 2000 ms); "
        "Pi continues without it",
    ]
    assert rig.fake.chat_requests()[0].tools != ["read"]  # no policy: Pi's own behaviour


def test_a_long_non_ascii_answer_arrives_intact(rig: RouterRig) -> None:
    text = "é" * 40_000 + "漢字" * 10_000 + "😀" * 5_000 + " end"  # about 160 KB of UTF-8 in one line
    rig.policy(f"""
        vars:
          long: "{text}"
        rules:
          - id: long
            on: input
            do:
              - notify: "{{vars.long}}"
    """)
    rpc = rig.rpc()
    rpc.prompt_and_wait("hi")
    [message] = [n for n in notices(rpc) if n.endswith(" end")]
    assert message == text
    assert "\ufffd" not in message


def test_a_sidecar_stopped_while_a_signal_runs_is_waited_for_the_signals_budget_only(
        rig: RouterRig, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "child-started"
    child = bin_dir / "pi"  # a child "pi" that takes its time
    child.write_text(f"#!/bin/sh\necho $$ > {started}\nexec sleep 30\n")
    child.chmod(0o755)
    rig.policy(f"""
        signals:
          slow: {{child: {{prompt: "x", pi_bin: "{child}", timeout_ms: 2000}}, fallback: "'none'"}}
        rules:
          - id: ask
            on: input
            do:
              - notify: "child said {{signals.slow}}"
    """)
    rig.fake.script.push(Reply(text="first"), Reply(text="after the stop"))
    rpc = rig.rpc()
    pi = rpc_pid(rpc)
    wait_until(lambda: len(sidecar_pids(pi)) == 1, 30, "the sidecar to start")
    [sidecar] = sidecar_pids(pi)
    since = rpc.mark()
    prompt = threading.Thread(target=rpc.prompt_and_wait, args=("one",), kwargs={"timeout": 60})
    prompt.start()
    try:
        wait_until(lambda: started.exists() and started.read_text().strip() != "", 30,
                   "the signal's child process to start")
        os.kill(sidecar, signal.SIGSTOP)  # the engine is inside the signal: it will not answer
        prompt.join(60)
        assert not prompt.is_alive()
        warning = rpc.wait_record(is_notify("no answer"), since=since)
        wait_until(lambda: sidecar not in descendants(pi), 10, "the stopped sidecar to be killed and reaped")
    finally:
        kill_descendant(pi, sidecar)
        if started.exists() and started.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(started.read_text()), signal.SIGKILL)

    # the signal announced 2000 ms + 1000 ms: that, not a hang, is how long the prompt waited
    assert "no answer within the budget of 3000 ms the engine announced" in warning["message"]
    assert "event input failed: no answer within the budget of 3000 ms the engine announced" in rig.log()
    assert rpc.command("get_last_assistant_text") == {"text": "first"}
    rpc.prompt_and_wait("two")
    assert rpc.command("get_last_assistant_text") == {"text": "after the stop"}
