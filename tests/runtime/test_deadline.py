"""Issue 22: one deadline the engine announces and keeps, payloads cut instead of refused, a
policy at the rule cap served in time, signal waits bounded by what they announced."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.engine.decision import SignalRequest
from router.lang.budget import (
    DEADLINE_ENV,
    DEADLINE_RANGE_MS,
    DEFAULT_BUDGET,
    EVENT_DEADLINE_MS,
    IO_MARGIN_MS,
    event_deadline_ms,
)
from router.load.loader import MAX_RULES
from router.load.paths import packs_dir
from router.runtime import protocol
from router.runtime.connection import LineSplitter
from router.runtime.engine_event import event_limits
from router.runtime.executor import Executor
from router.runtime.server import Engine
from tests.runtime.test_server import Reader, Rig

ROUTER = Path(sys.executable).with_name("router")
GUARD = """\
version: 1
rules:
  - id: no-force-push
    on: tool_call
    when: "tool.name == 'bash' and regex(tool.input.command, 'push\\\\s+(-f|--force)')"
    do: [{block: "no force pushes"}]
"""


def nested(depth: int, leaf: Any = "deep") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"x": value}
    return value


def depth_of(value: Any) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack += [(child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return deepest


# --- the deadline ----------------------------------------------------------------------------


def test_hello_announces_the_event_deadline_and_the_budget_comes_from_it(tmp_path: Path) -> None:
    rig = Rig(tmp_path, GUARD)
    assert rig.hello()["event_deadline_ms"] == EVENT_DEADLINE_MS
    assert DEFAULT_BUDGET.time_ms == EVENT_DEADLINE_MS - IO_MARGIN_MS
    assert event_limits(time.perf_counter()).time_ms <= EVENT_DEADLINE_MS - IO_MARGIN_MS


def test_a_line_that_waited_past_the_deadline_has_no_evaluation_time_left() -> None:
    assert event_limits(time.perf_counter() - EVENT_DEADLINE_MS / 1000).time_ms == 0


def test_a_guard_whose_line_waited_too_long_blocks_instead_of_running_late(tmp_path: Path) -> None:
    rig = Rig(tmp_path, GUARD)
    rig.hello()
    params = {"type": "tool_call", "payload": {"toolName": "bash", "input": {"command": "ls"}}, "ctx": {}}
    result = asyncio.run(rig.engine.event(7, params, time.perf_counter() - 10))
    (action,) = result["actions"]
    assert action["action"] == "block" and "evaluation budget ran out" in action["params"]["reason"]


# --- payloads: cut, decided on -----------------------------------------------------------------


def serve(rig: Rig, *lines: bytes) -> list[dict[str, Any]]:
    """The installed `router serve`: a hello, then each of `lines` once the answer before it came
    (as the bridge does); the answers."""
    argv = [str(ROUTER), "serve", "--cwd", str(rig.cwd), "--agent-dir", str(rig.agent)]
    answers = []
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as process:
        assert process.stdin is not None and process.stdout is not None
        reader = Reader(process.stdout)
        try:
            for line in [protocol.encode({"id": 0, "method": "hello", "params": {"cwd": str(rig.cwd)}}),
                         *(line + b"\n" for line in lines)]:
                process.stdin.write(line)
                process.stdin.flush()
                answers.append(reader.answer(timeout=60))
            process.stdin.write(protocol.encode({"id": 99, "method": "shutdown", "params": {}}))
            process.stdin.close()
            assert process.wait(timeout=60) == 0
        finally:
            process.kill()
    return answers


def test_a_tool_call_with_an_extra_field_nested_99_deep_still_gets_the_block(tmp_path: Path) -> None:
    rig = Rig(tmp_path, GUARD)
    payload = {"toolName": "bash", "input": {"command": "git push -f origin main", "extra": nested(99)}}
    line = json.dumps({"id": 5, "method": "event", "params": {"type": "tool_call", "payload": payload,
                                                              "ctx": {}}}).encode()
    answers = {a.get("id"): a for a in serve(rig, line) if "id" in a}
    (action,) = answers[5]["result"]["actions"]
    assert action["action"] == "block" and action["params"]["reason"] == "no force pushes"
    assert "payload cut" in rig.log()


def test_a_line_that_is_not_json_is_answered_at_once_with_an_error_to_its_id(tmp_path: Path) -> None:
    rig = Rig(tmp_path, GUARD)
    answers = {a.get("id"): a for a in serve(rig, b'{"id": 5, "method": "event", "params": {oops}}')}
    assert answers[5]["error"]["code"] == "protocol"


def test_an_over_long_line_is_refused_with_an_error_to_its_leading_id() -> None:
    splitter = LineSplitter(100)
    (dropped,) = splitter.feed(b'{"id": 12, "method": "event", "params": "' + b"x" * 500 + b'"}\n')
    assert dropped == 543 and protocol.request_id_of(dropped.head) == 12  # type: ignore[union-attr]
    chunks = [b'{"id": "s3", "params": "' + b"x" * 150, b"x" * 150, b'"}\n']
    found = [line for chunk in chunks for line in splitter.feed(chunk)]
    assert protocol.request_id_of(found[0].head) == "s3"  # type: ignore[union-attr]


def test_what_rules_read_stays_intact_and_the_event_says_it_was_cut() -> None:
    big = "a" * (protocol.MAX_STRING + 10)
    message = {"id": 1, "method": "event", "params": {"type": "tool_call", "payload": {
        "toolName": "bash", "input": {"command": "git push -f", "path": "/x", "blob": big,
                                      "deep": nested(80), "many": list(range(protocol.MAX_ITEMS + 5))}}}}
    decoded, cuts = protocol.decode_cut(json.dumps(message).encode())
    tool = decoded["params"]["payload"]
    assert tool["toolName"] == "bash" and tool["input"]["command"] == "git push -f"
    assert tool["input"]["path"] == "/x" and len(cuts) == 3
    assert tool["input"]["blob"].startswith("a" * protocol.MAX_STRING) and "$cut" in tool["input"]["blob"]
    assert tool["input"]["many"][-1] == {"$cut": "5 more items"}
    assert depth_of(decoded) <= protocol.CUT_DEPTH + 1
    assert '"$cut": "nested deeper than 64' in json.dumps(decoded)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner,
                                                                                   max_size=6),
                    max_leaves=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON, depth=st.integers(0, 150))
def test_the_cutting_decoder_keeps_the_limits_and_what_fits(value: Any, depth: int) -> None:
    message = {"id": 1, "params": nested(depth, value)}
    decoded, cuts = protocol.decode_cut(json.dumps(message).encode())
    assert depth_of(decoded) <= protocol.CUT_DEPTH + 1
    if depth_of(message) <= protocol.CUT_DEPTH:
        assert decoded == message and not cuts  # within the limits: intact
    else:
        assert cuts == [f"nested deeper than {protocol.CUT_DEPTH} levels"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(st.text(max_size=12), max_size=12), limit=st.integers(2, 6))
def test_the_cutting_decoder_cuts_strings_and_items_to_their_limits(
        items: list[str], limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(protocol, "MAX_STRING", limit)
        patch.setattr(protocol, "MAX_ITEMS", limit)
        decoded, cuts = protocol.decode_cut(json.dumps({"l": items}).encode())
    kept = decoded["l"]
    assert len(kept) <= limit + 1 and bool(cuts) == (len(items) > limit or any(len(i) > limit for i in items))
    for original, cut in zip(items[:limit], kept[:limit], strict=True):
        assert cut == original if len(original) <= limit else cut.startswith(original[:limit])


@settings(max_examples=200, deadline=None)
@given(line=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_the_cutting_decoder_never_raises_anything_but_a_refusal(line: bytes) -> None:
    with contextlib.suppress(ValueError):
        protocol.decode_cut(line)


# --- a policy at the rule cap --------------------------------------------------------------------


def test_a_policy_at_the_rule_cap_from_the_cache_announces_its_compile_and_answers(tmp_path: Path) -> None:
    default_pack = compile_files([("pack", packs_dir() / "default.yaml")])[0]
    assert default_pack is not None
    count = MAX_RULES - len(default_pack.rules) - 1  # with the guard and the default pack: the cap
    rules = "".join(f"  - id: r{i}\n    on: input\n    when: \"regex(text, 'never {i}x') or "
                    f"starts_with(text, 'no {i}')\"\n    do: [{{notify: x{i}}}]\n" for i in range(count))
    rig = Rig(tmp_path, "version: 1\nrules:\n" + rules + GUARD.split("rules:\n")[1])
    assert rig.hello()["warnings"] == []  # compiles and stores the policy in the cache
    second = Engine(rig.connection, cwd=rig.cwd, agent=rig.agent, extra=[])  # type: ignore[arg-type]
    asyncio.run(second.hello({"cwd": str(rig.cwd)}))  # a new sidecar: the policy from the cache
    rig.connection.notes.clear()
    result = asyncio.run(second.event(3, {"type": "input", "payload": {"text": "hi"}, "ctx": {}}))
    assert "actions" in result and result.get("fired") == [], result  # a decision, not a timeout
    assert rig.connection.notes[0] == ("progress", {"id": 3, "budget_ms": 10000})  # before compiling
    rig.connection.notes.clear()
    asyncio.run(second.event(4, {"type": "input", "payload": {"text": "hi"}, "ctx": {}}))
    assert rig.connection.notes == []  # compiled once: the next event goes straight to the rules


# --- signals ---------------------------------------------------------------------------------------


def test_a_signal_wait_ends_with_what_it_announced(tmp_path: Path) -> None:
    async def never(method: str, params: dict[str, Any], timeout: float) -> Any:
        await asyncio.get_running_loop().create_future()  # Pi never answers

    executor = Executor(never, cwd=str(tmp_path))
    request = SignalRequest("p", "complete", {"prompt": "x", "timeout_ms": 60_000})
    outcome = asyncio.run(executor.compute(request, within=0.0))
    assert outcome.error == "no result within its budget of 0 ms"


@pytest.mark.parametrize(("value", "expected"), [
    (None, EVENT_DEADLINE_MS), ("", EVENT_DEADLINE_MS), ("soon", EVENT_DEADLINE_MS),
    ("100", EVENT_DEADLINE_MS), ("20000", 20_000), ("99999999", DEADLINE_RANGE_MS[1])])
def test_a_slow_machine_may_lengthen_the_deadline_never_shorten_it(value: str | None, expected: int) -> None:
    environ = {} if value is None else {DEADLINE_ENV: value}
    assert event_deadline_ms(environ) == expected


def test_a_longer_deadline_is_announced_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "20000")
    assert Rig(tmp_path, "version: 1\n").hello()["event_deadline_ms"] == 20_000
    limits = event_limits(time.perf_counter(), 20_000)
    assert 19_000 < limits.time_ms <= 20_000 - IO_MARGIN_MS
    assert limits.rule_ms == DEFAULT_BUDGET.rule_ms * 20_000 // EVENT_DEADLINE_MS
