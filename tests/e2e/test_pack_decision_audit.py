"""The `decision` pack's audit log, its informational commands, concurrent writers and project trust."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import helpers_router
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_decision import (
    ANSWER_KEYS,
    AUDIT_KEYS,
    CHILD_OFF,
    POLICY,
    Provider,
    audit_path,
    audit_records,
    decide,
    decision_env,
    is_delegate,
    parent_requests,
)
from tests.e2e.helpers_router import SERVE_ARGV, RouterRig, command, ui_requests

pytestmark = pytest.mark.e2e
rig = helpers_router.rig


def decision_calls(count: int, tag: str = "") -> Reply:
    """One assistant message calling decision_request ``count`` times."""
    return Reply(text="", tool_calls=[
        {"name": "decision_request",
         "arguments": {"question": f"{tag}Question {i}?", "options": ["A", "B (Recommended)"]}}
        for i in range(count)])


# -- 9. the audit log -----------------------------------------------------------------------------------


def test_audit_records_log_and_status_commands(rig: RouterRig) -> None:
    rig.policy(POLICY)
    Provider(rig, [decision_calls(12), Reply(text="decided")])
    rpc = rig.rpc(env=decision_env(rig, PI_DECISION_ROUTER_CHILD="0", PI_DECISION_ROUTER_TIMEOUT_MS="300",
                                   PI_DECISION_ROUTER_COMPACTION_THRESHOLD_PERCENT="90.5"))
    assert command(rpc, "/decision-router-log") == ["No decision audit entries."]

    rpc.prompt_and_wait("decide twelve things")

    records = audit_records(rig)
    assert len(records) == 12
    for i, record in enumerate(records):
        assert list(record) == AUDIT_KEYS
        datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
        assert record["cwd"] == str(rig.work)
        assert record["toolName"] == "decision_request"
        assert record["questions"][0]["prompt"] == f"Question {i}?"
        [answer] = record["answers"]
        assert list(answer) == ANSWER_KEYS
        assert (answer["value"], answer["source"]) == ("B (Recommended)", "fallback")
        assert record["child"] == CHILD_OFF
    assert audit_path(rig).stat().st_mode & 0o777 == 0o600
    entries = [r["entry"] for r in rpc.events(type_="entry_appended")
               if r["entry"].get("customType") == "pi-decision-router"]
    assert len(entries) == 12  # each batch result is kept in the session as well
    assert entries[0]["data"]["toolName"] == "decision_request"

    [log] = command(rpc, "/decision-router-log")
    lines = audit_path(rig).read_text().splitlines()
    assert log == "\n".join(lines[-10:])
    assert "Question 1?" not in log and "Question 11?" in log

    [status] = command(rpc, "/decision-router-status")
    assert status.splitlines() == [
        "enabled: true",
        "toggle: /decision-router-toggle (press Enter to switch)",
        "child: false",
        "auto compaction: true",
        "compaction threshold: 90.5%",
        "compaction emergency: 100%",
        "timeout: 300ms",
        f"audit: {audit_path(rig)}",
        "registered tool: decision_request",
        "external adapters: question, questionnaire, ask_question, ask_user_question, AskUserQuestion",
    ]


def test_audit_records_as_the_original_writes_them(rig: RouterRig) -> None:
    """The child's command is the pi found on PATH, the reasons are the original's, and the toggle's
    record has the original's shape."""
    rig.policy(POLICY)
    questions = {"questions": [{"id": "scope", "prompt": "Scope?", "options": ["Full", "MVP (Recommended)"]},
                               {"id": "name", "prompt": "Name the branch"}]}
    Provider(rig, [decide(questions), Reply(text="ok")])  # the delegate answers "not json at all"
    rpc = rig.rpc(env=decision_env(rig))

    rpc.prompt_and_wait("decide")
    command(rpc, "/decision-router-toggle")

    on, toggle = audit_records(rig)
    pi_on_path = shutil.which("pi", path=rig.env["PATH"])
    assert pi_on_path and Path(pi_on_path).is_absolute()
    assert on["child"] == {
        "attempted": True, "status": "fallback", "model": "fake-local", "command": pi_on_path,
        "error": "invalid result: extract_json(): no JSON object found"}
    assert [a["reason"] for a in on["answers"]] == [
        "Child agent was unavailable or returned an invalid answer; fallback policy selected the "
        "recommended/default option or first option.",
        "No options were provided; fallback policy supplied an unattended default."]
    assert toggle["child"] == {"attempted": False, "status": "disabled"}
    assert toggle["questions"] == [{"id": "enabled", "prompt": "Enable unattended decisions?",
                                    "options": ["on", "off"]}]


def test_a_decision_while_off_records_only_that_the_child_is_disabled(rig: RouterRig) -> None:
    """While OFF the tool is not offered, so the call is made the way the engine gets it."""
    rig.policy(POLICY)
    event = rig.tmp / "question.json"
    event.write_text(json.dumps({"type": "question", "tool_name": "decision_request",
                                 "questions": [{"id": "q1", "prompt": "Go on?", "options": []}]}))
    state = rig.tmp / "off.json"
    state.write_text(json.dumps({"dr": {"enabled": False}}))

    done = rig.router("explain", "-e", str(event), "--state", str(state), "--format", "json")

    assert done.returncode == 0, done.stderr
    [audit] = [e["params"] for e in json.loads(done.stdout)["effects"] if e["action"] == "audit"]
    assert audit["record"]["child"] == {"attempted": False, "status": "disabled"}
    assert audit["record"]["answers"][0]["reason"] == (
        "No options were provided; fallback policy supplied an unattended default.")


def test_commands_are_silent_in_print_mode(rig: RouterRig) -> None:
    rig.policy(POLICY)
    for text in ("/decision-router-status", "/decision-router-log"):
        done = rig.print(text, env=decision_env(rig))
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
        assert "decision" not in done.stderr.lower()
    assert rig.fake.chat_requests() == []


def test_two_pi_processes_append_without_losing_lines(rig: RouterRig) -> None:
    rig.policy(POLICY)
    other = rig.tmp / "other"
    other.mkdir()

    def script(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        if is_delegate(body) or messages[-1].get("role") != "user":
            return Reply(text="done")
        return decision_calls(8, tag="x" * 2000)  # long records

    rig.fake.script.fn = script
    env = decision_env(rig, PI_DECISION_ROUTER_CHILD="0")
    first = rig.rpc(env=env)
    second = rig.rpc(env=env, cwd=other)
    marks = [first.mark(), second.mark()]
    for rpc in (first, second):
        rpc.send({"type": "prompt", "message": "decide"})
    for rpc, since in zip((first, second), marks, strict=True):
        rpc.wait_event("agent_settled", since=since)

    records = audit_records(rig)  # every line parses
    assert len(records) == 16
    assert sorted(r["cwd"] for r in records) == sorted([str(rig.work)] * 8 + [str(other)] * 8)
    assert len(parent_requests(rig)) == 4


SIDECARS = 6
EVENTS = 20


def start_sidecar(rig: RouterRig, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A `router serve` for the rig's work and agent dirs, talking over pipes."""
    return subprocess.Popen([*SERVE_ARGV, "--cwd", str(rig.work), "--agent-dir", str(rig.agent)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=rig.work)


def drive_sidecar(rig: RouterRig, proc: subprocess.Popen[bytes], index: int, problems: list[str]) -> None:
    """Send EVENTS question events (big records), each after the last one's answer, shut the sidecar down."""
    try:
        talk_to_sidecar(rig, proc, index, problems)
    except Exception as exc:  # a thread's exception would not fail the test
        problems.append(f"sidecar {index}: {exc!r}")


def talk_to_sidecar(rig: RouterRig, proc: subprocess.Popen[bytes], index: int, problems: list[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    ctx = {"cwd": str(rig.work), "mode": "rpc", "hasUI": True, "model": None,
           "activeTools": [], "allTools": []}
    requests = [{"id": 1, "method": "hello", "params": {"protocol": 1, "cwd": str(rig.work), "trusted": False,
                                                        "mode": "rpc", "hasUI": True, "state": None,
                                                        "models": []}}]
    for n in range(EVENTS):
        question = {"question": f"S{index}-E{n} " + "y" * 50_000, "options": ["A", "B (Recommended)"]}
        requests.append({"id": n + 2, "method": "event", "params": {
            "type": "question", "ctx": ctx,
            "payload": {"toolName": "decision_request", "source": "tool", "input": question, "excerpt": []}}})
    # one request at a time: each event gets the engine's answer within its own deadline (an event
    # queued behind nineteen others would have used it up waiting); the six processes still overlap
    for request in requests:
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                problems.append(f"sidecar {index} ended before answering {request['id']}")
                return
            message = json.loads(line)
            if message.get("id") == request["id"] and "method" not in message:
                if "error" in message:
                    problems.append(f"sidecar {index}: {message['error']}")
                break
    proc.stdin.write(b'{"id": 999, "method": "shutdown", "params": {}}\n')
    proc.stdin.close()
    if proc.wait(timeout=10) != 0:
        problems.append(f"sidecar {index} exited with {proc.returncode}")


def test_many_concurrent_sidecars_append_whole_lines(rig: RouterRig) -> None:
    rig.policy(POLICY)
    env = decision_env(rig, PI_DECISION_ROUTER_CHILD="0")
    problems: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(SIDECARS):
            procs.append(start_sidecar(rig, env))
        threads = [threading.Thread(target=drive_sidecar, args=(rig, proc, i, problems), daemon=True)
                   for i, proc in enumerate(procs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not [t for t in threads if t.is_alive()], "a sidecar was still being driven after 120 s"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    assert problems == []
    lines = audit_path(rig).read_text().split("\n")
    assert lines[-1] == ""
    records = [json.loads(line) for line in lines[:-1]]  # no torn or interleaved line
    assert len(records) == SIDECARS * EVENTS
    tags = [r["questions"][0]["prompt"].split(" ")[0] for r in records]
    assert sorted(tags) == sorted(f"S{i}-E{n}" for i in range(SIDECARS) for n in range(EVENTS))
    writers = [tag.split("-")[0] for tag in tags]
    switches = sum(a != b for a, b in itertools.pairwise(writers))
    assert switches >= SIDECARS, "the writers did not overlap, so the test proved nothing"
    assert audit_path(rig).stat().st_mode & 0o777 == 0o600


# -- 10. project trust ------------------------------------------------------------------------------------


AUTO_TRUST = POLICY + "vars: {auto_trust_projects: true}\n"


@pytest.mark.parametrize(("policy", "enabled"), [(AUTO_TRUST, True), (POLICY, True), (AUTO_TRUST, False)],
                         ids=["opted in", "default: Pi asks", "opted in, ENABLED=0"])
def test_project_trust(rig: RouterRig, policy: str, enabled: bool) -> None:
    """The pack answers Pi's trust prompt only when the user's own file opts in (auto_trust_projects)."""
    rig.policy(policy)
    rig.settings(defaultProjectTrust="ask")
    (rig.work / ".pi").mkdir()
    # a setting Pi only loads from a trusted project, visible in the first request
    (rig.work / ".pi" / "settings.json").write_text(json.dumps({"defaultModel": "fake-cloud"}))
    env = decision_env(rig) if enabled else decision_env(rig, PI_DECISION_ROUTER_ENABLED="0")
    rpc = rig.rpc(env=env)
    rpc.prompt_and_wait("hello")

    [request] = parent_requests(rig)
    trust_file = rig.agent / "trust.json"
    if policy is AUTO_TRUST and enabled:
        dialogs = [r for r in ui_requests(rpc) if r.get("method") in ("select", "confirm", "input", "editor")]
        assert not dialogs
        assert request.model == "fake-cloud"
        assert json.loads(trust_file.read_text()) == {str(rig.work): True}
        [record] = audit_records(rig)
        assert record["toolName"] == "project_trust"
        assert record["questions"][0]["prompt"] == f"Trust project {rig.work}?"
        [answer] = record["answers"]
        assert (answer["id"], answer["value"], answer["source"]) == ("trust", "yes", "fallback")
    else:
        assert request.model == "fake-local"  # not trusted: Pi skipped the project's settings
        assert not trust_file.exists()
        assert audit_records(rig) == []


def test_project_cannot_turn_on_auto_trust(rig: RouterRig) -> None:
    """A cloned repository's trusted policy that sets auto_trust_projects is not obeyed on it."""
    rig.policy(POLICY)
    rig.settings(defaultProjectTrust="ask")
    (rig.work / ".pi").mkdir()
    (rig.work / ".pi" / "settings.json").write_text(json.dumps({"defaultModel": "fake-cloud"}))
    (rig.work / ".pi" / "router.yaml").write_text("vars: {auto_trust_projects: true}\n")
    trusted = rig.router("trust", "--yes")
    assert trusted.returncode == 0, trusted.stderr
    rpc = rig.rpc(env=decision_env(rig))
    rpc.prompt_and_wait("hello")

    [request] = parent_requests(rig)
    assert request.model == "fake-local"
    assert not (rig.agent / "trust.json").exists()
    assert audit_records(rig) == []
    refused = "var 'auto_trust_projects' of the project policy refused"
    assert [n for n in helpers_router.notices(rpc) if refused in n]
