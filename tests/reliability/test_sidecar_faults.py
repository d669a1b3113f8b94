"""A real Pi 1.6.0 with the bridge whose sidecar is killed, stopped, or replaced by one that prints
garbage: Pi keeps answering, the user is told, nothing logged is lost, the recovery is measured."""

from __future__ import annotations

import contextlib
import functools
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.helpers_router import (
    RouterRig,
    notices,
    process_state,
    rpc_pid,
    sidecar_pids,
    wait_until,
)
from tests.reliability.fake_sidecar import UTF8_WARNING
from tests.reliability.faults import (
    Case,
    LogGuard,
    audit_texts,
    fake_sidecar_env,
    is_back,
    is_warning,
    kill_if_ours,
    peak_rss_kib,
    processes_naming,
    prompted_tools,
    signal_descendant,
    standard_policy,
    timed,
)

pytestmark = pytest.mark.e2e
TRIES = 3
LEAK = ("bridge bug (reported): a replaced sidecar is killed by a 1 s timer that never fires when Pi "
        "exits first, so a hung one outlives Pi")


def test_sidecar_killed_mid_session(rig: RouterRig, case: Case) -> None:
    case.describe("killed (SIGKILL) between prompts", group="sidecar")
    rig.policy(standard_policy(rig))
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait("p0")
    guard = LogGuard.of(rig)

    for n in range(TRIES):
        before = guard.snapshot()
        [pid] = sidecar_pids(rpc_pid(rpc))
        since = rpc.mark()
        started = time.perf_counter()
        assert signal_descendant(rpc_pid(rpc), pid, signal.SIGKILL)
        told = rpc.wait_record(is_warning, since=since)
        back = rpc.wait_record(is_back, since=since)
        case.measured(started, back["_t"])
        rpc.prompt_and_wait(f"after-{n}")
        case.tries += 1

        assert "sidecar exited" in told["message"]
        assert prompted_tools(rig)[-1] == ["read"]  # the policy applies again
        guard.check(before)
    assert audit_texts(rig) == ["p0", *(f"after-{n}" for n in range(TRIES))]
    case.outcome = "recovered"


def gone(pi: int, pid: int) -> bool:
    """``pid`` is no longer a live sidecar of Pi ``pi``."""
    return pid not in sidecar_pids(pi)


@pytest.mark.parametrize("then", ["SIGCONT", "SIGKILL"])
def test_sidecar_stopped(rig: RouterRig, case: Case, then: str) -> None:
    case.describe(f"stopped (SIGSTOP) while idle, then {then}; the next prompt finds it hung",
                  group="sidecar")
    rig.policy(standard_policy(rig))
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait("p0")
    pi = rpc_pid(rpc)
    guard = LogGuard.of(rig)

    for n in range(TRIES):
        before = guard.snapshot()
        [pid] = sidecar_pids(pi)
        since = rpc.mark()
        started = time.perf_counter()
        signal_descendant(pi, pid, signal.SIGSTOP)
        try:
            rpc.prompt_and_wait(f"hung-{n}", timeout=30)  # answered without the policy
            told = rpc.wait_record(is_warning, since=since)
        finally:
            signal_descendant(pi, pid, signal.SIGCONT if then == "SIGCONT" else signal.SIGKILL)
        back = rpc.wait_record(is_back, since=since)
        case.measured(started, back["_t"])
        rpc.prompt_and_wait(f"after-{n}")
        case.tries += 1

        assert "no answer" in told["message"]
        assert rig.fake.chat_requests()[-2].texts("user")[-1] == f"hung-{n}"
        assert prompted_tools(rig)[-1] == ["read"]
        wait_until(functools.partial(gone, pi, pid), 10, "the hung sidecar to go")
        assert len(sidecar_pids(pi)) == 1
        guard.check(before)
    assert sum("no answer" in text for text in notices(rpc)) == TRIES  # once per outage
    case.outcome = "recovered"
    case.note("Includes the 1.5 s event deadline: a hang is found by the next event.")


def test_pi_exits_right_after_finding_a_hung_sidecar(rig: RouterRig, case: Case) -> None:
    case.describe("stopped (SIGSTOP), then Pi exits right after the prompt that found it hung",
                  group="sidecar")
    rig.policy(standard_policy(rig))
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait("p0")
    pi = rpc_pid(rpc)
    [pid] = sidecar_pids(pi)
    signal_descendant(pi, pid, signal.SIGSTOP)
    rpc.prompt_and_wait("hung", timeout=30)
    started = time.perf_counter()
    code = rpc.close()
    case.measured(started, time.perf_counter())
    case.tries = 1

    assert code == 0
    assert rig.fake.chat_requests()[-1].texts("user")[-1] == "hung"
    with contextlib.suppress(AssertionError):  # a sidecar still starting exits on its own
        wait_until(lambda: not processes_naming(str(rig.agent)), 5, "the sidecars to exit")
    left = processes_naming(str(rig.agent))
    assert not left, f"{len(left)} sidecar(s) outlived Pi (states {[process_state(p) for p in left]})"
    case.outcome = "held"
    case.note("Time: Pi's orderly exit.")


FAKE_PI = """\
#!{python}
import os, time
with open({marker!r} + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.replace({marker!r} + ".tmp", {marker!r})
time.sleep(20)
"""


def fake_child_pi(directory: Path) -> tuple[Path, Path]:
    """A stand-in ``pi`` binary for a ``child`` signal that writes its pid and then hangs 20 s."""
    directory.mkdir(parents=True, exist_ok=True)
    binary, marker = directory / "pi", directory / "child.pid"
    binary.write_text(FAKE_PI.format(python=sys.executable, marker=str(marker)))
    binary.chmod(0o755)
    return binary, marker


def test_sidecar_stopped_while_a_signal_runs(rig: RouterRig, case: Case) -> None:
    case.describe("stopped (SIGSTOP) while a `child` signal with a 3 s budget runs", group="sidecar")
    binary, marker = fake_child_pi(rig.tmp / "child-bin")
    signals = f"""
        slow:
          child: {{prompt: "think", pi_bin: "{binary}", timeout_ms: 3000}}
          fallback: "'fallback'"
    """
    slow_rule = """
        - id: slow-signal
          on: input
          when: "text == 'SLOW' and signals.slow != null"
          continue: true
          do: [{notify: "slow={signals.slow}"}]
    """
    rig.policy(standard_policy(rig, slow_rule, signals=signals))
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait("p0")
    pi = rpc_pid(rpc)
    guard = LogGuard.of(rig)
    before = guard.snapshot()
    [pid] = sidecar_pids(pi)
    since = rpc.mark()
    errors: list[BaseException] = []

    def prompt() -> None:
        try:
            rpc.prompt_and_wait("SLOW", timeout=30)
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=prompt)
    prompted = time.perf_counter()
    runner.start()
    child = 0
    try:
        wait_until(marker.is_file, 20, "the child signal to start")
        child = int(marker.read_text())
        started = time.perf_counter()
        signal_descendant(pi, pid, signal.SIGSTOP)
        runner.join(40)
        settled = time.perf_counter()
        told = rpc.wait_record(is_warning, since=since)
        back = rpc.wait_record(is_back, since=since)
    finally:
        signal_descendant(pi, pid, signal.SIGKILL)
        runner.join(40)
        if child:
            kill_if_ours(child, str(binary))
    case.measured(started, back["_t"])
    case.tries = 1
    rpc.prompt_and_wait("after")

    assert not errors, errors
    assert rig.fake.chat_requests()[-2].texts("user")[-1] == "SLOW"  # the prompt was answered
    assert "signal budget of 4000 ms" in told["message"] or "4000 ms" in rig.log()
    assert prompted_tools(rig)[-1] == ["read"]
    guard.check(before)
    case.outcome = "recovered"
    case.note(f"The prompt settled {round((settled - prompted) * 1000)} ms after it was sent "
              "(child budget 3 s + 1 s).")


# -- a sidecar that speaks garbage --------------------------------------------------------------


def test_sidecar_prints_a_line_that_is_not_json(rig: RouterRig, case: Case) -> None:
    case.describe("answers an event with a line that is not JSON", group="sidecar")
    rpc = timed(rig.rpc(env=fake_sidecar_env(rig, "garbage")))
    rpc.prompt_and_wait("p0")
    assert prompted_tools(rig)[-1] == ["read"]  # the fake engine's answer applies

    for n in range(TRIES):
        since = rpc.mark()
        started = time.perf_counter()
        rpc.prompt_and_wait(f"FAULT-{n}")
        told = rpc.wait_record(is_warning, since=since)
        back = rpc.wait_record(is_back, since=since)
        case.measured(started, back["_t"])
        rpc.prompt_and_wait(f"after-{n}")
        case.tries += 1

        assert "not JSON" in told["message"]
        assert rig.fake.chat_requests()[-2].texts("user")[-1] == f"FAULT-{n}"
        assert prompted_tools(rig)[-1] == ["read"]
    assert "not JSON" in rig.log()
    case.outcome = "recovered"


def test_sidecar_prints_a_huge_line_without_newline(rig: RouterRig, case: Case) -> None:
    case.describe("answers an event with 72 MiB and no newline", group="sidecar")
    rpc = timed(rig.rpc(env=fake_sidecar_env(rig, "huge")))
    rpc.prompt_and_wait("p0")
    pi = rpc_pid(rpc)
    rss_before = peak_rss_kib(pi) or 0

    for n in range(2):
        since = rpc.mark()
        started = time.perf_counter()
        rpc.prompt_and_wait(f"FAULT-{n}", timeout=60)
        told = rpc.wait_record(is_warning, since=since)
        back = rpc.wait_record(is_back, since=since, timeout=60)
        case.measured(started, back["_t"])
        rpc.prompt_and_wait(f"after-{n}")
        case.tries += 1

        assert told["message"]
        assert rig.fake.chat_requests()[-2].texts("user")[-1] == f"FAULT-{n}"
        assert prompted_tools(rig)[-1] == ["read"]
    growth = ((peak_rss_kib(pi) or 0) - rss_before) // 1024
    case.outcome = "recovered"
    case.note(f"Pi's peak resident memory grew by {growth} MiB.")


def test_sidecar_splits_utf8_across_writes(rig: RouterRig, case: Case) -> None:
    case.describe("splits a UTF-8 character across two writes", group="sidecar")
    rpc = timed(rig.rpc(env=fake_sidecar_env(rig, "utf8")))
    rpc.prompt_and_wait("p0")
    case.tries = 1

    texts = notices(rpc)
    assert prompted_tools(rig)[-1] == ["read"]  # held: the engine answered
    assert f"router: {UTF8_WARNING}" in texts, texts
    case.outcome = "held"


def test_sidecar_never_answers_hello(rig: RouterRig, case: Case) -> None:
    case.describe("never answers `hello` (print mode)", group="sidecar")
    case.tries = 1
    started = time.perf_counter()
    env = {**fake_sidecar_env(rig, "silent"), "ROUTER_BRIDGE_HELLO_TIMEOUT_MS": "2000"}  # the product's
    done = rig.print("hello", env=env, timeout=90)
    case.measured(started, time.perf_counter())

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert len(rig.fake.chat_requests()) == 1
    assert "did not start" in done.stderr  # told, on stderr in print mode
    waits = [int(ms) for ms in re.findall(r"no answer to hello within (\d+) ms", rig.log())]
    case.note(f"The bridge gave up on hello after {waits} ms; the whole run took the time shown.")
    assert waits and max(waits) <= 3000, waits  # the bridge's own bound, not a measured time
    case.outcome = "held"
