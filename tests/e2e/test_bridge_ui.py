"""Dialogs answered by rules, and policy-declared slash commands, in RPC mode."""

from __future__ import annotations

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import (
    RouterRig,
    command,
    is_notify,
    notices,
    tool_call,
    ui_requests,
    write_extension,
)

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

PICK_EXTENSION = """
export default function (pi) {
  pi.registerTool({
    name: "pick",
    label: "pick",
    description: "Ask the user to pick an option.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
    async execute(_id, _params, _signal, _update, ctx) {
      const answer = await ctx.ui.select("Pick one", ["A", "B (Recommended)"]);
      return { content: [{ type: "text", text: `picked: ${answer}` }], details: {} };
    },
  });
}
"""

DIALOG_RULE = """
rules:
  - id: answer-pick
    on: dialog
    match: "kind == 'select'"
    do:
      - answer: {value: "{options[1]}"}
"""


def run_pick(rig: RouterRig, policy: str) -> tuple[list[str], list[dict[str, object]]]:
    """Run one prompt whose model calls ``pick``; return the tool texts of request 2 and UI requests."""
    rig.policy(policy)
    extension = write_extension(rig.tmp, "pick", PICK_EXTENSION)
    rig.fake.script.push(tool_call("pick", {}), Reply(text="ok"))
    rpc = rig.rpc("-e", str(extension))

    rpc.prompt_and_wait("choose for me")

    assert [e["toolName"] for e in rpc.events(type_="tool_execution_end")] == ["pick"]
    first, second = rig.fake.chat_requests()
    assert "pick" in first.tools
    return second.texts("tool"), ui_requests(rpc)


def test_dialog_answered_by_rule_never_reaches_client(rig: RouterRig) -> None:
    tool_texts, requests = run_pick(rig, DIALOG_RULE)

    assert tool_texts == ["picked: B (Recommended)"]
    assert not [r for r in requests if r.get("method") == "select"]


def test_dialog_without_rule_reaches_client(rig: RouterRig) -> None:
    # a policy with an unrelated dialog rule: the bridge patches ctx.ui, the rule declines
    tool_texts, requests = run_pick(rig, DIALOG_RULE.replace("kind == 'select'", "kind == 'confirm'"))

    [select] = [r for r in requests if r.get("method") == "select"]
    assert (select["title"], select["options"]) == ("Pick one", ["A", "B (Recommended)"])
    assert tool_texts == ["picked: undefined"]  # the harness client cancels dialogs


def test_dialog_with_no_dialog_rules_reaches_client(rig: RouterRig) -> None:
    tool_texts, requests = run_pick(rig, "rules:\n  - {id: quiet, on: input, do: [{log: x}]}\n")

    assert [r["options"] for r in requests if r.get("method") == "select"] == [["A", "B (Recommended)"]]
    assert tool_texts == ["picked: undefined"]


COMMANDS = """
commands:
  - name: hello-router
    description: Say hello from the router
    completions: [alpha, beta]
rules:
  - id: hello
    on: command
    match: "name == 'hello-router'"
    do:
      - notify: {text: "HELLO_FROM_ROUTER args={args} first={argv[0]}"}
"""


def test_policy_command_registered_and_handled(rig: RouterRig) -> None:
    rig.policy(COMMANDS)
    rpc = rig.rpc()

    commands = rpc.command("get_commands")["commands"]
    since = rpc.mark()
    response = rpc.send({"type": "prompt", "message": "/hello-router alpha more"})
    notice = rpc.wait_record(is_notify("HELLO_FROM_ROUTER"), since=since)

    [hello] = [c for c in commands if c["name"] == "hello-router"]
    assert hello["description"] == "Say hello from the router"
    assert hello["source"] == "extension"
    assert response["success"] and response["data"]["disposition"] == "handled"
    assert notice["message"] == "HELLO_FROM_ROUTER args=alpha more first=alpha"
    assert notices(rpc, since) == [notice["message"]]
    assert rig.fake.chat_requests() == []  # a command never reaches the model


PANEL = """
vars: {verbose: true}
commands:
  - name: prefs
    description: Preferences
rules:
  - id: prefs-panel
    on: command
    match: "name == 'prefs'"
    do:
      - panel:
          id: prefs
          title: Preferences
          text: "Edit ~/.prefs.json"
          command: prefs
          args: set
          items:
            - {key: verbose, kind: bool, value: "{vars.verbose}"}
            - {key: models, label: Models, kind: list, value: [a/x, b/y]}
            - {key: mode, kind: choice, choices: [fast, slow], value: slow}
            - {key: name, value: ""}
"""


def test_panel_without_the_tui_is_shown_as_text(rig: RouterRig) -> None:
    # RPC mode has no TUI: the panel is one notification, its title, text and label: value lines
    rig.policy(PANEL)
    rpc = rig.rpc()

    [text] = command(rpc, "/prefs")

    assert text.splitlines() == [
        "Preferences", "Edit ~/.prefs.json", "verbose: true", "Models: a/x, b/y", "mode: slow",
        "name: (none)"]
    assert "panel" not in rig.log()  # nothing failed on the way
