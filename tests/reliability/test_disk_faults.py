"""The router's logs in trouble in a real Pi: a full disk, a read-only directory, log paths that
are directories, and eight Pi processes writing the same logs at once."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.helpers_router import RouterRig
from tests.e2e.pi_harness import run_in_group
from tests.reliability.faults import (
    Case,
    LogGuard,
    MountRefused,
    audit_file,
    audit_texts,
    fill,
    is_warning,
    line_problems,
    prompted_tools,
    read_bytes,
    remount,
    router_dir,
    standard_policy,
    timed,
    tmpfs,
    warnings_since,
)

pytestmark = pytest.mark.e2e
PAD = "x" * 1000  # each audit and log line is about 1 KB: a full page fills in a few prompts


@pytest.fixture
def router_tmpfs(rig: RouterRig) -> Iterator[Path]:
    """A 64 KiB tmpfs on ``<agent>/router`` (bridge.log, router.log, audit.jsonl); skips without mount.

    The tests close their Pi before it goes; after a failure the unmount is lazy.
    """
    try:
        with tmpfs(router_dir(rig), "64k") as directory:
            yield directory
    except MountRefused as exc:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount rights): {exc}")


def test_full_disk_keeps_whole_lines(rig: RouterRig, case: Case, router_tmpfs: Path) -> None:
    case.describe("full disk under router.log and the audit log (64 KiB tmpfs, filled up)", group="logs")
    rig.policy(standard_policy(rig))
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait(f"p0-{PAD}")
    guard = LogGuard.of(rig)
    before = guard.snapshot()
    filler = fill(router_tmpfs)

    since = rpc.mark()
    prompts = 0
    while not any("audit failed" in text for text in warnings_since(rpc, since)) and prompts < 12:
        prompts += 1
        rpc.prompt_and_wait(f"p{prompts}-{PAD}")
    case.tries = prompts
    told = warnings_since(rpc, since)
    full_state = guard.snapshot()
    filler.unlink()
    started = time.perf_counter()
    rpc.prompt_and_wait(f"freed-{PAD}")
    case.measured(started, time.perf_counter())

    assert len(rig.fake.chat_requests()) == prompts + 2  # Pi answered every prompt
    assert any("audit failed" in text for text in told), told
    problems = [f"{path.name}: {p}" for path, data in full_state.items() for p in line_problems(path, data)]
    assert not problems, problems  # no partial line while the disk was full
    guard.check(before)  # earlier lines intact
    assert audit_texts(rig)[-1] == f"freed-{PAD}"  # whole lines again once there is room
    assert prompted_tools(rig)[-1] == ["read"]
    rpc.close()
    case.outcome = "lost-nothing"
    case.note("Time: the first prompt after space was freed, to its answer.")


def test_router_dir_turns_read_only(rig: RouterRig, case: Case, router_tmpfs: Path) -> None:
    case.describe("the router dir (logs, audit) remounted read-only mid-session", group="logs")
    rig.policy(standard_policy(rig))
    rpc = timed(rig.rpc())
    rpc.prompt_and_wait("p0")
    guard = LogGuard.of(rig)
    before = guard.snapshot()

    remount(router_tmpfs, "ro")
    since = rpc.mark()
    try:
        rpc.prompt_and_wait("p1")
        rpc.prompt_and_wait("p2")
        told = warnings_since(rpc, since)
        during = guard.snapshot()
    finally:
        remount(router_tmpfs, "rw")
    started = time.perf_counter()
    rpc.prompt_and_wait("p3")
    case.measured(started, time.perf_counter())
    case.tries = 2

    assert [chat.texts("user")[-1] for chat in rig.fake.chat_requests()] == ["p0", "p1", "p2", "p3"]
    assert prompted_tools(rig) == [["read"]] * 4  # the policy kept applying
    assert any("audit failed" in text and "Read-only" in text for text in told), told
    assert during == before  # nothing written, nothing lost
    assert audit_texts(rig) == ["p0", "p3"]
    guard.check(before)
    rpc.close()
    case.outcome = "lost-nothing"
    case.note("Time: the first prompt after the remount read-write, to its answer.")
    case.note(told_summary(told))


def test_log_paths_are_directories(rig: RouterRig, case: Case) -> None:
    case.describe("router.log, bridge.log and the audit log are directories", group="logs")
    for path in (router_dir(rig) / "router.log", router_dir(rig) / "bridge.log", audit_file(rig)):
        path.mkdir(parents=True)
    rig.policy(standard_policy(rig))
    rpc = timed(rig.rpc())
    since = rpc.mark()
    rpc.prompt_and_wait("p0")
    rpc.prompt_and_wait("p1")
    case.tries = 2
    told = warnings_since(rpc, since)

    assert [chat.texts("user")[-1] for chat in rig.fake.chat_requests()] == ["p0", "p1"]
    assert prompted_tools(rig) == [["read"], ["read"]]
    assert any("audit failed" in text and "directory" in text for text in told), told
    case.outcome = "held"
    case.note(told_summary(told))


@pytest.mark.parametrize("how", ["read-only", "a directory"])
def test_router_log_failure_is_told(rig: RouterRig, case: Case, how: str) -> None:
    case.describe(f"router.log is {how}: the user is told", group="logs")
    rig.policy(standard_policy(rig))
    log = router_dir(rig) / "router.log"
    with contextlib.ExitStack() as stack:
        if how == "a directory":
            log.mkdir(parents=True)
        else:
            try:
                stack.enter_context(tmpfs(router_dir(rig), "64k"))
            except MountRefused as exc:
                pytest.skip(f"cannot mount a tmpfs here (needs root and mount rights): {exc}")
        rpc = timed(rig.rpc())
        since, started = rpc.mark(), time.perf_counter()  # a directory fails from the first line on
        rpc.prompt_and_wait("p0")
        if how == "read-only":
            remount(router_dir(rig), "ro")
            since, started = rpc.mark(), time.perf_counter()
        rpc.prompt_and_wait("p1")
        told = [r for r in rpc.events(since) if is_warning(r) and "router.log" in str(r.get("message"))]
        if told:
            case.measured(started, told[0]["_t"])
        rpc.close()
    case.tries = 1

    assert [chat.texts("user")[-1] for chat in rig.fake.chat_requests()] == ["p0", "p1"]
    assert told, warnings_since(rpc, since)
    case.outcome = "held"
    case.note(told_summary([str(r["message"]) for r in told]))


def told_summary(told: list[str]) -> str:
    """What the user was told, each distinct warning once, shortened."""
    distinct = list(dict.fromkeys(re.sub(r"/\S+/", "…/", text) for text in told))
    return "Told: " + "; ".join(f"“{text[:90]}”" for text in distinct) + "."


# -- concurrent writers ------------------------------------------------------------------------------

PROCESSES = 8
AUDITS_PER_INPUT = 4
LOGS_PER_INPUT = 2
EVENTS = ("turn_start", "turn_end", "agent_settled")


def concurrent_policy(rig: RouterRig) -> str:
    audits = "\n".join(
        f'      - audit: {{file: "{audit_file(rig)}", record: {{proc: "{{text}}", k: {k}, pad: "{PAD}"}}}}'
        for k in range(AUDITS_PER_INPUT))
    logs = "\n".join(f'      - log: "proc={{text}} k={k} {PAD}"' for k in range(LOGS_PER_INPUT))
    return f"""rules:
  - id: on-input
    on: input
    do:
      - set: {{me: "{{text}}"}}
{audits}
{logs}
  - id: on-turn
    on: [{", ".join(EVENTS)}]
    do:
      - audit: {{file: "{audit_file(rig)}", record: {{proc: "{{state.me}}", k: "{{type}}", pad: "{PAD}"}}}}
      - log: "proc={{state.me}} k={{type}} {PAD}"
"""


def test_eight_pi_processes_share_the_logs(rig: RouterRig, case: Case) -> None:
    case.describe(f"{PROCESSES} Pi processes (print mode) logging to one agent dir at once", group="logs")
    rig.policy(concurrent_policy(rig))
    names = [f"proc-{i}" for i in range(PROCESSES)]
    argv = rig.install.command("-p", *rig.args([], bridge=True, session=False))
    started = time.perf_counter()
    with ThreadPoolExecutor(PROCESSES) as pool:
        runs = list(pool.map(lambda name: run_in_group([*argv, name], rig.work, rig.env, 120), names))
    case.measured(started, time.perf_counter())
    case.tries = PROCESSES

    for run in runs:
        assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
        assert "[router]" not in run.stderr, run.stderr  # nothing went wrong, so nothing to tell
    assert len(rig.fake.chat_requests()) == PROCESSES
    audit = read_bytes(audit_file(rig))
    log = read_bytes(router_dir(rig) / "router.log")
    assert not line_problems(audit_file(rig), audit)
    assert not line_problems(router_dir(rig) / "router.log", log)
    keys = [str(k) for k in range(AUDITS_PER_INPUT)] + list(EVENTS)
    records = [json.loads(line) for line in audit.splitlines()]
    assert all(r["pad"] == PAD for r in records)  # no line was torn or mixed with another
    assert Counter((r["proc"], str(r["k"])) for r in records) == Counter(
        (name, key) for name in names for key in keys)
    log_keys = [str(k) for k in range(LOGS_PER_INPUT)] + list(EVENTS)
    logged = Counter(line.split(" k=")[0].split("proc=")[-1] + "/" + line.split(" k=")[1].split()[0]
                     for line in log.decode().splitlines())
    assert logged == Counter(f"{name}/{key}" for name in names for key in log_keys)
    case.outcome = "lost-nothing"
    case.note(f"{len(records)} audit lines and {sum(logged.values())} router.log lines, each whole; "
              "time: the wall time of all eight runs.")
