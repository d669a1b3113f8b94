"""The project layer `.pi/router.yaml` applies only once the project is trusted."""

from __future__ import annotations

import json

import pytest

from tests.e2e import helpers_router
from tests.e2e.helpers_router import BUILTIN, RouterRig, write_policy

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

PROJECT = """
rules:
  - id: project-read-only
    on: input
    do:
      - tools: {only: [read]}
"""

USER_TRUSTS = """
rules:
  - id: trust-this-project
    on: project_trust
    do:
      - trust: {trusted: "yes"}
"""


def project_policy(rig: RouterRig) -> None:
    write_policy(rig.work / ".pi" / "router.yaml", PROJECT)


def test_untrusted_project_policy_is_ignored_and_user_told(rig: RouterRig) -> None:
    """Pi calls a folder whose .pi/ holds only router.yaml trusted (it gates nothing there);
    the bridge must not take that as consent."""
    project_policy(rig)
    rig.policy("rules: []\n")

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    assert set(rig.fake.chat_requests()[0].tools) >= BUILTIN
    assert done.stderr.count("is not loaded because the project is not trusted") == 1, done.stderr


def test_untrusted_project_policy_rpc_notify(rig: RouterRig) -> None:
    project_policy(rig)
    rpc = rig.rpc()

    rpc.prompt_and_wait("hello")

    assert set(rig.fake.chat_requests()[0].tools) >= BUILTIN
    assert [r for r in helpers_router.notices(rpc) if "not trusted" in r]


def test_project_policy_applies_with_approve(rig: RouterRig) -> None:
    project_policy(rig)

    done = rig.print("--approve", "hello")

    assert done.returncode == 0, done.stderr
    assert rig.fake.chat_requests()[0].tools == ["read"]
    assert "not trusted" not in done.stderr


@pytest.mark.parametrize("gated", [False, True], ids=["router-only", "gated"])
def test_project_trust_rule_trusts_the_project(rig: RouterRig, gated: bool) -> None:
    """Router-only .pi/: the bridge asks the policy itself. With a file Pi gates (.pi/settings.json),
    Pi emits project_trust and the rule answers Pi."""
    project_policy(rig)
    if gated:
        (rig.work / ".pi" / "settings.json").write_text("{}\n")
    rig.policy(USER_TRUSTS)

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    assert rig.fake.chat_requests()[0].tools == ["read"]


def test_gated_project_without_decision_is_skipped(rig: RouterRig) -> None:
    project_policy(rig)
    (rig.work / ".pi" / "settings.json").write_text("{}\n")

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    assert set(rig.fake.chat_requests()[0].tools) >= BUILTIN


@pytest.mark.parametrize("decision", [True, False])
def test_saved_trust_decision_is_used(rig: RouterRig, decision: bool) -> None:
    project_policy(rig)
    (rig.agent / "trust.json").write_text(json.dumps({str(rig.work.resolve()): decision}))

    done = rig.print("hello")

    assert done.returncode == 0, done.stderr
    tools = rig.fake.chat_requests()[0].tools
    assert (tools == ["read"]) is decision
