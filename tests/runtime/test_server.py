"""router.runtime.server: the sidecar's Engine (hello, events, signals, reloads, cache) and its stdio loop."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import router.compile.compiler
import router.runtime.executor as executor_module
from router import __version__
from router.compile.compiler import compile_files
from router.load.paths import packs_dir
from router.runtime import protocol
from router.runtime.connection import Connection, handle_line, id_key
from router.runtime.connection import Lines as LineReader
from router.runtime.project_content import read_project_content
from router.runtime.server import Engine
from router.trust.store import TrustStore
from tests.helpers import HANGING_PI, assert_group_gone, stub
from tests.pipe_lines import PipeLines

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_EVENTS = compile_files([("pack", packs_dir() / "default.yaml")])[0].event_types  # type: ignore[union-attr]


def events(*extra: str) -> list[str]:
    """The forwarded event types: the built-in default pack's, `command` (for /policy), `extra`."""
    return sorted({*DEFAULT_EVENTS, "command", *extra})


POLICY = """\
version: 1
commands:
  - {name: my-router, description: "Router status"}
tools:
  - {name: ask_me, description: "Ask for a decision"}
virtual_models:
  - {provider: router, id: auto, name: "Router auto"}
rules:
  - id: greet
    on: input
    match: "text == 'hi'"
    do:
      - notify: "hello from {model.ref}"
      - set: {greeted: true}
"""
SIGNAL_POLICY = """\
version: 1
signals:
  p:
    complete: {prompt: "rate {text}", timeout_ms: 3000}
    fallback: "'low'"
rules:
  - id: rated
    on: input
    do: [{notify: "p={signals.p}"}]
"""
INPUT = {"type": "input", "payload": {"text": "hi", "source": "rpc"},
         "ctx": {"cwd": "/w", "model": {"provider": "fake", "id": "m1"}}}


class FakeConnection:
    """Records notifications and answers engine requests from a table (method -> reply)."""

    def __init__(self, replies: dict[str, Any] | None = None) -> None:
        self.replies = replies or {}
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[tuple[str, dict[str, Any], float]] = []

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        self.requests.append((method, params, timeout))
        return self.replies.get(method)


class Rig:
    """An agent dir with a user router.yaml, a project dir, and an Engine over a fake connection."""

    def __init__(self, tmp_path: Path, policy: str, **replies: Any) -> None:
        self.agent, self.cwd = tmp_path / "agent", tmp_path / "proj"
        self.cwd.mkdir(parents=True)
        self.agent.mkdir()
        self.policy = self.agent / "router.yaml"
        self.policy.write_text(policy)
        self.connection = FakeConnection(replies)
        self.engine = Engine(self.connection, cwd=self.cwd, agent=self.agent, extra=[])  # type: ignore[arg-type]

    def hello(self, **params: Any) -> dict[str, Any]:
        return asyncio.run(self.engine.hello({"cwd": str(self.cwd), **params}))

    def event(self, params: dict[str, Any] = INPUT, request_id: Any = 7) -> dict[str, Any]:
        """One event, answered and then recorded (as the connection does)."""
        result = asyncio.run(self.engine.event(request_id, params))
        self.engine.after_answer()
        return result

    def edit(self, text: str) -> None:
        self.policy.write_text(text)

    def log(self) -> str:
        path = self.agent / "router" / "router.log"
        return path.read_text() if path.exists() else ""


def test_hello_declares_events_commands_tools_and_virtual_models(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    hello = rig.hello(state={"band": "react"}, models=[{"provider": "fake", "id": "m1"}])
    assert (hello["protocol"], hello["engine"], hello["warnings"]) == (1, __version__, [])
    assert hello["events"] == events("input")
    assert [c["name"] for c in hello["commands"]] == ["my-router", "policy"]
    assert [(t["name"], t["description"]) for t in hello["tools"]] == [("ask_me", "Ask for a decision")]
    assert [(v["provider"], v["id"], v["name"]) for v in hello["virtual_models"]] == [
        ("router", "auto", "Router auto")]
    assert any(path.endswith("router.yaml") for path in hello["files"])
    assert rig.engine.state == {"band": "react"} and list(rig.engine.models) == ["fake/m1"]
    assert hello["skills"] == []


def test_hello_declares_the_policys_skills(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY + "skills: [team]\n")
    (rig.agent / "team").mkdir()
    (rig.agent / "team" / "SKILL.md").write_text("---\nname: team\ndescription: d\n---\n")
    assert rig.hello()["skills"] == [str((rig.agent / "team").resolve())]


def test_hello_broken_user_policy_warns_and_the_built_in_layers_stay(tmp_path: Path) -> None:
    """Layers fail apart: the user's file has errors and no earlier policy loaded for it, so the
    built-in (and managed) layers apply, and the first warning says what is off and why."""
    rig = Rig(tmp_path, "rules:\n  - id: a\n    on: inptu\n    do: [{notify: x}]\n")
    hello = rig.hello()
    assert hello["warnings"][0].startswith(f"{rig.policy} (or a file it uses) is not applied: it has errors")
    assert "the built-in and managed layers apply" in hello["warnings"][0]
    assert "router lint" in hello["warnings"][0] and hello["warnings"][0].endswith("[RT503]")
    assert hello["warnings"][1].endswith("[RT205]") and ":3:9: " in hello["warnings"][1]
    assert hello["events"] == events() and not any(f.endswith("agent/router.yaml") for f in hello["files"])
    assert "greet" not in rig.event().get("fired", [])


PROJECT = "rules:\n  - {id: p, on: turn_start, do: [{notify: x}]}\n"


def project_rig(tmp_path: Path) -> tuple[Rig, Path]:
    """A Rig with an empty user policy and a project policy (PROJECT) not trusted yet."""
    rig = Rig(tmp_path, "version: 1\n")
    (rig.cwd / ".pi").mkdir()
    project = rig.cwd / ".pi" / "router.yaml"
    project.write_text(PROJECT)
    return rig, project


def trust_project(rig: Rig) -> None:
    content, diagnostics = read_project_content(rig.cwd)
    assert content is not None and not diagnostics
    TrustStore(rig.agent).trust(content)


def test_hello_untrusted_project_layer_is_skipped_and_user_told(tmp_path: Path) -> None:
    rig, _ = project_rig(tmp_path)
    hello = rig.hello(trusted=True)  # Pi's folder trust is not content trust
    assert "turn_start" not in hello["events"]
    assert hello["trust"]["state"] == "untrusted"
    [warning] = [w for w in hello["warnings"] if "not trusted" in w]
    assert f"router trust {rig.cwd.resolve()}" in warning
    assert hello["trust"]["status"] == "router: project policy not trusted"


def test_hello_trusted_content_applies_and_a_change_needs_trust_again(tmp_path: Path) -> None:
    rig, project = project_rig(tmp_path)
    trust_project(rig)
    hello = rig.hello()
    assert "turn_start" in hello["events"] and hello["trust"]["state"] == "trusted"
    assert not [w for w in hello["warnings"] if "trust" in w]
    fresh = Engine(FakeConnection(), cwd=rig.cwd, agent=rig.agent, extra=[])  # type: ignore[arg-type]
    assert "turn_start" in asyncio.run(fresh.hello({"cwd": str(rig.cwd)}))["events"]  # from the cache
    project.write_text(PROJECT.replace("notify: x", "notify: y") + "# edited\n")
    again = Engine(FakeConnection(), cwd=rig.cwd, agent=rig.agent, extra=[])  # type: ignore[arg-type]
    changed = asyncio.run(again.hello({"cwd": str(rig.cwd)}))
    assert "turn_start" not in changed["events"] and changed["trust"]["state"] == "changed"


def test_file_appearing_mid_session_is_not_obeyed(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    (rig.cwd / ".pi").mkdir()
    (rig.cwd / ".pi" / "router.yaml").write_text(
        "disable: [greet]\nrules:\n  - {id: evil, on: input, do: [{notify: pwned}]}\n")
    result = rig.event()
    assert result["fired"] == ["greet"]
    assert [w for w in result["warnings"] if "is not applied" in w]
    assert "is not applied" not in " ".join(rig.event()["warnings"])  # told once


def test_trusted_project_policy_in_force_stays_when_its_file_changes(tmp_path: Path) -> None:
    rig, project = project_rig(tmp_path)
    trust_project(rig)
    rig.hello()
    project.write_text("rules:\n  - {id: evil, on: turn_start, do: [{notify: pwned}]}\n")
    result = rig.event({"type": "turn_start", "payload": {"turnIndex": 0}, "ctx": {}})
    assert result["fired"] == ["p"]
    assert any("stays in force" in w for w in result["warnings"])


def test_approve_applies_the_content_present_at_start_only(tmp_path: Path) -> None:
    rig, project = project_rig(tmp_path)
    hello = rig.hello(approve=True)
    assert "turn_start" in hello["events"] and hello["trust"]["state"] == "approved"
    assert not TrustStore(rig.agent).projects()  # not recorded
    project.write_text(PROJECT.replace("id: p", "id: q"))
    result = rig.event({"type": "turn_start", "payload": {"turnIndex": 0}, "ctx": {}})
    assert result["fired"] == ["p"]


def test_default_project_trust_always_is_like_approve(tmp_path: Path) -> None:
    rig, _ = project_rig(tmp_path)
    hello = rig.hello(settings={"defaultProjectTrust": "always"})
    assert hello["trust"]["state"] == "approved" and "turn_start" in hello["events"]


def test_event_without_rules_returns_no_actions(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    assert rig.event({"type": "tool_call", "payload": {"toolName": "bash"}, "ctx": {}}) == {
        "actions": [], "warnings": []}
    assert rig.connection.notes == [] and rig.connection.requests == []


def test_event_matching_returns_actions_fired_and_new_state(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello(state={"band": "react"})
    result = rig.event()
    assert result["actions"] == [
        {"action": "notify", "params": {"text": "hello from fake/m1", "level": "info"}, "rule": "greet"}]
    assert (result["fired"], result["warnings"]) == (["greet"], [])
    assert result["state"] == {"band": "react", "greeted": True} and "declarations" not in result
    again = rig.event()
    assert "state" not in again and again["fired"] == ["greet"]  # unchanged state is not sent again
    quiet = rig.event({**INPUT, "payload": {"text": "bye"}})
    assert (quiet["actions"], quiet["fired"]) == ([], [])


TRANSIENT_POLICY = """\
version: 1
transient_state: [run.busy]
rules:
  - id: mark
    on: input
    do: [{set: {run.busy: "{text}", run.turns: 1, tags: "{split('a b', ' ')}"}}]
"""


def test_event_stores_the_state_without_transient_keys_only_when_it_changes(tmp_path: Path) -> None:
    rig = Rig(tmp_path, TRANSIENT_POLICY)
    rig.hello(state={"run": {"busy": "stale", "turns": 1}, "tags": ["a", "b"]})
    assert rig.engine.state == {"run": {"turns": 1}, "tags": ["a", "b"]}  # the restored transient key is gone
    first = rig.event()
    assert "state" not in first  # only the transient key changed (tags compare as JSON)
    assert rig.engine.state["run"] == {"busy": "hi", "turns": 1}  # kept for the running session
    rig.edit(TRANSIENT_POLICY.replace("run.turns: 1", "run.turns: 12"))  # a new size: reloaded
    second = rig.event({**INPUT, "payload": {"text": "again"}})
    assert second["state"] == {"run": {"turns": 12}, "tags": ["a", "b"]}
    assert "state" not in rig.event({**INPUT, "payload": {"text": "once more"}})


def test_a_value_python_calls_equal_but_json_does_not_is_stored(tmp_path: Path) -> None:
    rig = Rig(tmp_path, """version: 1
rules:
  - {id: one, on: input, match: "text == 'a'", do: [{set: {n: 1}}]}
  - {id: yes, on: input, match: "text == 'b'", do: [{set: {n: true}}]}
""")
    rig.hello()
    assert rig.event({**INPUT, "payload": {"text": "a"}})["state"] == {"n": 1}
    assert rig.event({**INPUT, "payload": {"text": "b"}})["state"] == {"n": True}  # 1 == True in Python


def test_event_pending_signal_computed_with_progress_budget(tmp_path: Path) -> None:
    rig = Rig(tmp_path, SIGNAL_POLICY, complete={"text": "high"})
    rig.hello()
    result = rig.event(request_id=12)
    assert rig.connection.notes == [("progress", {"id": 12, "budget_ms": 4000, "signal": "p"})]
    assert rig.connection.requests == [("complete", {"model": None, "systemPrompt": None, "prompt": "rate hi",
                                                     "timeoutMs": 3000}, 4.0)]
    assert result["actions"][0]["params"]["text"] == "p=high"


def test_event_failed_signal_uses_fallback_and_logs(tmp_path: Path) -> None:
    rig = Rig(tmp_path, SIGNAL_POLICY, complete={"error": "429 too many requests"})
    rig.hello()
    assert rig.event()["actions"][0]["params"]["text"] == "p=low"
    assert f"RT502 signal p failed: <text:{len('429 too many requests')}:" in rig.log()  # may quote a prompt
    rig.edit(SIGNAL_POLICY + "decision_log: {keep_text: [errors]}\n")
    assert rig.event()["actions"][0]["params"]["text"] == "p=low"
    assert "RT502 signal p failed: 429 too many requests" in rig.log()


def test_event_stubbed_compute_called_once_per_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = Rig(tmp_path, SIGNAL_POLICY.replace("timeout_ms: 3000", "timeout_ms: 9000"))
    rig.hello()
    seen: list[Any] = []

    async def compute(request: Any, within: float | None = None) -> Any:
        seen.append((request.name, request.kind, within))
        from router.engine.decision import SignalOutcome

        return SignalOutcome(result="mid")

    monkeypatch.setattr(rig.engine.executor, "compute", compute)
    assert rig.event()["actions"][0]["params"]["text"] == "p=mid"
    assert seen == [("p", "complete", 9.0)] and rig.connection.notes[0][1]["budget_ms"] == 10000


def test_event_reloads_a_changed_policy(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    rig.edit(POLICY.replace("hello from", "hi again from"))
    result = rig.event()
    assert result["actions"][0]["params"]["text"] == "hi again from fake/m1" and result["warnings"] == []
    assert "policy reloaded" in rig.log()


def test_burst_events_look_at_the_policy_files_no_more_often_than_recheck(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import router.runtime.server as server

    clock = [10_000_000_000]
    monkeypatch.setattr(server.time, "monotonic_ns", lambda: clock[0])
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    rig.engine.recheck_ns = server.RECHECK_MS * 1_000_000
    assert rig.event()["actions"][0]["params"]["text"] == "hello from fake/m1"
    rig.edit(POLICY.replace("hello from", "hi again from"))
    assert rig.event()["actions"][0]["params"]["text"] == "hi again from fake/m1"  # input: it looks
    assert rig.engine.changed("tool_call") is False  # a burst event within the interval does not
    rig.edit(POLICY)
    clock[0] += server.RECHECK_MS * 1_000_000 - 1
    assert rig.engine.changed("tool_call") is False and rig.engine.changed("tool_result") is False
    clock[0] += 1
    assert rig.engine.changed("tool_call") is True


@pytest.mark.parametrize("uses", ["", "use: [decision]\n"])
def test_event_broken_edit_warns_once_and_keeps_the_last_good_policy(tmp_path: Path, uses: str) -> None:
    rig = Rig(tmp_path, uses + POLICY)
    rig.hello()
    rig.edit(uses + POLICY.replace("on: input", "on: inptu") + "# broken\n")
    first, second, third = rig.event(), rig.event(), rig.event()
    [warning] = first["warnings"]
    assert warning.startswith("policy reload failed: ") and "[RT205]" in warning
    assert warning.endswith("; keeping the last good policy")
    assert second["warnings"] == [] and third["warnings"] == []
    assert third["fired"] == ["greet"]
    assert rig.log().count("policy reload failed") == 1
    rig.edit(uses + POLICY.replace("hello from", "fixed"))
    assert rig.event()["actions"][0]["params"]["text"] == "fixed fake/m1"


def test_event_reload_adding_an_event_type_returns_declarations(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    rig.edit(POLICY + "  - {id: count, on: turn_start, do: [{set: {turns: 1}}]}\n")
    result = rig.event()
    assert result["declarations"]["events"] == events("input", "turn_start")
    assert [c["name"] for c in result["declarations"]["commands"]] == ["my-router", "policy"]
    assert "declarations" not in rig.event()


def test_event_reload_replacing_the_current_event_type_returns_declarations(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    rig.edit(POLICY.replace("on: input\n    match: \"text == 'hi'\"", "on: turn_start"))
    assert rig.event()["declarations"]["events"] == events("turn_start")


def test_policy_cache_second_engine_does_not_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path, POLICY)
    first = rig.hello()
    assert list((rig.agent / "router" / "cache").glob("policy-*.json"))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("load_policy called although the cache is fresh")

    monkeypatch.setattr(router.compile.compiler, "load_policy", refuse)
    second = Engine(FakeConnection(), cwd=rig.cwd, agent=rig.agent, extra=[])  # type: ignore[arg-type]
    hello = asyncio.run(second.hello({"cwd": str(rig.cwd)}))
    assert {k: hello[k] for k in ("events", "commands", "tools", "virtual_models")} == {
        k: first[k] for k in ("events", "commands", "tools", "virtual_models")}
    assert asyncio.run(second.event(1, INPUT))["fired"] == ["greet"]
    rig.edit(POLICY + "# changed\n")
    third = Engine(FakeConnection(), cwd=rig.cwd, agent=rig.agent, extra=[])  # type: ignore[arg-type]
    warnings = asyncio.run(third.hello({"cwd": str(rig.cwd)}))["warnings"]
    assert any("load_policy called" in w for w in warnings)  # it compiled (and failed)
    assert "internal error while loading the policy" in rig.log()


# --- Connection: answers, cancel, errors ------------------------------------------------------------


class Lines(io.BytesIO):
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


def connected(rig: Rig) -> tuple[Connection, Lines]:
    writer = Lines()
    connection = Connection(writer)
    connection.engine = Engine(connection, cwd=rig.cwd, agent=rig.agent, extra=[])
    return connection, writer


def test_connection_answers_unknown_method_with_an_error(tmp_path: Path) -> None:
    async def run() -> list[dict[str, Any]]:
        connection, writer = connected(Rig(tmp_path, POLICY))
        connection.dispatch({"id": 3, "method": "frobnicate", "params": {}})
        await asyncio.gather(*connection.tasks)
        return writer.messages()

    assert asyncio.run(run()) == [{"id": 3, "error": {"code": "internal",
                                                      "message": "ValueError: unknown method 'frobnicate'"}}]


def test_connection_request_resolved_by_answer_or_error(tmp_path: Path) -> None:
    async def run() -> tuple[Any, Any, list[dict[str, Any]]]:
        connection, writer = connected(Rig(tmp_path, POLICY))
        first = asyncio.create_task(connection.request("complete", {"prompt": "p"}, 5))
        second = asyncio.create_task(connection.request("ask", {}, 5))
        for _ in range(100):  # yield until both tasks have sent their request and wait (bounded)
            if len(connection.pending) == 2:
                break
            await asyncio.sleep(0)
        assert sorted(connection.pending) == ["s1", "s2"]
        connection.dispatch({"id": "s2", "error": {"code": "x", "message": "no UI"}})
        connection.dispatch({"id": "s1", "result": {"text": "ok"}})
        connection.dispatch({"id": "s9", "result": "nobody asked"})
        return await first, await second, writer.messages()

    first, second, sent = asyncio.run(run())
    assert (first, second) == ({"text": "ok"}, {"error": "no UI"})
    assert [(m["id"], m["method"]) for m in sent] == [("s1", "complete"), ("s2", "ask")]


def test_connection_send_lone_surrogate_keeps_the_connection(tmp_path: Path) -> None:
    async def run() -> tuple[bool, list[dict[str, Any]]]:
        connection, writer = connected(Rig(tmp_path, POLICY))
        connection.send(protocol.result(1, {"text": "cut \ud83d"}))
        return connection.closing.is_set(), writer.messages()

    assert asyncio.run(run()) == (False, [{"id": 1, "result": {"text": "cut \ud83d"}}])


def test_connection_cancel_stops_the_request_and_kills_its_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pi, gpid = stub(tmp_path / "bin", HANGING_PI), tmp_path / "bin" / "gpid"
    rig = Rig(tmp_path, f"""version: 1
signals:
  c: {{child: {{prompt: "x", pi_bin: "{pi}", timeout_ms: 60000}}}}
rules:
  - {{id: r, on: input, do: [{{notify: "{{signals.c}}"}}]}}
""")
    created: list[asyncio.subprocess.Process] = []
    spawn = asyncio.create_subprocess_exec

    async def recording(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        created.append(await spawn(*args, **kwargs))
        return created[-1]

    async def run() -> list[dict[str, Any]]:
        connection, writer = connected(rig)
        connection.dispatch({"id": 1, "method": "hello", "params": {"cwd": str(rig.cwd)}})
        await asyncio.gather(*connection.tasks)
        connection.dispatch({"id": 5, "method": "event", "params": INPUT})
        # wait (for events, not for a time) until the child pi runs, its own child too, and the
        # sidecar holds its process: only then is the cancel the one this test is about
        while not (created and gpid.exists() and gpid.read_text().strip()):
            assert id_key(5) in connection.running
            await asyncio.sleep(0.01)
        connection.dispatch({"method": "cancel", "params": {"id": 5}})
        connection.dispatch({"method": "cancel", "params": {"id": 99}})  # unknown: ignored
        await asyncio.gather(*connection.tasks, return_exceptions=True)
        assert connection.running == {} and not connection.closing.is_set()
        await created[0].wait()  # reap it inside the loop
        return writer.messages()

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording)
    messages = asyncio.run(run())
    assert [m.get("id") for m in messages] == [None, 1, None]  # no answer for the cancelled request
    assert messages[0] == {"method": "progress", "params": {"id": 1, "budget_ms": 10000}}  # loading
    assert messages[2] == {"method": "progress", "params": {"id": 5, "budget_ms": 61000, "signal": "c"}}
    assert_group_gone(int((tmp_path / "bin" / "pid").read_text()))


SECRETS_POLICY = """\
version: 1
env: [MY_TOKEN, PI_BIN]
signals:
  asked:
    child: {prompt: "token {env.MY_TOKEN}", system_prompt: "you know {env.MY_TOKEN}", pi_bin: "{env.PI_BIN}",
            timeout_ms: 10000}
    fallback: "'none'"
  missing:
    child: {prompt: "x", pi_bin: "{env.PI_BIN}-gone", timeout_ms: 10000}
    fallback: "'none'"
  broken:
    expr: "env.MY_TOKEN + 1"
rules:
  - id: r
    on: input
    when: "env.MY_TOKEN != null"
    do:
      - notify: "asked={signals.asked} missing={signals.missing} broken={signals.broken}"
      - log: {file: "$ROUTER_TEST_DIR/blocker/debug.log", text: "a debug line"}
      - audit: {file: "AUDIT", record: {asked: "{signal_errors.asked}", missing: "{signal_errors.missing}"}}
"""
FAILING_PI = """#!/bin/sh
cat > "$(dirname "$0")/stdin.txt"
echo 'bad model' >&2
exit 3
"""


def test_no_environment_value_reaches_a_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets in the environment (read by rules, in a `$VAR` path, unread) stay out of the router log,
    the audit file and the warnings, while children fail, expressions fail and a file cannot be written."""
    secrets = {"MY_TOKEN": "tok-SECRET-1", "UNREAD_API_KEY": "key-SECRET-2"}
    pi = stub(tmp_path / "bin-SECRET-3", FAILING_PI)
    secret_dir = tmp_path / "dir-SECRET-4"
    secret_dir.mkdir()
    (secret_dir / "blocker").write_text("a file where the log wants a directory\n")
    for name, value in {**secrets, "PI_BIN": str(pi), "ROUTER_TEST_DIR": str(secret_dir)}.items():
        monkeypatch.setenv(name, value)
    audit = tmp_path / "audit.jsonl"
    rig = Rig(tmp_path, SECRETS_POLICY.replace("AUDIT", str(audit)))
    rig.hello()

    result = rig.event()

    assert result["actions"][0]["params"]["text"] == "asked=none missing=none broken=null"
    assert (pi.parent / "stdin.txt").read_text() == "token tok-SECRET-1"  # the rule's prompt did arrive
    [record] = [json.loads(line) for line in audit.read_text().splitlines()]
    assert record["asked"] == "child exited with code 3: bad model"
    assert record["missing"] == "child failed to start: pi-gone: No such file or directory"
    log = rig.log()
    assert "RT401 signal broken failed" in log and "RT502 signal asked failed" in log  # expr: its own code
    assert result["warnings"] == [
        "rule r: log failed: cannot write $ROUTER_TEST_DIR/blocker/debug.log: File exists; lines are "
        "dropped whole until it works again [RT501]"]
    written = "\n".join([log, audit.read_text(), *result["warnings"]])
    assert "SECRET" not in written, written


# --- `python -m router serve` over stdio --------------------------------------------------------------


class Reader(PipeLines):
    """Protocol lines from the sidecar's stdout, each within a deadline."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream, "the sidecar")

    def message(self, timeout: float = 30) -> dict[str, Any]:
        return protocol.decode(self.line(timeout))

    def answer(self, timeout: float = 30) -> dict[str, Any]:
        """The next message that is not a progress note."""
        while (message := self.message(timeout)).get("method") == "progress":
            pass
        return message


def test_serve_subprocess_speaks_the_protocol_over_stdio(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    argv = [sys.executable, "-m", "router", "serve", "--cwd", str(rig.cwd), "--agent-dir", str(rig.agent)]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, env={**os.environ, "PI_CODING_AGENT_DIR": str(rig.agent)}) as process:
        assert process.stdin is not None and process.stdout is not None
        reader = Reader(process.stdout)

        def send(*lines: bytes) -> None:
            process.stdin.write(b"".join(lines))  # type: ignore[union-attr]
            process.stdin.flush()  # type: ignore[union-attr]

        try:
            send(protocol.encode({"id": 1, "method": "hello", "params": {"cwd": str(rig.cwd)}}))
            hello = reader.answer()
            assert hello["id"] == 1 and hello["result"]["events"] == events("input")
            send(b"this is not json\n", b"[1, 2]\n",
                 protocol.encode({"id": 2, "method": "event", "params": INPUT}),
                 protocol.encode({"id": 3, "method": "frobnicate", "params": {}}))
            messages = [reader.message() for _ in range(4)]
            refused = [m for m in messages if m["id"] is None]
            assert [m["error"]["code"] for m in refused] == ["protocol", "protocol"]
            answers = {m["id"]: m for m in messages if m["id"] is not None}
            assert answers[2]["result"]["fired"] == ["greet"]
            assert answers[3]["error"]["message"] == "ValueError: unknown method 'frobnicate'"
            send(protocol.encode({"id": 4, "method": "shutdown", "params": {}}))
            assert reader.message() == {"id": 4, "result": {}}
            assert process.wait(timeout=10) == 0  # exits without waiting for stdin to close
        finally:
            if process.poll() is None:
                process.kill()
    log = (rig.agent / "router" / "router.log").read_text()
    assert log.count("protocol error") == 2 and "this is not json" in log


# --- hostile input: any id, any line, limits -----------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def strict(line: bytes) -> Any:
    """The JSON value of an output line; fails on NaN, Infinity or anything that is not JSON."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {constant} in {line[:200]!r}")

    return json.loads(line, parse_constant=refuse)


@pytest.fixture(scope="module")
def fuzz_rig(tmp_path_factory: pytest.TempPathFactory) -> Rig:
    return Rig(tmp_path_factory.mktemp("fuzz"), POLICY + """\
  - id: keep
    on: input
    group: other
    do:
      - set: {last: "{text}", inf: "{1e308 * 10}"}
""")


def feed(rig: Rig, *lines: bytes) -> tuple[Connection, list[Any]]:
    """Send raw lines to a fresh connection after a hello; wait for its requests; every output line
    after the hello's answer, decoded."""
    async def run() -> tuple[Connection, bytes]:
        connection, writer = connected(rig)
        handle_line(connection, protocol.encode({"id": 0, "method": "hello",
                                                 "params": {"cwd": str(rig.cwd)}}))
        await asyncio.gather(*connection.tasks)
        writer.seek(0)
        writer.truncate()
        for line in lines:
            handle_line(connection, line)
            if connection.tasks:
                await asyncio.gather(*connection.tasks, return_exceptions=True)
        return connection, writer.getvalue()

    connection, output = asyncio.run(run())
    return connection, [strict(line) for line in output.splitlines()]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request_id=JSON_VALUES)
def test_any_json_value_as_id_is_echoed_back(fuzz_rig: Rig, request_id: Any) -> None:
    line = json.dumps({"id": request_id, "method": "event", "params": INPUT}).encode()
    connection, messages = feed(fuzz_rig, line)
    answers = [m for m in messages if "method" not in m]
    assert len(answers) == 1 and answers[0]["id"] == request_id
    assert answers[0]["result"]["fired"] == ["greet", "keep"]
    assert not connection.closing.is_set() and connection.running == {}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request_id=JSON_VALUES)
def test_cancel_with_any_json_id_keeps_the_connection(fuzz_rig: Rig, request_id: Any) -> None:
    connection, messages = feed(fuzz_rig, json.dumps({"method": "cancel", "params": {"id": request_id}})
                                .encode(), json.dumps({"method": "cancel", "params": request_id}).encode())
    assert messages == [] and not connection.closing.is_set()


LINE_PARTS = st.sampled_from([b"{", b"}", b"[", b"]", b'"id"', b'"method"', b'"event"', b'"hello"', b":",
                              b",", b"1", b"null", b"NaN", b"Infinity", b"-1e999", b'"params"', b'"\\ud800"',
                              b"\xff", b"\x00", b" ", b'"shutdown"', b'"cancel"', b'{"id": [1]}'])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.one_of(st.binary(max_size=200), st.lists(LINE_PARTS, max_size=30).map(b"".join),
                      st.builds(lambda v: json.dumps(v).encode(), JSON_VALUES)))
def test_any_line_gets_strict_json_answers_and_the_sidecar_stays(fuzz_rig: Rig, line: bytes) -> None:
    connection, messages = feed(fuzz_rig, line.replace(b"\n", b" "))
    assert all(isinstance(m, dict) for m in messages)
    for message in messages:
        if "error" in message:
            assert set(message) == {"id", "error"} and isinstance(message["error"]["message"], str)
    shutdown = any(isinstance(m, dict) and m.get("result") == {} for m in messages)
    assert not connection.closing.is_set() or shutdown or b"shutdown" in line


@pytest.mark.parametrize(("line", "reason", "request_id"), [
    (b"not json", "Expecting value", None),
    (b"[1, 2]", "must be a JSON object", None),
    (b"\xff\xfe", "Expecting value", None),
    (b'{"id": 1, "method": "event"} trailing', "Extra data", 1),  # it starts with its id: answered
    (b'{"id": "s9", "method": "event", "params": {"x": nope}}', "Expecting value", "s9"),
])
def test_a_line_that_is_no_message_gets_an_error_to_its_leading_id_or_null_and_a_log_line(
        fuzz_rig: Rig, line: bytes, reason: str, request_id: Any) -> None:
    connection, messages = feed(fuzz_rig, line)
    (message,) = messages
    assert message["id"] == request_id and message["error"]["code"] == "protocol"
    assert reason in message["error"]["message"]
    assert "protocol error" in fuzz_rig.log() and not connection.closing.is_set()


@pytest.mark.parametrize("line", [
    b'{"id": 1, "method": "event", "params": {"type": "input", "payload": {"text": "hi", "x": '
    + b"[" * 975 + b"]" * 975 + b"}}}",
    b'{"id": 1, "method": "event", "params": {"type": "input", "payload": {"text": "hi", "x": '
    + b"[" * 200_000 + b"]" * 200_000 + b"}}}",
])
def test_a_line_nested_too_deep_is_cut_and_decided_on(fuzz_rig: Rig, line: bytes) -> None:
    _, messages = feed(fuzz_rig, line)
    message = messages[-1]
    assert message["id"] == 1 and "greet" in message["result"]["fired"], messages  # `text` intact
    assert "payload cut to the protocol's limits (nested deeper than 64 levels)" in fuzz_rig.log()


def test_non_finite_numbers_and_huge_integers_go_out_as_strict_json(tmp_path: Path) -> None:
    rig = Rig(tmp_path, """\
version: 1
rules:
  - id: keep
    on: input
    do:
      - set: {inf: "{1e308 * 10}", nan: "{1e308 * 10 - 1e308 * 10}", text: "{text}"}
      - notify: "{1e308 * 10}"
""")
    line = b'{"id": 1, "method": "event", "params": {"type": "input", "payload": {"text": NaN}}}'
    _, (answer,) = feed(rig, line)
    assert answer["id"] == 1, answer
    assert answer["result"]["state"] == {"inf": None, "nan": None, "text": "nan"}  # normalize: text
    assert answer["result"]["actions"][0]["params"]["text"] is None


def test_a_reply_that_cannot_be_encoded_becomes_an_error_reply(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path, POLICY)
    real = protocol.encode

    def picky(message: dict[str, Any]) -> bytes:
        if "result" in message:
            raise RecursionError("too deep")
        return real(message)

    monkeypatch.setattr(protocol, "encode", picky)
    connection, (answer,) = feed(rig, json.dumps({"id": [7], "method": "event", "params": INPUT}).encode())
    assert answer == {"id": [7], "error": {"code": "internal",
                                           "message": "the answer could not be encoded: RecursionError"}}
    assert not connection.closing.is_set()


def test_over_long_line_is_refused_and_the_next_line_answered(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "MAX_LINE_BYTES", 1000)

    async def run() -> list[Any]:
        reader = asyncio.StreamReader()
        reader.feed_data(b"x" * 5000 + b"\n" + b'{"id": 1}\n' + b"y" * 3000)
        reader.feed_eof()
        lines = LineReader(reader, 1000)
        return [await lines.next() for _ in range(4)]

    assert asyncio.run(run()) == [5000, b'{"id": 1}', 3000, None]
    _, (message,) = feed(Rig(tmp_path, POLICY), 5000)  # type: ignore[arg-type]
    assert message == {"id": None, "error": {"code": "protocol", "message":
                                             "line of 5000 bytes is longer than the limit of 1000"}}


# --- the last good policy is never lost ----------------------------------------------------------------

HOSTILE_EDITS = {
    "deep flow nesting": "rules: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "self-referencing merge": "base: &b\n  x: 1\n  <<: *b\nrules: []\n",
    "too many rules": "rules:\n" + "".join(f"  - {{id: r{i}, on: input}}\n" for i in range(10_001)),
    "a FIFO": None,
}


@pytest.mark.parametrize("edit", sorted(HOSTILE_EDITS))
def test_hostile_edit_keeps_the_last_good_policy_and_says_so_once(tmp_path: Path, edit: str) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    text = HOSTILE_EDITS[edit]
    if text is None:
        rig.policy.unlink()
        os.mkfifo(rig.policy)
    else:
        rig.edit(text)
    first, second = rig.event(), rig.event()
    assert first["fired"] == ["greet"] and second["fired"] == ["greet"]
    [warning] = first["warnings"]
    assert warning.startswith("policy reload failed: ") and warning.endswith("keeping the last good policy")
    assert second["warnings"] == []
    assert ("progress", {"id": 7, "budget_ms": 10000}) in rig.connection.notes  # reloads may take long


def test_reload_that_raises_keeps_the_last_good_policy(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("out of memory")

    monkeypatch.setattr(router.compile.compiler, "load_policy", broken)
    rig.edit(POLICY + "# changed\n")
    result = rig.event()
    assert result["fired"] == ["greet"]
    assert "internal error MemoryError: out of memory" in result["warnings"][0]
    assert result["warnings"][0].startswith("policy reload failed: ") and "[RT503]" in result["warnings"][0]


def test_a_new_sidecar_with_broken_files_starts_with_the_last_good_policy(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()
    rig.edit("rules: " + "[" * 100_000 + "]" * 100_000 + "\n")
    restarted = Engine(FakeConnection(), cwd=rig.cwd, agent=rig.agent, extra=[])  # type: ignore[arg-type]
    hello = asyncio.run(restarted.hello({"cwd": str(rig.cwd), "trusted": True}))
    assert hello["events"] == events("input")
    assert hello["warnings"][0].startswith("the policy has errors; the last policy that loaded")
    assert hello["warnings"][0].endswith("[RT503]")
    assert any("[RT101]" in w for w in hello["warnings"])
    assert asyncio.run(restarted.event(1, INPUT))["fired"] == ["greet"]


def test_a_new_sidecar_with_broken_files_and_no_good_policy_starts_with_the_built_in_layers(
        tmp_path: Path) -> None:
    rig = Rig(tmp_path, "rules: " + "[" * 100_000 + "]" * 100_000 + "\n")
    hello = rig.hello()
    assert hello["warnings"][0].startswith(f"{rig.policy} (or a file it uses) is not applied")
    assert any("[RT101]" in w for w in hello["warnings"]) and hello["events"] == events()
    assert rig.event()["actions"] == []


def test_write_failures_of_the_router_log_are_told_once(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello()

    def full(path: Path, line: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(executor_module, "append_line", full)
    rig.edit(POLICY + "# changed\n")
    first = rig.event()
    rig.edit(POLICY + "# changed again\n")
    second = rig.event()
    assert [w for w in first["warnings"] if w.startswith("router log: cannot write")] == [
        f"router log: cannot write {rig.agent / 'router' / 'router.log'}: No space left on device; "
        "lines are dropped whole until it works again"]
    assert not [w for w in second["warnings"] if w.startswith("router log")]
    monkeypatch.undo()
    rig.edit(POLICY + "# changed a third time\n")
    rig.event()
    assert "policy reloaded" in rig.log()


def test_serve_subprocess_survives_hostile_lines(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    argv = [sys.executable, "-m", "router", "serve", "--cwd", str(rig.cwd), "--agent-dir", str(rig.agent)]
    hostile = [
        json.dumps({"id": {"an": ["object"]}, "method": "event", "params": INPUT}).encode(),
        json.dumps({"id": [1, [2]], "method": "event", "params": INPUT}).encode(),
        b'{"id": 3, "method": "event", "params": ' + b"[" * 975 + b"]" * 975 + b"}",
        b'{"id": 4, "method": "event", "params": {"type": "input", "payload": {"text": NaN}}}',
        b'{"method": "cancel", "params": {"id": {"x": 1}}}',
        b"x" * (70 * 1024 * 1024),  # over the 64 MiB limit
        b'{"id": 5, "method": "frobnicate"}',
    ]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, env={**os.environ, "PI_CODING_AGENT_DIR": str(rig.agent)}) as process:
        assert process.stdin is not None and process.stdout is not None
        reader = Reader(process.stdout)
        try:
            hello = {"id": 1, "method": "hello", "params": {"cwd": str(rig.cwd)}}
            process.stdin.write(protocol.encode(hello))
            process.stdin.flush()
            assert reader.answer()["id"] == 1
            stdin = process.stdin

            def send_all() -> None:  # a 70 MiB write blocks until the sidecar has read it
                stdin.write(b"\n".join(hostile) + b"\n")
                stdin.flush()

            writer = threading.Thread(target=send_all)
            writer.start()
            answers = [reader.answer(timeout=60) for _ in range(6)]
            writer.join(60)
            process.stdin.write(protocol.encode({"id": 6, "method": "event", "params": INPUT}))
            process.stdin.flush()
            last = reader.answer()
        finally:
            process.kill()
    by_id = [a["id"] for a in answers]
    assert by_id == [{"an": ["object"]}, [1, [2]], 3, 4, None, 5]
    assert answers[0]["result"]["fired"] == ["greet"] and answers[1]["result"]["fired"] == ["greet"]
    assert "result" in answers[2]  # nested too deep: cut, then answered
    assert "longer than the limit" in answers[4]["error"]["message"]
    assert last["id"] == 6 and last["result"]["fired"] == ["greet"]  # alive and answering


def _serve_once(rig: Rig, *python_flags: str) -> str:
    """Start the sidecar, say hello, evaluate one event, shut it down; its stderr."""
    argv = [sys.executable, *python_flags, "-P", "-m", "router", "serve", "--cwd", str(rig.cwd),
            "--agent-dir", str(rig.agent)]
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(rig.agent)}
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=rig.agent, env=env) as process:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        reader = Reader(process.stdout)
        try:
            for message in ({"id": 1, "method": "hello", "params": {"cwd": str(rig.cwd)}},
                            {"id": 2, "method": "event", "params": INPUT},
                            {"id": 3, "method": "shutdown", "params": {}}):
                process.stdin.write(protocol.encode(message))
                process.stdin.flush()
                assert "result" in reader.answer()
            process.stdin.close()
            assert process.wait(timeout=10) == 0
            return process.stderr.read().decode()
        finally:
            if process.poll() is None:
                process.kill()


def test_a_sidecar_started_on_a_cached_policy_imports_no_validation_or_yaml_library(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    first = _serve_once(rig, "-X", "importtime")
    assert " pydantic" in first  # the first start compiles the policy from YAML
    imported = {line.rsplit("|", 1)[-1].strip() for line in _serve_once(rig, "-X", "importtime").splitlines()
                if line.startswith("import time:")}
    assert {"router.runtime.server", "router.compile.cache"} <= imported
    heavy = {m for m in imported if m.split(".")[0] in {"pydantic", "ruamel", "typer", "click", "asyncio",
                                                         "ssl", "_ssl"}}
    assert heavy == set()  # the sidecar's loop is router/runtime/loop.py


def test_startup_hello_writes_the_declarations_cache_with_every_file_it_depends_on(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    key = "ab" * 32
    hello = rig.hello(preload=True, declarationsKey=key)
    entry = rig.agent / "router" / "declarations" / f"{key}.json"
    data = json.loads(entry.read_text())
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert json.loads(data["declarations"]) == {name: hello[name] for name in (
        "events", "commands", "tools", "virtual_models", "skills", "bus_events", "excerpt_entries",
        "failure")}
    assert data["digest"] == hashlib.sha256(data["declarations"].encode()).hexdigest()
    files = dict(data["files"])
    assert files[str(rig.policy)] == hashlib.sha256(rig.policy.read_bytes()).hexdigest()
    assert files[str(rig.agent / "router" / "trust.json")] is None  # no trust store yet: its absence counts
    assert files[str((rig.cwd / ".pi" / "router.yaml").absolute())] is None  # a project policy would count


def test_no_declarations_cache_for_a_key_that_is_no_digest_or_a_hello_after_startup(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY)
    rig.hello(preload=True, declarationsKey="../../escape")
    rig.hello(declarationsKey="cd" * 32)  # the session's hello: the startup one already wrote it
    assert not (rig.agent / "router" / "declarations").exists()
    assert not (tmp_path / "escape.json").exists()


BROKEN_RULES = """\
version: 1
rules:
  - id: shout
    on: input
    when: "lower(text == 'hi') == 'x'"
    continue: true
    do: [{notify: never}]
  - id: greet
    on: input
    do: [{notify: "hello"}]
"""


def test_evaluation_errors_are_warned_with_their_code_once_per_rule_until_a_reload(tmp_path: Path) -> None:
    rig = Rig(tmp_path, BROKEN_RULES)
    rig.hello()
    first, second = rig.event(), rig.event()
    assert first["fired"] == ["greet"]
    assert first["warnings"] == ["rule 'shout': when failed: lower(): expected a string, got boolean [RT402]"]
    assert second["warnings"] == []  # told once; every occurrence is in the log
    message = "rule 'shout': when failed: lower(): expected a string, got boolean"
    lines = [line.split(" ", 1)[1] for line in rig.log().splitlines()]  # without the time
    assert len(lines) == 2 and lines[0] == lines[1]  # the same text, the same stub
    assert lines[0].startswith(f"RT402 <text:{len(message)}:") and lines[0].endswith(" (rule shout)")
    rig.edit(BROKEN_RULES + "# changed\n")
    assert rig.event()["warnings"] == first["warnings"]  # a new policy: told again


GUARD = """\
version: 1
rules:
  - id: no-force-push
    on: tool_call
    match: "tool.name == 'bash' && contains(tool.input.command, 'git push -f')"
    do: [{block: "force pushes are not allowed"}]
"""
PUSH = {"type": "tool_call", "payload": {"toolName": "bash", "input": {"command": "git push -f origin"}},
        "ctx": {}}


def blocked(result: dict[str, Any]) -> bool:
    return "no-force-push" in result.get("fired", []) and any(
        a.get("action") == "block" for a in result["actions"])


def test_an_untrusted_merge_key_bomb_is_not_parsed_and_the_users_guard_holds(tmp_path: Path) -> None:
    """Issue 22: a cloned repository's 6.9 KB of 200 chained merge keys took the sidecar past its
    start budget, and the user's block rule with it. It is not parsed now: the hello answers with
    the user's rules in force and says why the project's are off."""
    from tests.trust.test_trust import merge_bomb

    rig = Rig(tmp_path, GUARD)
    (rig.cwd / ".pi").mkdir()
    (rig.cwd / ".pi" / "router.yaml").write_text(merge_bomb())
    hello = rig.hello()
    assert "tool_call" in hello["events"] and hello["trust"]["state"] == "untrusted"
    assert [w for w in hello["warnings"] if "is not applied" in w and "router trust" in w]
    assert not [w for w in hello["warnings"] if "RT101" in w]  # nothing of it was read
    assert blocked(rig.event(PUSH))


def test_a_trusted_policy_deleted_mid_session_stays_in_force_with_a_notice(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "version: 1\n")
    (rig.cwd / ".pi").mkdir()
    project = rig.cwd / ".pi" / "router.yaml"
    project.write_text(GUARD)
    trust_project(rig)
    assert rig.hello()["trust"]["state"] == "trusted"
    assert blocked(rig.event(PUSH))
    project.unlink()  # the model runs `rm .pi/router.yaml`
    result = rig.event(PUSH)
    assert blocked(result)
    [notice] = [w for w in result["warnings"] if "was removed" in w]
    assert "stays in force until this session ends" in notice
    again = rig.event(PUSH)
    assert blocked(again) and not [w for w in again["warnings"] if "was removed" in w]  # told once
    project.write_text(GUARD.replace("git push -f", "never"))  # replaced: the trusted one stays too
    assert blocked(rig.event(PUSH))


def test_a_huge_edit_of_the_users_policy_mid_session_keeps_the_policy_in_force(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid edit too big to read within the reload's limit: the prompt is answered with the
    policy in force and a notice naming the file (the limit made tiny here: nothing waits on time)."""
    import router.runtime.server as server

    rig = Rig(tmp_path, GUARD)
    rig.hello()
    rig.edit(GUARD + "vars:\n  big: [" + ", ".join(["1"] * 40_000) + "]\n")
    monkeypatch.setattr(server, "RELOAD_PARSE_S", 0.0001)
    result = rig.event(PUSH)
    assert blocked(result)
    [notice] = [w for w in result["warnings"] if w.startswith("policy reload failed")]
    assert "took longer than" in notice and "[RT103]" in notice and "keeping the last good policy" in notice


def test_a_forget_of_your_own_in_project_data_keeps_the_trust(tmp_path: Path) -> None:
    """A `forget` changes a declared project data file as a `save` does: the trust follows it."""
    rig = Rig(tmp_path, "version: 1\nproject_data: [.pi/data.json]\n")
    (rig.cwd / ".pi").mkdir()
    data = rig.cwd / ".pi" / "data.json"
    data.write_text('{"a": 1, "b": 2}\n')
    (rig.cwd / ".pi" / "router.yaml").write_text(
        f"rules:\n  - id: reset\n    on: command\n    do:\n      - forget: {{file: '{data}', key: a}}\n")
    content, _ = read_project_content(rig.cwd, rig.agent)
    assert content is not None
    TrustStore(rig.agent).trust(content)
    assert rig.hello()["trust"]["state"] == "trusted"
    rig.event({"type": "command", "payload": {"name": "x", "args": ""}, "ctx": {}})
    assert json.loads(data.read_text()) == {"b": 2}
    assert rig.engine.trust.state == "trusted" and "trust kept for" in rig.log()


def test_a_write_of_your_own_to_project_data_keeps_the_trust_only_while_the_policy_is_unchanged(
        tmp_path: Path) -> None:
    """`/cuttle config set`-like: a command of yours saving into a declared project data file
    re-records the trust; but not when the policy's own files changed meanwhile (the model's edit
    would be trusted along with your write)."""
    rig = Rig(tmp_path, "version: 1\nproject_data: [.pi/data.json]\n")
    (rig.cwd / ".pi").mkdir()
    project = rig.cwd / ".pi" / "router.yaml"
    data = rig.cwd / ".pi" / "data.json"
    data.write_text('{"a": 1}\n')
    project.write_text("rules:\n  - id: keep\n    on: command\n    do:\n"
                       f"      - save: {{file: '{data}', key: a, value: 2}}\n")
    content, _ = read_project_content(rig.cwd, rig.agent)
    assert content is not None
    TrustStore(rig.agent).trust(content)
    assert rig.hello()["trust"]["state"] == "trusted"
    command = {"type": "command", "payload": {"name": "x", "args": ""}, "ctx": {}}
    seen: list[Any] = []
    keep = rig.engine.keep_trust_after_own_writes
    rig.engine.keep_trust_after_own_writes = lambda d: (seen.append(d), keep(d))[1]  # type: ignore[method-assign]
    rig.event(command)
    assert '"a": 2' in data.read_text() and rig.engine.trust.state == "trusted"
    assert "trust kept for" in rig.log() and len(seen) == 1
    before = TrustStore(rig.agent).projects()[str(rig.cwd.resolve())]["sha256"]
    project.write_text(project.read_text().replace("value: 2", "value: 3"))  # the model's edit, then
    data.write_text('{"a": 4}\n')  # your write lands before the next event looks at the files
    keep(seen[0])
    assert TrustStore(rig.agent).projects()[str(rig.cwd.resolve())]["sha256"] == before
    assert ".pi/router.yaml changed as well" in rig.log()
