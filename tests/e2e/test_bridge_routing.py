"""Per-request routing through a policy-declared virtual model (`router/auto`)."""

from __future__ import annotations

import json

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig, read_call

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

ROUTING = """
virtual_models:
  - {provider: router, id: auto}
rules:
  - id: keep-previous-on-continuation
    on: route
    match: "reason == 'continuation' && previous"
    do:
      - route: {model: "{previous.ref}", thinking: "{previous.thinking_level}"}
  - id: hard-to-cloud
    on: route
    match: "reason == 'user' && contains(last_user_text, '#hard')"
    do:
      - route: {model: fake/fake-cloud, thinking: medium}
  - id: else-local
    on: route
    do:
      - route: {model: fake/fake-local}
"""


def test_virtual_model_routes_each_request(rig: RouterRig) -> None:
    rig.policy(ROUTING)
    rig.fake.script.push(
        Reply(text="easy answer"),
        # '#hard' prompt: the cloud model calls a tool; the continuation has no '#hard' rule
        # match (reason continuation) and must stay on the previous physical model
        read_call(rig, "ROUTED_NOTES\n"),
        Reply(text="hard answer"),
        Reply(text="easy again"),
    )
    rpc = rig.rpc("--model", "router/auto")

    rpc.prompt_and_wait("an easy one")
    rpc.prompt_and_wait("a #hard one, read the notes")
    rpc.prompt_and_wait("easy once more")
    state = rpc.command("get_state")
    messages = rpc.command("get_messages")["messages"]

    chats = rig.fake.chat_requests()
    assert [(c.model, c.reasoning_effort) for c in chats] == [
        ("fake-local", None),
        ("fake-cloud", "medium"),
        ("fake-cloud", "medium"),  # continuation after the tool result: previous.ref
        ("fake-local", None),
    ]
    assert any("ROUTED_NOTES" in t for t in chats[2].texts("tool"))
    assert not any("auto" in json.dumps(r.body.get("model")) for r in rig.fake.requests())
    assert (state["model"]["provider"], state["model"]["id"]) == ("router", "auto")
    answered_by = [m.get("model") for m in messages if m.get("role") == "assistant"]
    assert answered_by == ["fake-local", "fake-cloud", "fake-cloud", "fake-local"]


def test_continuation_without_rule_follows_the_else_rule(rig: RouterRig) -> None:
    """Control: with the continuation rule disabled, the tool continuation goes to the else rule."""
    rig.policy(ROUTING + "disable: [keep-previous-on-continuation]\n")
    rig.fake.script.push(read_call(rig), Reply(text="done"))

    done = rig.print("--model", "router/auto", "#hard task")

    assert done.returncode == 0, done.stderr
    assert [c.model for c in rig.fake.chat_requests()] == ["fake-cloud", "fake-local"]


def test_route_to_unknown_model_falls_back(rig: RouterRig) -> None:
    rig.policy("""
        virtual_models:
          - {provider: router, id: auto}
        rules:
          - id: nowhere
            on: route
            do:
              - route: {model: fake/missing-model}
    """)

    done = rig.print("--model", "router/auto", "hello")

    assert done.returncode == 0, done.stderr
    [chat] = rig.fake.chat_requests()
    # no previous model on the first request: the first physical model of Pi's registry
    assert chat.model == "fake-local"
    assert "route to unknown model fake/missing-model" in done.stderr
