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

def test_explore(rig: RouterRig) -> None:
    rig.policy("use: [decision]\n")
    rig.settings(compaction={"keepRecentTokens": 10})
    (rig.work / "notes.txt").write_text("some notes\n" * 20)
    q = deque([Reply(text="", tool_calls=[{"name":"read","arguments":{"path":"notes.txt"}}], prompt_tokens=30500)])
    def fn(body):
        text = json.dumps(body["messages"])
        if "Context compaction is complete" in text:
            return Reply(text="FINAL after compaction", prompt_tokens=1000)
        if q: return q.popleft()
        return Reply(text="SUMMARY OF WORK", prompt_tokens=500)
    rig.fake.script.fn = fn
    env = {**rig.env, "PI_DECISION_ROUTER_AUDIT_LOG": str(rig.tmp/"audit.jsonl")}
    rpc = rig.rpc(env=env, session=True)
    since = rpc.mark()
    rpc.send({"type":"prompt","message":"go"})
    rpc.wait_record(lambda r: r.get("type")=="extension_ui_request" and "Continuing" in str(r.get("message")), timeout=30)
    rpc.wait_record(lambda r: r.get("type")=="agent_settled" and not r.get("aborted"), timeout=30, since=since)
    import time; time.sleep(1)
    for r in rig.fake.chat_requests():
        print("REQ", r.tools[:2], repr(r.system[:200]), json.dumps(r.messages[1:])[:800])
    for r in rpc.records:
        if r.get("type") not in ("message_update",):
            print("REC", json.dumps(r)[:400])
    for e in helpers_router.session_entries(rig.session_dir):
        print("ENT", json.dumps(e)[:300])
    print(rig.log("router.log"))

def test_explore2(rig: RouterRig) -> None:
    from tests.e2e.test_pack_deepseek import setup, read_reply
    setup(rig)
    rig.fake.script.push(read_reply(rig), read_reply(rig), Reply(text="done"))
    rpc = rig.rpc("--model", "fake/deepseek-v4-pro")
    rpc.prompt_and_wait("build a new command-line tool")
    for c in rig.fake.chat_requests():
        print(c.tools)
    print(rig.log(), rig.log("router.log"))

def test_explore3(rig: RouterRig) -> None:
    from tests.e2e.test_pack_deepseek import setup, read_reply, probe, active_tools
    setup(rig)
    rig.fake.script.push(read_reply(rig), read_reply(rig), Reply(text="done"))
    rpc = probe(rig, "--model", "fake/deepseek-v4-pro")
    print(active_tools(rpc))
    rpc.prompt_and_wait("build a new command-line tool")
    print(active_tools(rpc))
    for r in rpc.events(type_="entry_appended"):
        print(json.dumps(r)[:600])

def test_explore4(rig: RouterRig) -> None:
    from tests.e2e.helpers_router import write_extension
    from tests.e2e.test_pack_deepseek import setup, FULL
    setup(rig)
    rig.policy("rules: []\n")
    ext = write_extension(rig.tmp, "t", """
export default function (pi) {
  pi.registerCommand("t", { handler: async (args, ctx) => {
    pi.setActiveTools(args.split(","));
    ctx.ui.notify("now=" + pi.getActiveTools().join(","), "info");
  }});
}
""")
    rpc = rig.rpc("-e", str(ext))
    for a in ["read,edit", "ls,read,bash,edit", "bash,read", "read,bash,edit,write,grep,find,ls"]:
        rpc.command("prompt", message="/t " + a)
    print(notices(rpc))
