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

def is_child(body):
    m = body.get("messages") or []
    return bool(m) and "decision delegate" in content_text(m[0].get("content"))

def setup(rig, parent, child_fn):
    q = deque(parent)
    def fn(body):
        if is_child(body):
            return child_fn(json.loads(content_text(body["messages"][-1]["content"])))
        return q.popleft() if q else Reply(text="done")
    rig.fake.script.fn = fn

def stub(rig):
    log = rig.tmp / "argv.jsonl"
    s = rig.tmp / "pi-stub"
    s.write_text(f"""#!{sys.executable}
import json, os, sys
with open({str(log)!r}, "a") as fh:
    fh.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "pid": os.getpid()}}) + "\\n")
os.execv({str(rig.install.bin_dir / 'pi')!r}, ["pi", *sys.argv[1:]])
""")
    s.chmod(0o755)
    return s, log

@pytest.mark.parametrize("via", ["child", "registry"])
def test_explore(rig: RouterRig, via) -> None:
    rig.policy("use: [decision]\n")
    s, log = stub(rig)
    def child(p):
        return Reply(text=json.dumps({"answers":[{"id":q["id"],"value":q["options"][0]["label"],"reason":"child says"} for q in p["questions"]]}))
    setup(rig, [Reply(text="", tool_calls=[{"name":"decision_request","arguments":{"questions":[{"question":"Scope?","options":[{"value":"full","label":"Full"},{"value":"mvp","label":"MVP (Recommended)"}]},{"prompt":"Db?","options":["pg","sqlite (default)"]}]}}])], child)
    env = {**rig.env, "PI_DECISION_ROUTER_PI_BIN": str(s), "PI_DECISION_ROUTER_AUDIT_LOG": str(rig.tmp/"audit.jsonl"), "PI_DECISION_ROUTER_VIA": via}
    rpc = rig.rpc(env=env)
    recs = rpc.prompt_and_wait("go")
    for r in rig.fake.chat_requests():
        print("REQ", r.model, r.tools, repr(r.system[-300:]), json.dumps(r.messages[1:])[:1500])
    print(log.read_text() if log.exists() else "NO ARGV")
    print((rig.tmp/"audit.jsonl").read_text())
    print(rig.log("router.log"))
