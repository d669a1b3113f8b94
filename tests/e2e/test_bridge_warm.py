"""The warm sidecar inside real `pi -p` runs: the run after the first is served by a forked
sidecar with that run's own environment and policy; a stale or foreign socket is never used.

Each test gets a warm directory of its own (short: a socket path is at most 107 bytes) and stops
the warm server it caused.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig, process_state, wait_until

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

POLICY = """
env: [ROUTER_TEST_MODEL]
rules:
  - id: by-env
    on: input
    do: [{model: "fake/{env.ROUTER_TEST_MODEL}"}]
"""
FORKED = "forked by the warm sidecar"


@pytest.fixture
def warm_dir(rig: RouterRig) -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="rw-"))
    rig.env = {**rig.env, "ROUTER_WARM": "1", "ROUTER_WARM_DIR": str(directory)}
    try:
        yield directory
    finally:
        stop_warm_servers(directory)
        shutil.rmtree(directory, ignore_errors=True)


def stop_warm_servers(directory: Path) -> None:
    """SIGTERM every warm server whose lock file in `directory` names it; wait until it is gone."""
    for lock in directory.glob("*.lock"):
        text = lock.read_text().strip()
        if not text.isdigit():
            continue
        pid = int(text)
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        wait_until(lambda pid=pid: process_state(pid) in (None, "Z"), 30, f"warm server {pid} to stop")


def run(rig: RouterRig, model: str) -> str:
    """One `pi -p` with ROUTER_TEST_MODEL=`model`; the model the provider was asked for."""
    rig.fake.script.push(Reply(text="ok"))
    done = rig.print("hello", env={**rig.env, "ROUTER_TEST_MODEL": model})
    assert done.returncode == 0, done.stderr
    return rig.fake.chat_requests()[-1].model


def the_socket(directory: Path) -> Path:
    return wait_until(lambda: next(directory.glob("*.sock"), None), 60, "the warm server's socket")


def test_the_next_run_is_forked_warm_with_its_own_environment_and_policy(rig: RouterRig,
                                                                        warm_dir: Path) -> None:
    rig.policy(POLICY)
    assert run(rig, "fake-local") == "fake-local"  # spawned as before; it starts the warm server
    assert FORKED not in rig.log("router.log")
    the_socket(warm_dir)
    assert run(rig, "fake-cloud") == "fake-cloud"  # forked: this run's environment, not the first's
    assert rig.log("router.log").count(FORKED) == 1
    rig.policy(POLICY.replace("fake/{env.ROUTER_TEST_MODEL}", "fake/fake-local"))
    assert run(rig, "fake-cloud") == "fake-local"  # the policy as it is now
    assert rig.log("router.log").count(FORKED) == 2
    records = (rig.agent / "router" / "log" / "decisions.jsonl").read_text().splitlines()
    assert len([line for line in records if '"event":"input"' in line]) == 3


def test_a_socket_nobody_listens_on_is_replaced_and_the_run_goes_on(rig: RouterRig,
                                                                    warm_dir: Path) -> None:
    rig.policy(POLICY)
    assert run(rig, "fake-local") == "fake-local"
    path = the_socket(warm_dir)
    stop_warm_servers(warm_dir)
    # a server stopped while it was still settling may leave its socket file: nobody serves it
    # either way (every server is gone), and this test wants exactly such a file, made afresh
    path.unlink(missing_ok=True)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))  # a socket file with no server behind it
    dead.close()
    assert run(rig, "fake-cloud") == "fake-cloud"
    assert "the warm sidecar did not serve this run" in rig.log()
    wait_until(lambda: path.exists() and (warm_dir / f"{path.name}.lock").read_text().strip(), 60,
               "a new warm server")
    assert run(rig, "fake-local") == "fake-local"
    assert rig.log("router.log").count(FORKED) == 1


def test_a_stopped_warm_server_costs_one_short_wait_and_is_replaced(rig: RouterRig, warm_dir: Path) -> None:
    """SIGSTOP of the warm server: the kernel still accepts, nothing answers. The run falls back
    to a spawned sidecar after the warm start's own short wait (the policy applies), the stopped
    server is ended, and a new one serves the run after."""
    rig.policy(POLICY)
    assert run(rig, "fake-local") == "fake-local"  # starts the warm server
    path = the_socket(warm_dir)
    lock = warm_dir / f"{path.name}.lock"
    stopped = int(wait_until(lambda: lock.read_text().strip(), 60, "the warm server's pid"))
    os.kill(stopped, signal.SIGSTOP)
    try:
        assert run(rig, "fake-cloud") == "fake-cloud"  # the policy applied: no outage
        assert "the warm server is stopped or wedged and was ended" in rig.log()
        assert "did not start" not in rig.log()
        wait_until(lambda: process_state(stopped) in (None, "Z"), 30, "the stopped server to be ended")
        wait_until(lambda: lock.exists() and lock.read_text().strip() not in ("", str(stopped)), 60,
                   "a new warm server")
        assert run(rig, "fake-local") == "fake-local"
        assert rig.log("router.log").count(FORKED) == 1  # the new server forked this one
    finally:
        if process_state(stopped) not in (None, "Z"):
            os.kill(stopped, signal.SIGKILL)


def test_a_directory_others_can_enter_is_never_used(rig: RouterRig, warm_dir: Path) -> None:
    rig.policy(POLICY)
    warm_dir.chmod(0o755)
    for model in ("fake-local", "fake-cloud"):
        assert run(rig, model) == model
    assert FORKED not in rig.log("router.log")
    assert not list(warm_dir.glob("*.sock")) and not list(warm_dir.glob("*.lock"))  # none started
    assert "is not a private directory of yours (mode 0700): no warm sidecar" in rig.log()


def forked_pids(rig: RouterRig) -> list[int]:
    """The forked sidecars router.log names, in order."""
    found = re.findall(r"sidecar (\d+) forked by the warm sidecar", rig.log("router.log"))
    return [int(pid) for pid in found]


def test_a_forked_sidecar_killed_mid_session_is_replaced(rig: RouterRig, warm_dir: Path) -> None:
    rig.policy(POLICY)
    assert run(rig, "fake-local") == "fake-local"  # starts the warm server
    the_socket(warm_dir)
    rpc = rig.rpc(env={**rig.env, "ROUTER_TEST_MODEL": "fake-cloud"})
    rig.fake.script.push(Reply(text="one"))
    rpc.prompt_and_wait("one")
    [first] = forked_pids(rig)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: process_state(first) in (None, "Z"), 30, "the forked sidecar to die")
    rig.fake.script.push(Reply(text="two"), Reply(text="three"))
    rpc.prompt_and_wait("two")  # the bridge notices the closed connection and starts another
    rpc.prompt_and_wait("three")
    assert [chat.model for chat in rig.fake.chat_requests()][-3:] == ["fake-cloud"] * 3
    assert "sidecar connection ended (warm sidecar" in rig.log()
    assert len(forked_pids(rig)) == 2  # the replacement was forked warm too
    rpc.close()


def test_a_session_outlives_its_warm_server(rig: RouterRig, warm_dir: Path) -> None:
    rig.policy(POLICY)
    assert run(rig, "fake-local") == "fake-local"
    the_socket(warm_dir)
    rpc = rig.rpc(env={**rig.env, "ROUTER_TEST_MODEL": "fake-cloud"})
    rig.fake.script.push(Reply(text="one"), Reply(text="two"))
    rpc.prompt_and_wait("one")
    stop_warm_servers(warm_dir)  # the server ends (idle, upgraded, stopped): its sidecars go on
    assert not list(warm_dir.glob("*.sock"))
    rpc.prompt_and_wait("two")
    assert [chat.model for chat in rig.fake.chat_requests()][-2:] == ["fake-cloud"] * 2
    assert len(forked_pids(rig)) == 1 and "sidecar connection ended" not in rig.log()
    rpc.close()
    assert run(rig, "fake-local") == "fake-local"  # no server: spawned, and it starts a new one
    the_socket(warm_dir)
