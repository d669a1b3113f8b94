"""Language semantics settled after review: truthiness, signal errors, limits, templates, events."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from router.engine.decision import SignalOutcome, SignalRequest
from router.lang.expr.expression import ExpressionSyntaxError, compile_template
from router.load.event_documents import complete_event
from router.runtime.executor import Executor
from tests.helpers import compile_ok, decide, fails, render


def test_when_zero_is_false_and_not_zero_is_true(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
rules:
  - {id: some, on: turn_end, when: "tool_calls", do: [{log: x}], continue: true}
  - {id: none, on: turn_end, when: "not tool_calls", do: [{log: y}]}
""")
    assert decide(policy, {"type": "turn_end", "tool_calls": 0}).fired == ("none",)
    assert decide(policy, {"type": "turn_end", "tool_calls": 2}).fired == ("some",)


def test_signal_errors_reading_computes_the_signal(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
signals:
  p: {classify: {model: x/y, questions: {q: {instructions: i}}}, fallback: "0.5"}
rules:
  - {id: a, on: input, when: "signal_errors.p != null", do: [{log: "{signal_errors.p}"}]}
""")
    decision = decide(policy, {"type": "input"}, outcomes={"p": SignalOutcome(error="timeout")})
    assert decision.fired == ("a",) and decision.effects[0].params["text"] == "timeout"


def test_text_helpers_are_bounded() -> None:
    assert fails("replace(replace('x' * 5000, 'x', 'x' * 5000), 'x', 'xx')").code == "RT403"
    assert fails("join('', ['x' * 90000, 'y' * 90000] * 6)").code in ("RT403", "RT402")


def test_templates_write_values_as_the_language_does() -> None:
    assert render("{a} {b} {c}", a=None, b=True, c=["x"]) == 'null true ["x"]'
    with pytest.raises(ExpressionSyntaxError):
        compile_template("{a!r}")


def test_child_runs_only_pi(tmp_path: Path) -> None:
    async def bridge(*_: object) -> object:
        return None

    executor = Executor(bridge, cwd=str(tmp_path))
    outcome = asyncio.run(executor.compute(SignalRequest("c", "child", {"pi_bin": "/bin/sh", "prompt": "x"})))
    assert outcome.error is not None and "not a pi binary" in outcome.error


def test_hand_written_events_are_completed_like_pi_events() -> None:
    event = complete_event({"type": "command", "name": "x", "args": "status now",
                            "model": {"provider": "fake", "id": "m"},
                            "usage": {"tokens": 50, "context_window": 200}})
    assert event["argv"] == ["status", "now"] and event["model"]["ref"] == "fake/m"
    assert event["usage"]["percent"] == 25


def test_unset_accepts_one_key(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, "rules:\n  - {id: a, on: input, do: [{unset: flag}]}\n")
    assert decide(policy, {"type": "input"}, state={"flag": 1, "keep": 2}).state == {"keep": 2}


def test_sidecar_exits_after_shutdown_without_closing_stdin(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-m", "router", "serve", "--cwd", str(tmp_path),
                                "--agent-dir", str(tmp_path / "agent")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path)
    assert process.stdin is not None
    process.stdin.write(b'{"id":1,"method":"hello","params":{}}\n{"id":2,"method":"shutdown"}\n')
    process.stdin.flush()
    try:
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.stdin.close()
        if process.stdout:
            process.stdout.close()
