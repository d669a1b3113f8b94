"""The decision log: records the sidecar writes, privacy, rotation, failures, `/policy why`."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from router.load.paths import log_files, project_identity
from router.replay.log_files import ReadStats, read_records
from router.runtime.decision_log import DecisionLog, LogSettings, digest_key
from router.runtime.server import Engine
from tests.runtime.test_server import FakeConnection, Rig, trust_project

PROMPT = "please refactor the parser module"
POLICY = """\
version: 1
env: [MY_TOKEN]
signals:
  p:
    complete: {prompt: "rate {text}", timeout_ms: 3000}
    fallback: "'low'"
rules:
  - id: greet
    on: input
    match: "starts_with(text, 'please')"
    do:
      - notify: "you said: {text} (token {env.MY_TOKEN})"
      - set: {cu.tier: cloud}
  - id: big
    on: input
    group: models
    when: "signals.p == 'high'"
    do: [{model: fake/big}]
  - id: try-small
    on: input
    group: trial
    shadow: true
    do: [{model: fake/small}]
  - id: try-big
    on: input
    group: trial2
    shadow: true
    do: [{model: fake/big}]
  - id: tools
    on: tool_call
    match: "tool.name == 'bash'"
    do: [{block: {reason: "no shell"}}]
provides: {model_choice: {tier: cu.tier}}   # the tier a record carries
"""


def event(text: str = PROMPT, session: str = "s-1", event_type: str = "input") -> dict[str, Any]:
    payload: dict[str, Any] = {"text": text, "source": "rpc"}
    if event_type == "tool_call":
        payload = {"toolName": "bash", "toolCallId": "c1", "input": {"command": "ls"}}
    return {"type": event_type, "payload": payload,
            "ctx": {"cwd": "/w", "sessionId": session, "model": {"provider": "fake", "id": "m1"}}}


def records(agent: Path) -> list[dict[str, Any]]:
    return list(read_records(log_files(agent / "router" / "log")))


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Rig:
    monkeypatch.setenv("MY_TOKEN", "tok-SECRET-123")
    rig = Rig(tmp_path, POLICY, complete={"text": "high"})
    rig.hello()
    return rig


def test_a_decision_writes_one_record_in_the_contract_format(rig: Rig) -> None:
    result = rig.event(event())
    assert result["fired"] == ["greet", "big", "try-small", "try-big"]
    [record] = records(rig.agent)
    assert record["v"] == 2 and record["session"] == "s-1" and record["event"] == "input"
    assert record["seq"] == 0 and record["time"].endswith("Z") and len(record["time"]) == 24
    assert record["event_digest"].startswith("sha256:") and record["policy"].startswith("sha256:")
    assert [(r["id"], r["fired"]) for r in record["rules"]] == [
        ("greet", True), ("big", True), ("try-small", False), ("try-big", False)]
    assert record["rules"][0]["origin"] == f"{rig.policy}:8"
    assert [a["action"] for a in record["actions"]] == ["notify", "set", "model"]
    assert record["signals"] == {"p": {"source": "live", "value": None, "redacted": True}}
    assert record["model"] == "fake/big" and record["tier"] == "cloud"
    assert [(s["id"], s["agrees"]) for s in record["shadow"]] == [("try-small", False), ("try-big", True)]
    assert record["shadow"][0]["would"] == [{"action": "model", "params": {"ref": "fake/small"},
                                            "rule": "try-small"}]
    assert isinstance(record["latency_ms"], float) and "text" not in record
    assert record["project"] == project_identity("/w", digest_key(rig.agent))
    assert record["project"]["digest"] != hashlib.sha256(b"/w").hexdigest()[:12]


def test_a_record_carries_the_full_session_id_and_the_projects_plain_name_only(rig: Rig,
                                                                              tmp_path: Path) -> None:
    plain, hidden = tmp_path / "shop-api", tmp_path / ".acme merger"
    session = "01a23305-7c1d-7000-8000-00000000beef"  # a UUIDv7: its first 8 characters are a time
    for cwd in (plain, hidden):
        cwd.mkdir()
        ctx = {**event()["ctx"], "cwd": str(cwd), "sessionId": session}
        rig.event({**event(session=session), "ctx": ctx})
    first, second = records(rig.agent)
    assert first["session"] == second["session"] == session
    assert first["project"]["name"] == "shop-api"
    assert second["project"]["name"] is None  # a hidden or odd name is left out; the digest stays
    assert second["project"]["digest"] == (project_identity(hidden, digest_key(rig.agent)) or {})["digest"]
    assert second["project"]["digest"] != hashlib.sha256(str(hidden).encode()).hexdigest()[:12]
    assert "acme" not in (rig.agent / "router" / "log" / "decisions.jsonl").read_text()


def test_the_project_digest_key_is_the_logs_own_made_0600_and_kept_across_runs(tmp_path: Path) -> None:
    """The key of the project digests is the decision log's `.digest-key`, made 0600 in the log's
    0700 directory when missing (the log off or not yet written), the same on every call."""
    agent = tmp_path / "agent"
    key = digest_key(agent)
    path = agent / "router" / "log" / ".digest-key"
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert digest_key(agent) == key == DecisionLog(path.parent, LogSettings(), root=agent).digest_key()
    assert digest_key(tmp_path / "other") != key


def test_a_log_that_is_off_still_keys_the_project_digest_with_the_agents_key(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "version: 1\ndecision_log: {enabled: false}\nrules:\n"
              "  - {id: r, on: input, do: [{notify: hi}]}\n")
    rig.hello()
    rig.event(event())
    assert not (rig.agent / "router" / "log" / "decisions.jsonl").exists()
    project = rig.engine.observer.project("/w", rig.engine.policy)  # type: ignore[arg-type]
    assert project == project_identity("/w", digest_key(rig.agent))


def test_prompt_text_and_environment_values_stay_out_by_default(rig: Rig) -> None:
    rig.event(event())
    text = (rig.agent / "router" / "log" / "decisions.jsonl").read_text()
    assert PROMPT not in text and "tok-SECRET-123" not in text
    [record] = records(rig.agent)
    notify = record["actions"][0]["params"]
    assert notify["text"].startswith(f"<text:{len(f'you said: {PROMPT} (token tok-SECRET-123)')}:")


def test_the_users_own_file_turns_prompt_logging_on(rig: Rig) -> None:
    rig.edit(POLICY.replace("env: [MY_TOKEN]", "env: [MY_TOKEN]\ndecision_log: {prompts: true}"))
    rig.event(event())
    [record] = records(rig.agent)
    assert record["text"] == PROMPT
    assert record["actions"][0]["params"]["text"] == f"you said: {PROMPT} (token <$MY_TOKEN>)"
    assert record["signals"]["p"] == {"source": "live", "value": "high"}
    assert "tok-SECRET-123" not in json.dumps(record)


def test_a_project_file_cannot_turn_prompt_logging_on(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "version: 1\nrules:\n  - {id: u, on: input, do: [{notify: 'u {text}'}]}\n")
    (rig.cwd / ".pi").mkdir()
    (rig.cwd / ".pi" / "router.yaml").write_text(
        "version: 1\ndecision_log: {prompts: true, enabled: true}\n"
        "rules:\n  - {id: p, on: input, group: g, do: [{notify: 'p {text}'}]}\n")
    trust_project(rig)
    hello = rig.hello()
    assert hello["trust"]["state"] == "trusted"
    assert rig.event(event())["fired"] == ["u", "p"]
    [record] = records(rig.agent)
    assert "text" not in record and PROMPT not in json.dumps(record)


def test_enabled_false_writes_nothing(rig: Rig) -> None:
    rig.edit(POLICY.replace("env: [MY_TOKEN]", "env: [MY_TOKEN]\ndecision_log: {enabled: false}"))
    assert rig.event(event())["fired"][0] == "greet"
    assert not (rig.agent / "router" / "log" / "decisions.jsonl").exists()


def test_seq_counts_each_event_type_per_session(rig: Rig) -> None:
    for params in (event(), event(event_type="tool_call"), event(), event(session="s-2"), event()):
        rig.event(params)
    assert [(r["session"], r["event"], r["seq"]) for r in records(rig.agent)] == [
        ("s-1", "input", 0), ("s-1", "tool_call", 0), ("s-1", "input", 1), ("s-2", "input", 0),
        ("s-1", "input", 2)]
    assert records(rig.agent)[1]["actions"] == [
        {"action": "block", "params": {"reason": "no shell"}, "rule": "tools"}]


def test_private_files_in_a_private_directory(rig: Rig) -> None:
    directory = rig.agent / "router" / "log"
    directory.mkdir(parents=True)
    directory.chmod(0o755)
    rig.event(event())
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "decisions.jsonl").stat().st_mode) == 0o600


def test_a_write_failure_warns_once_and_never_breaks_the_decision(rig: Rig) -> None:
    (rig.agent / "router").mkdir(exist_ok=True)
    (rig.agent / "router" / "log").write_text("a file where the log directory should be\n")
    first, second = rig.event(event()), rig.event(event())
    assert first["fired"][0] == "greet" and second["fired"][0] == "greet"
    assert [a["action"] for a in first["actions"]] == ["model", "notify"]
    warned = [w for w in first["warnings"] + second["warnings"] if w.startswith("decision log:")]
    assert len(warned) == 1 and "cannot write" in warned[0] and "still applied" in warned[0]


def record_of(number: int) -> dict[str, Any]:
    return {"v": 1, "time": f"2026-12-01T11:00:{number:02d}.000Z", "session": "s", "event": "input",
            "seq": number, "rules": [], "actions": [], "pad": "x" * 200}


def test_rotation_keeps_whole_lines_in_order_and_at_most_keep_files(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = DecisionLog(directory, LogSettings(max_bytes=4096, keep=2))
    for number in range(60):
        assert log.write(record_of(number)) is None
    names = sorted(p.name for p in directory.iterdir())
    assert names == [".decisions.lock", "decisions.1.jsonl", "decisions.2.jsonl", "decisions.jsonl"]
    assert all(p.stat().st_size <= 4096 for p in directory.iterdir())
    stats = ReadStats()
    seqs = [r["seq"] for r in read_records(log_files(directory), stats)]
    assert stats.skipped == 0 and seqs == list(range(seqs[0], 60)) and seqs[0] > 0
    smaller = DecisionLog(directory, LogSettings(max_bytes=4096, keep=1))
    for number in range(60, 80):
        smaller.write(record_of(number))
    assert sorted(p.name for p in directory.glob("decisions*")) == ["decisions.1.jsonl", "decisions.jsonl"]


def test_readers_skip_and_count_lines_that_are_not_records(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_text(json.dumps(record_of(1)) + "\n{cut off\n[1, 2]\n\n" + json.dumps(record_of(2)) + "\n")
    stats = ReadStats()
    assert [r["seq"] for r in read_records([path], stats)] == [1, 2]
    assert stats.skipped == 2 and stats.records == 2


def test_policy_why_shows_each_rule_of_the_last_decision(rig: Rig) -> None:
    empty = rig.event({"type": "command", "payload": {"name": "policy", "args": "why"},
                       "ctx": {"sessionId": "s-1"}})
    assert "no decision yet" in empty["actions"][0]["params"]["text"]
    rig.event(event("hello there", session="s-1"))
    text = rig.event({"type": "command", "payload": {"name": "policy", "args": "why"},
                      "ctx": {"sessionId": "s-1"}})["actions"][0]["params"]["text"]
    lines = text.splitlines()
    assert lines[0].startswith("last decision: input #0 at ") and "model fake/big" in lines[0]
    assert any(line.startswith("  greet: not matched (match was false)") for line in lines)
    assert "      match starts_with(text, 'please'): false  [text=\"hello there\"]" in lines
    assert any(line.startswith("  big: fired") for line in lines)
    assert "      when signals.p == 'high': true  [signals.p=\"high\"]" in lines
    assert any(line.startswith("  try-small (shadow): would fire (shadow: not applied)") for line in lines)
    assert "signals:" in lines and "  p = (text, not shown) (live)" in lines
    assert "tok-SECRET-123" not in text


def test_policy_why_names_a_failed_signal_and_its_fallback(tmp_path: Path) -> None:
    rig = Rig(tmp_path, POLICY, complete={"error": "model not found"})
    rig.hello()
    rig.event(event())
    text = rig.event({"type": "command", "payload": {"name": "policy", "args": "why"},
                      "ctx": {"sessionId": "s-1"}})["actions"][0]["params"]["text"]
    assert any(line.startswith("  big: not matched (when was false)") for line in text.splitlines())
    assert "  p = \"low\" (fallback: model not found)" in text.splitlines()


def test_record_files_are_not_world_readable_even_with_a_loose_umask(rig: Rig) -> None:
    old = os.umask(0)
    try:
        rig.event(event())
    finally:
        os.umask(old)
    path = rig.agent / "router" / "log" / "decisions.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_rule_the_executor_refuses_is_not_fired_and_has_no_actions(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "version: 1\n")
    (rig.cwd / ".pi").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    data = rig.cwd / ".pi" / "router" / "data"
    data.mkdir(parents=True)
    (data / "logs").symlink_to(outside)  # on the allow-list by name, outside once the link is followed
    (rig.cwd / ".pi" / "router.yaml").write_text(
        "version: 1\nrules:\n  - {id: p, on: input, do: [{log: "
        "{file: \".pi/router/data/logs/{text}.log\", text: hi}}]}\n")
    trust_project(rig)
    rig.hello()
    result = rig.event(event())
    assert [w for w in result["warnings"] if "rule 'p' refused" in w]
    [record] = records(rig.agent)
    assert [(r["id"], r["fired"]) for r in record["rules"]] == [("p", False)]
    assert record["actions"] == [] and record["refused"] == ["p"]
    assert list(outside.iterdir()) == []


def test_a_resumed_session_continues_its_seq_in_a_new_sidecar(rig: Rig) -> None:
    rig.event(event())
    rig.event(event())
    rig.event(event(session="other"))
    again = Rig.__new__(Rig)  # a second sidecar on the same agent dir and project
    again.__dict__.update(rig.__dict__)
    again.engine = Engine(FakeConnection({"complete": {"text": "high"}}), cwd=rig.cwd,  # type: ignore[arg-type]
                          agent=rig.agent, extra=[])
    again.hello()
    again.event(event())
    again.event(event(event_type="tool_call"))
    assert [(r["session"], r["event"], r["seq"]) for r in records(rig.agent)] == [
        ("s-1", "input", 0), ("s-1", "input", 1), ("other", "input", 0), ("s-1", "input", 2),
        ("s-1", "tool_call", 0)]


def test_rules_that_did_not_fire_are_counted_not_listed(tmp_path: Path) -> None:
    rules = "".join(f"  - {{id: r{i}, on: tool_call, match: \"tool.name == 'x{i}'\", do: [{{block: no}}]}}\n"
                    for i in range(20))
    rig = Rig(tmp_path, "version: 1\nrules:\n" + rules +
              "  - {id: s, on: tool_call, shadow: true, match: \"tool.name == 'never'\", do: [{block: no}]}\n"
              "  - {id: r-bash, on: tool_call, match: \"tool.name == 'bash'\", do: [{block: no}]}\n")
    rig.hello()
    rig.event(event(event_type="tool_call"))
    [record] = records(rig.agent)
    assert [(r["id"], r["fired"]) for r in record["rules"]] == [("s", False), ("r-bash", True)]
    assert record["evaluated"] == 22


def test_the_answer_goes_out_before_its_record_is_written(tmp_path: Path) -> None:
    from router.runtime.connection import Connection

    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "router.yaml").write_text("version: 1\nrules:\n  - {id: g, on: input, do: [{notify: hi}]}\n")
    log = agent / "router" / "log" / "decisions.jsonl"
    seen: list[tuple[bool, bool]] = []  # (an answer line, the record on disk) per write

    class Pipe:
        def write(self, line: bytes) -> None:
            seen.append((b'"result"' in line, log.exists() and log.stat().st_size > 0))

        def flush(self) -> None:
            pass

    connection = Connection(Pipe(), lambda c: Engine(c, cwd=tmp_path, agent=agent, extra=[]))

    async def main() -> None:
        for message in ({"id": 1, "method": "hello", "params": {"protocol": 1}},
                        {"id": 2, "method": "event", "params": event()}):
            await connection._answer(message)

    import asyncio
    asyncio.run(main())
    assert seen[-1] == (True, False)  # the event's answer was written while its record was not
    assert [r["seq"] for r in records(agent)] == [0]


def test_two_writers_rotate_in_turn_and_a_removed_log_comes_back(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    mine = DecisionLog(directory, LogSettings(max_bytes=2048, keep=3))
    other = DecisionLog(directory, LogSettings(max_bytes=2048, keep=3))
    for number in range(30):  # interleaved, under the lock: neither loses a line to the other's rotation
        assert (mine if number % 2 else other).write(record_of(number)) is None
    stats = ReadStats()
    seqs = sorted(r["seq"] for r in read_records(log_files(directory), stats))
    assert stats.skipped == 0 and seqs == list(range(seqs[0], 30))
    assert all(p.stat().st_size <= 2048 for p in directory.glob("decisions*"))
    for path in directory.iterdir():  # somebody clears the directory while both are open
        path.unlink()
    assert mine.write(record_of(30)) is None and other.write(record_of(31)) is None
    assert [r["seq"] for r in read_records(log_files(directory), ReadStats())] == [30, 31]


def test_a_line_another_program_left_unfinished_is_ended_first(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = DecisionLog(directory, LogSettings())
    assert log.write(record_of(1)) is None
    with (directory / "decisions.jsonl").open("a") as handle:
        handle.write('{"cut off')
    assert log.write(record_of(2)) is None
    stats = ReadStats()
    assert [r["seq"] for r in read_records(log_files(directory), stats)] == [1, 2]
    assert stats.skipped == 1


def test_the_event_digest_stands_for_the_model_catalog_by_its_own_digest() -> None:
    from router.runtime.decision_record import catalog_digest, event_digest

    catalog = {"fake/a": {"id": "a", "provider": "fake"}}
    event = {"type": "input", "text": "hi", "models": catalog}
    assert event_digest(event) == event_digest(event, catalog_digest(catalog))
    assert event_digest(event) != event_digest({**event, "models": {"fake/b": {"id": "b"}}})
    assert event_digest({"type": "input", "models": {}}) != event_digest({"type": "input", "models": catalog})


def test_a_live_turn_is_priced_with_the_policys_prices_and_models_json_loopback_providers(
        tmp_path: Path) -> None:
    rig = Rig(tmp_path, "version: 1\nrules:\n  - {id: t, on: turn_end, do: [{notify: hi}]}\n"
              "provides:\n  prices:\n    fake/team: {input: 4}\n")
    (rig.agent / "models.json").write_text(json.dumps({"providers": {"mine": {
        "baseUrl": "http://127.0.0.1:8080/v1", "models": [{"id": "m"}]}}}))
    rig.hello(models=[{"provider": "mine", "id": "m", "cost": {"input": 0, "output": 0}},
                      {"provider": "fake", "id": "team"}, {"provider": "fake", "id": "none"}])
    for model in ("mine/m", "fake/team", "fake/none"):
        usage = {"input": 250_000, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 7.0}}
        rig.event({"type": "turn_end", "payload": {"answeredBy": model, "usage": usage},
                   "ctx": {**event()["ctx"], "model": {"provider": "fake", "id": "team"}}})
    found = [(r["model"], r.get("cost"), r.get("price_source")) for r in records(rig.agent)]
    assert found == [("mine/m", 0.0, "local"), ("fake/team", 1.0, "policy"), ("fake/none", None, None)]
