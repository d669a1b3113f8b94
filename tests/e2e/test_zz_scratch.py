from __future__ import annotations
import json, os, sys
from collections import deque
import pytest
from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.fake_chat import content_text
from tests.e2e.helpers_router import RouterRig, ui_requests, write_extension

pytestmark = pytest.mark.e2e
rig = helpers_router.rig

EXT = """
export default function (pi) {
  const none = { type: "object", properties: {}, additionalProperties: false };
  pi.registerTool({
    name: "ask_all", label: "ask_all", description: "Open four dialogs.", parameters: none,
    async execute(_id, _params, _signal, _update, ctx) {
      const select = await ctx.ui.select("Pick a plan", ["First", "Second (Recommended)"]);
      const confirm = await ctx.ui.confirm("Proceed?", "Apply the change");
      const input = await ctx.ui.input("Name", "placeholder");
      const editor = await ctx.ui.editor("Notes", "prefill");
      const got = { select: select ?? null, confirm: confirm ?? null, input: input ?? null, editor: editor ?? null };
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

def test_explore(rig: RouterRig) -> None:
    rig.policy("use: [decision]\n")
    fail = rig.tmp / "fail-pi"
    fail.write_text("#!/bin/sh\nexit 3\n"); fail.chmod(0o755)
    ext = write_extension(rig.tmp, "dialogs", EXT)
    rig.fake.script.push(Reply(text="", tool_calls=[{"name":"ask_all","arguments":{}}]), Reply(text="", tool_calls=[{"name":"rpiv_ask","arguments":{}}]), Reply(text="done"))
    env = {**rig.env, "PI_DECISION_ROUTER_PI_BIN": str(fail), "PI_DECISION_ROUTER_AUDIT_LOG": str(rig.tmp/"audit.jsonl")}
    rpc = rig.rpc("-e", str(ext), env=env)
    recs = rpc.prompt_and_wait("go")
    for r in rig.fake.chat_requests():
        print("REQ", r.tools, json.dumps(r.messages[1:])[:1500])
    for r in rpc.records:
        if r.get("type") in ("extension_ui_request","extension_error"):
            print("REC", json.dumps(r)[:600])
    print((rig.tmp/"audit.jsonl").read_text())
    print(rig.log("router.log"))
    since = rpc.mark()
    r = rpc.send({"type":"prompt","message":"/decision-router-toggle"})
    print(r)
    rpc.wait_record(lambda r: r.get("method")=="notify", since=since)
    for r in rpc.events(since):
        print("TOG", json.dumps(r)[:600])
    print(list((rig.agent).rglob("state.json")), [p.read_text() for p in rig.agent.rglob("state.json")])
    print(rpc.command("get_state"))
    since = rpc.mark()
    r = rpc.send({"type":"prompt","message":"/decision-router-status"})
    rpc.wait_record(lambda r: r.get("method")=="notify", since=since)
    r = rpc.send({"type":"prompt","message":"/decision-router-log"})
    rpc.wait_record(lambda r: r.get("method")=="notify" and "timestamp" in r["message"], since=since)
    for r in rpc.events(since):
        print("CMD", json.dumps(r)[:3000])
