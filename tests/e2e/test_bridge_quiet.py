"""The bridge adds nothing to what Pi prints, and a second installed copy stays inert.

Pi 1.6 emits `project_trust` to the global and CLI extensions when a project's `.pi/` holds
something it gates (`settings.json`, `extensions/`, …) and no decision is saved; the bridge must
answer it even when no rule decides. With the bridge installed for the user and for the project,
both copies load into one Pi process: only the first one loaded may run.
"""

from __future__ import annotations

import pytest

from tests.e2e import helpers_router
from tests.e2e.helpers_router import RouterRig

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

UNDECIDED_TRUST = """
rules:
  - id: trust-only-elsewhere
    on: project_trust
    match: "cwd == '/nowhere'"
    do:
      - trust: {trusted: "yes"}
"""


@pytest.mark.parametrize("policy", [None, UNDECIDED_TRUST], ids=["default-pack", "undecided-rule"])
def test_bridge_adds_nothing_to_stderr_in_a_gated_project(rig: RouterRig, policy: str | None) -> None:
    (rig.work / ".pi").mkdir()
    (rig.work / ".pi" / "settings.json").write_text("{}\n")
    if policy is not None:
        rig.policy(policy)

    without = rig.print("hello", bridge=False)
    with_bridge = rig.print("hello")

    assert without.returncode == 0, without.stderr
    assert with_bridge.returncode == 0, with_bridge.stderr
    assert with_bridge.stderr == without.stderr
    assert "project_trust" not in rig.log()


GREETING = """
commands:
  - {name: router-hello, description: "Say hello"}
tools:
  - {name: router_echo, description: "Echo a text"}
rules:
  - id: greet
    on: input
    do:
      - notify: "greeting from the router"
"""


def install_twice(rig: RouterRig) -> None:
    """`router install` for the user and `router install --project` in the work dir."""
    for args in (("install",), ("install", "--project")):
        done = rig.router(*args)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("trust", ["approve", "saved"])
def test_user_and_project_install_run_one_bridge(rig: RouterRig, trust: str) -> None:
    """Under --approve Pi loads the project copy first; with a saved decision it loads the user's
    copy first (to ask it about trust) and the project's after: either way one copy runs."""
    install_twice(rig)
    rig.policy(GREETING)
    args = ["hello"]
    if trust == "approve":
        args.insert(0, "--approve")
    else:
        (rig.agent / "trust.json").write_text(f'{{"{rig.work.resolve()}": true}}\n')

    done = rig.print(*args, bridge=False)

    assert done.returncode == 0, done.stderr
    assert done.stderr.count("[router] greeting from the router") == 1, done.stderr
    assert "conflicts" not in done.stderr, done.stderr
    [request] = rig.fake.chat_requests()
    assert request.tools.count("router_echo") == 1
    [second] = [line for line in rig.log().splitlines() if "second copy" in line]
    runs = rig.work / ".pi" if trust == "approve" else rig.agent
    assert f"the one in {runs / 'extensions' / 'pi-policy-router'} runs" in second


def test_user_and_project_install_notify_once_over_rpc(rig: RouterRig) -> None:
    """Once per prompt, also after a new session: Pi loads the extensions again and the copy
    that ran before has gone stale, so the first copy of the new load owns the process."""
    install_twice(rig)
    rig.policy(GREETING)
    rpc = rig.rpc("--approve", bridge=False)

    rpc.prompt_and_wait("hello")
    first = helpers_router.notices(rpc)
    commands = [c["name"] for c in rpc.command("get_commands")["commands"]]
    since = rpc.mark()
    rpc.command("new_session")
    rpc.prompt_and_wait("hello again")

    assert first.count("greeting from the router") == 1
    assert commands.count("router-hello") == 1
    assert helpers_router.notices(rpc, since).count("greeting from the router") == 1
    assert [c["name"] for c in rpc.command("get_commands")["commands"]].count("router-hello") == 1


@pytest.mark.parametrize("trust", ["approve", "saved"])
def test_user_and_project_install_with_the_decision_pack_start_every_run(rig: RouterRig, trust: str) -> None:
    """The normal case of a developer opening a team repository: the user's own install with
    `use: [decision]` (it patches Pi's dialogs) and the repository's committed install. From the
    second run on the declarations come from the cache; every run's engine must start."""
    install_twice(rig)
    rig.policy("use: [decision]\n" + GREETING)
    args = ["hello"]
    if trust == "approve":
        args.insert(0, "--approve")
    else:
        (rig.agent / "trust.json").write_text(f'{{"{rig.work.resolve()}": true}}\n')
    for run in range(3):
        done = rig.print(*args, bridge=False)
        assert done.returncode == 0, done.stderr
        assert "did not start" not in done.stderr, (run, done.stderr)
        assert done.stderr.count("[router] greeting from the router") == 1, (run, done.stderr)
