"""The `decision` pack's dialog shim, the rpiv questionnaire and the ON/OFF toggle (RPC mode).

A helper extension opens ctx.ui dialogs from inside its tools; while the router is ON they are
answered without any `extension_ui_request` reaching the RPC client, while OFF (or without a UI,
in print mode) they go to Pi's own dialogs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_decision import (
    FALLBACK_REASON,
    MARKER,
    OPEN_REASON,
    POLICY,
    STATUS_OFF,
    STATUS_ON,
    Provider,
    audit_records,
    decision_env,
    delegate_requests,
    failing_pi,
    parent_requests,
    tool_text,
)
from tests.e2e.helpers_router import (
    RouterRig,
    command,
    is_status,
    session_entries,
    statuses,
    tool_call,
    ui_requests,
    write_extension,
)
from tests.e2e.pi_rpc import RpcPi

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

DIALOG_METHODS = {"select", "confirm", "input", "editor"}
DR_KEY = "pi-decision-router"

DIALOGS_EXTENSION = """
export default function (pi) {
  const none = { type: "object", properties: {}, additionalProperties: false };
  pi.registerTool({
    name: "ask_all", label: "ask_all", description: "Open four dialogs.", parameters: none,
    async execute(_id, _params, _signal, _update, ctx) {
      const select = await ctx.ui.select("Pick a plan", ["First", "Second (Recommended)"]);
      const confirm = await ctx.ui.confirm("Proceed?", "Apply the change");
      const input = await ctx.ui.input("Name", "placeholder");
      const editor = await ctx.ui.editor("Notes", "prefill");
      const got = { select: select ?? null, confirm: confirm ?? null, input: input ?? null,
                    editor: editor ?? null, hasUI: ctx.hasUI };
      return { content: [{ type: "text", text: "DIALOGS " + JSON.stringify(got) }], details: {} };
    },
  });
  pi.registerTool({
    name: "rpiv_ask", label: "rpiv_ask", description: "Ask a questionnaire.", parameters: none,
    async execute(_id, _params, _signal, _update, ctx) {
      pi.events.emit("rpiv:ask-user:prompt", { questions: [
        { question: "Scope?", options: [{ label: "Full" }, { label: "MVP (Recommended)" }] } ] });
      const got = await ctx.ui.custom(() => ({ render: () => [], invalidate() {} }));
      return { content: [{ type: "text", text: "RPIV " + JSON.stringify(got ?? null) }], details: {} };
    },
  });
}
"""


def dialogs_extension(rig: RouterRig) -> Path:
    return write_extension(rig.tmp, "dialogs", DIALOGS_EXTENSION)


def dialog_result(text: str) -> Any:
    assert text.startswith("DIALOGS "), text
    return json.loads(text.removeprefix("DIALOGS "))


def dialog_requests(rpc: RpcPi, since: int = 0) -> list[dict[str, Any]]:
    return [r for r in ui_requests(rpc, since=since) if r.get("method") in DIALOG_METHODS]


def answer_as_human(request: dict[str, Any]) -> dict[str, Any] | None:
    """An RPC client that answers dialogs like a person would."""
    method = request.get("method")
    if method == "select":
        return {"value": request["options"][0]}
    if method == "confirm":
        return {"confirmed": False}
    if method in ("input", "editor"):
        return {"value": f"human {method}"}
    return None


# -- 5. the UI shim ------------------------------------------------------------------------------------


def test_dialogs_answered_without_reaching_the_client(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [tool_call("ask_all", {}), Reply(text="ok")])

    rpc = rig.rpc("-e", str(dialogs_extension(rig)),
                  env=decision_env(rig, PI_DECISION_ROUTER_PI_BIN=str(failing_pi(rig))))
    rpc.wait_record(is_status("Decision Router", DR_KEY))
    since = rpc.mark()
    rpc.prompt_and_wait("open the dialogs")

    _, after = parent_requests(rig)
    assert dialog_result(tool_text(after)) == {
        "select": "Second (Recommended)", "confirm": True, "input": "auto", "editor": "auto", "hasUI": True}
    assert dialog_requests(rpc) == []
    assert statuses(rpc, DR_KEY) == [STATUS_ON]  # set once at session start, never by a dialog
    assert statuses(rpc, DR_KEY, since) == []
    records = audit_records(rig)
    assert [r["toolName"] for r in records] == [
        "ctx.ui.select", "ctx.ui.confirm", "ctx.ui.input", "ctx.ui.editor"]
    assert [r["questions"][0]["prompt"] for r in records] == [
        "Pick a plan", "Proceed?\nApply the change", "Name\nPlaceholder: placeholder",
        "Notes\nPrefilled value: prefill"]
    assert {r["child"]["error"] for r in records} == {"child exited with code 3: child broke"}
    assert [a["reason"] for r in records for a in r["answers"]] == [FALLBACK_REASON] * 2 + [OPEN_REASON] * 2
    assert [o["label"] for o in records[1]["questions"][0]["options"]] == ["Yes", "No"]


def test_dialog_answered_by_the_child(rig: RouterRig) -> None:
    rig.policy(POLICY)

    def child(prompt: dict[str, Any]) -> Reply:
        [question] = prompt["questions"]
        value = {"Pick a plan": "First", "Proceed?\nApply the change": "no"}.get(question["prompt"], "Ada")
        return Reply(text=json.dumps({"answers": [{"id": "q1", "value": value, "reason": "child"}]}))

    Provider(rig, [tool_call("ask_all", {}), Reply(text="ok")], child=child)
    rpc = rig.rpc("-e", str(dialogs_extension(rig)), env=decision_env(rig))
    rpc.prompt_and_wait("open the dialogs")

    _, after = parent_requests(rig)
    assert dialog_result(tool_text(after)) == {
        "select": "First", "confirm": False, "input": "Ada", "editor": "Ada", "hasUI": True}
    assert len(delegate_requests(rig)) == 4  # one child per dialog
    assert dialog_requests(rpc) == []
    assert {r["child"]["status"] for r in audit_records(rig)} == {"selected"}


def test_print_mode_dialogs_are_not_intercepted(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [tool_call("ask_all", {}), Reply(text="ok")], child=lambda _prompt: Reply(text="{}"))

    done = rig.print("-e", str(dialogs_extension(rig)), "open the dialogs", env=decision_env(rig))

    assert done.returncode == 0, done.stderr
    _, after = parent_requests(rig)
    assert dialog_result(tool_text(after)) == {  # Pi's own no-UI answers
        "select": None, "confirm": False, "input": None, "editor": None, "hasUI": False}
    assert delegate_requests(rig) == []
    assert audit_records(rig) == []


# -- 6. the rpiv questionnaire -----------------------------------------------------------------------


def test_rpiv_questionnaire_answered_through_custom(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [tool_call("rpiv_ask", {}), Reply(text="ok")])

    rpc = rig.rpc("-e", str(dialogs_extension(rig)),
                  env=decision_env(rig, PI_DECISION_ROUTER_PI_BIN=str(failing_pi(rig))))
    rpc.prompt_and_wait("ask the questionnaire")

    _, after = parent_requests(rig)
    text = tool_text(after)
    assert text.startswith("RPIV "), text
    assert json.loads(text.removeprefix("RPIV ")) == {
        "cancelled": False,
        "answers": [{"questionIndex": 0, "question": "Scope?", "kind": "option",
                     "answer": "MVP (Recommended)"}]}
    assert ui_requests(rpc, "custom") == []
    [record] = audit_records(rig)
    assert record["toolName"] == "rpiv:ask-user:prompt"


def test_rpiv_questionnaire_while_off_is_left_to_pi(rig: RouterRig) -> None:
    # only an ON router decides; OFF, Pi's own custom runs: no decision, no audit, no entry
    rig.policy(POLICY)
    Provider(rig, [tool_call("rpiv_ask", {}), Reply(text="ok")])

    rpc = rig.rpc("-e", str(dialogs_extension(rig)), session=True,
                  env=decision_env(rig, PI_DECISION_ROUTER_ENABLED="0"))
    rpc.prompt_and_wait("ask the questionnaire")

    _, after = parent_requests(rig)
    assert tool_text(after) == "RPIV null"  # what Pi's own custom gives an RPC client
    assert audit_records(rig) == []
    assert [e for e in session_entries(rig.session_dir) if e.get("customType") == DR_KEY] == []


def test_rpiv_questionnaire_cancelled_when_the_engine_fails(rig: RouterRig) -> None:
    # a decision that fails outright answers the questionnaire as cancelled (not Pi's custom)
    rig.policy(POLICY)
    Provider(rig, [tool_call("rpiv_ask", {}), Reply(text="ok")])
    killer = rig.tmp / "pi-killer"
    killer.write_text("#!/bin/sh\nkill -9 $PPID\nsleep 30\n")  # the child kills the sidecar
    killer.chmod(0o755)

    env = decision_env(rig, PI_DECISION_ROUTER_PI_BIN=str(killer))
    rpc = rig.rpc("-e", str(dialogs_extension(rig)), env=env)
    rpc.prompt_and_wait("ask the questionnaire")

    _, after = parent_requests(rig)
    assert json.loads(tool_text(after).removeprefix("RPIV ")) == {"answers": [], "cancelled": True}
    assert ui_requests(rpc, "custom") == []
    assert audit_records(rig) == []


# -- 7. the toggle -------------------------------------------------------------------------------------


def toggle(rpc: RpcPi, state: str) -> tuple[list[str | None], dict[str, Any]]:
    """Run /decision-router-toggle, which must switch to ``state``; return the router's statuses
    it set and its one notify request."""
    since = rpc.mark()
    assert command(rpc, "/decision-router-toggle") == [
        f"Pi Decision Router: {state}\nEnter /decision-router-toggle again to switch."]
    [notice] = ui_requests(rpc, "notify", since)
    return statuses(rpc, DR_KEY, since), notice


def test_toggle_off_and_on_in_one_session(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [Reply(text="one"), tool_call("ask_all", {}), Reply(text="two"), Reply(text="three")])
    rpc = rig.rpc("-e", str(dialogs_extension(rig)), env=decision_env(rig, PI_DECISION_ROUTER_CHILD="0"),
                  ui_handler=answer_as_human)
    rpc.prompt_and_wait("before")

    status, notice = toggle(rpc, "OFF")
    assert status == [STATUS_OFF]
    assert notice["message"] == "Pi Decision Router: OFF\nEnter /decision-router-toggle again to switch."
    assert notice["notifyType"] == "info"
    state = json.loads((rig.agent / "pi-decision-router" / "state.json").read_text())
    assert state == {str(rig.work): {"enabled": False, "autoCompaction": True}}
    [record] = audit_records(rig)
    assert record["toolName"] == "decision-router-toggle"
    assert record["answers"] == [{"id": "enabled", "value": "off", "label": "OFF",
                                  "reason": "Manual toggle command.", "source": "fallback"}]

    since = rpc.mark()
    rpc.prompt_and_wait("while off")
    off_first, off_second = parent_requests(rig)[1:3]
    assert "decision_request" not in off_first.tools
    assert MARKER not in off_first.system
    assert [r["method"] for r in dialog_requests(rpc, since)] == ["select", "confirm", "input", "editor"]
    assert dialog_result(tool_text(off_second)) == {
        "select": "First", "confirm": False, "input": "human input", "editor": "human editor", "hasUI": True}
    assert len(audit_records(rig)) == 1  # dialogs decided by the human are not audited

    status, notice = toggle(rpc, "ON")
    assert status == [STATUS_ON]
    assert notice["message"] == "Pi Decision Router: ON\nEnter /decision-router-toggle again to switch."
    rpc.prompt_and_wait("after")
    back_on = parent_requests(rig)[-1]
    assert "decision_request" in back_on.tools
    assert back_on.system.count(MARKER) == 1
    state = json.loads((rig.agent / "pi-decision-router" / "state.json").read_text())
    assert state == {str(rig.work): {"enabled": True, "autoCompaction": True}}


def startup_status(rig: RouterRig, cwd: Path, **env: str) -> str:
    """Start Pi in ``cwd``; return the router's first status text; close Pi."""
    rpc = rig.rpc(env=decision_env(rig, **env), cwd=cwd)
    try:
        record = rpc.wait_record(is_status("Decision Router", DR_KEY))
        return str(record.get("statusText"))
    finally:
        rpc.close()


def test_mode_saved_per_project_and_environment_wins(rig: RouterRig) -> None:
    rig.policy(POLICY)
    other = rig.tmp / "other"
    other.mkdir()
    state_file = rig.agent / "pi-decision-router" / "state.json"

    first = rig.rpc(env=decision_env(rig))
    first.wait_record(is_status("Decision Router", DR_KEY))
    toggle(first, "OFF")
    first.close()
    second = rig.rpc(env=decision_env(rig))  # the same directory starts OFF
    assert second.wait_record(is_status("Decision Router", DR_KEY))["statusText"] == STATUS_OFF
    second.prompt_and_wait("hello")
    [request] = parent_requests(rig)
    assert "decision_request" not in request.tools
    assert MARKER not in request.system
    second.close()

    third = rig.rpc(env=decision_env(rig), cwd=other)  # another directory: ON, then saved ON
    assert third.wait_record(is_status("Decision Router", DR_KEY))["statusText"] == STATUS_ON
    toggle(third, "OFF")
    toggle(third, "ON")
    third.close()
    assert json.loads(state_file.read_text()) == {
        str(rig.work): {"enabled": False, "autoCompaction": True},
        str(other): {"enabled": True, "autoCompaction": True}}

    assert startup_status(rig, rig.work, PI_DECISION_ROUTER_ENABLED="1") == STATUS_ON
    assert startup_status(rig, other, PI_DECISION_ROUTER_ENABLED="0") == STATUS_OFF
    assert startup_status(rig, other, PI_DECISION_ROUTER_ENABLED=" Off ") == STATUS_OFF
    assert startup_status(rig, other, PI_DECISION_ROUTER_ENABLED="") == STATUS_ON
    # the environment never rewrites the saved mode
    assert json.loads(state_file.read_text())[str(rig.work)]["enabled"] is False


def test_disabled_start_hides_the_tool_and_leaves_dialogs_to_the_client(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [tool_call("ask_all", {}), Reply(text="ok")])
    rpc = rig.rpc("-e", str(dialogs_extension(rig)), env=decision_env(rig, PI_DECISION_ROUTER_ENABLED="0"),
                  ui_handler=answer_as_human)
    assert rpc.wait_record(is_status("Decision Router", DR_KEY))["statusText"] == STATUS_OFF
    rpc.prompt_and_wait("ask me")

    first, second = parent_requests(rig)
    assert "decision_request" not in first.tools
    assert MARKER not in first.system
    assert statuses(rpc, DR_KEY) == [STATUS_OFF]
    assert len(dialog_requests(rpc)) == 4
    assert dialog_result(tool_text(second))["select"] == "First"
    assert audit_records(rig) == []
